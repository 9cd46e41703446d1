package nodehealth

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// When the own view recovers, every Lease counts as observed at that moment:
// a Lease whose renewals the stale watch missed is not expired by the
// recovery, and it gets a full duration of grace from it (docs/controller.md).
func TestOwnViewRecoveryGivesEveryLeaseFullGrace(t *testing.T) {
	opts := testOptions()
	opts.CanaryInterval = 5 * time.Second
	f := newFixture(t, opts, readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// The watch stalls for a minute: no renewal of anything is observed.
	f.clock.Step(16 * time.Second)
	stale, _ := f.c.canary.check(f.clock.Now())
	if !stale {
		t.Fatal("canary not stale")
	}
	f.c.ownViewChanged(f.ctx, true, f.clock.Now())
	f.clock.Step(44 * time.Second)
	// It catches up: the canary is observed, the view recovers.
	canaryRenewed := func() {
		f.putLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "nodehealth-controller-canary"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-a"), RenewTime: &metav1.MicroTime{Time: f.clock.Now()}}})
	}
	canaryRenewed()
	if stale, changed := f.c.canary.check(f.clock.Now()); stale || !changed {
		t.Fatal("canary did not recover")
	}
	f.c.ownViewChanged(f.ctx, false, f.clock.Now())
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("tainted at the recovery for renewals the stale watch missed")
	}
	// The view stays current (the canary keeps being observed).
	f.clock.Step(49 * time.Second)
	canaryRenewed()
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("tainted within a full duration plus grace of the recovery")
	}
	f.clock.Step(time.Second)
	canaryRenewed()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not tainted a full duration plus grace after the recovery without a renewal")
	}
}

// Leases shorter than minimumLeaseDuration are treated as that long.
func TestMinimumLeaseDuration(t *testing.T) {
	opts := testOptions()
	opts.MinimumLeaseDuration = 10 * time.Second
	f := newFixture(t, opts, readyNode("n1"))
	l := lease("kube-proxy", "n1", "holder", f.clock.Now())
	l.Spec.LeaseDurationSeconds = ptr.To[int32](2)
	f.putLease(l)
	f.sync("n1")
	f.clock.Step(19 * time.Second)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("a 2s Lease expired before minimumLeaseDuration + grace")
	}
	f.clock.Step(time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not expired after minimumLeaseDuration + grace")
	}
}
