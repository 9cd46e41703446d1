package framework

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// One node's extension dies silently, another's releases its Lease, a third
// renews on; then the first two come back. Each Lease follows its own node's
// extension only.
func TestEachNodesExtensionStopsReleasesAndComesBackOnItsOwn(t *testing.T) {
	const interval = 250 * time.Millisecond
	client := fake.NewClientset()
	rs := NewExtensionRenewers(client, RenewerOptions{Namespace: "leases", Extension: "agent", Duration: time.Second, Interval: interval})
	t.Cleanup(rs.StopAll)
	ctx, cancel := context.WithTimeout(klog.NewContext(t.Context(), logr.Discard()), time.Minute)
	defer cancel()
	lease := func(node string) *coordinationv1.Lease {
		t.Helper()
		l, err := client.CoordinationV1().Leases("leases").Get(ctx, "agent."+node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	held := func(node string) bool { return ptr.Deref(lease(node).Spec.HolderIdentity, "") == node+"/agent" }

	if err := rs.Start(ctx, "n1", "n2", "n3"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if !held(n) || !rs.Renewing(n) {
			t.Errorf("%s: Lease %+v after Start (renewing %v), want held by %s/agent", n, lease(n).Spec, rs.Renewing(n), n)
		}
	}

	rs.Stop("n1")
	silent := lease("n1").Spec.RenewTime.Time
	if err := rs.Release(ctx, "ProbeFailed", "the probe failed", "n2"); err != nil {
		t.Fatal(err)
	}
	// Two renewals of n3 after n1 stopped: n1 would have been renewed by now.
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return lease("n3").Spec.RenewTime.After(silent.Add(2 * interval)), nil
	}); err != nil {
		t.Fatalf("n3's Lease was not renewed on: %v", err)
	}
	if got := lease("n1").Spec.RenewTime.Time; !got.Equal(silent) || !held("n1") {
		t.Errorf("n1, stopped: renewTime %s (was %s), holder %q; want left as it was, to expire", got, silent, ptr.Deref(lease("n1").Spec.HolderIdentity, ""))
	}
	if l := lease("n2"); ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != "ProbeFailed" {
		t.Errorf("n2, released: holder %q, annotations %v; want empty, reason ProbeFailed", ptr.Deref(l.Spec.HolderIdentity, ""), l.Annotations)
	}
	if rs.Renewing("n1") || rs.Renewing("n2") || !rs.Renewing("n3") {
		t.Errorf("renewing n1 %v, n2 %v, n3 %v; want false, false, true", rs.Renewing("n1"), rs.Renewing("n2"), rs.Renewing("n3"))
	}

	if err := rs.Start(ctx, "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if l := lease(n); !held(n) || !l.Spec.RenewTime.After(silent) || l.Annotations[nodev1alpha1.ReasonAnnotation] != "" {
			t.Errorf("%s back: Lease %+v, annotations %v; want held and renewed again, no reason", n, l.Spec, l.Annotations)
		}
	}
}
