package nodehealth

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

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
