package nodehealth

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
)

// escalationDue brings node n1 (with the objects) to its eviction time.
func escalationDue(t *testing.T, objects ...runtime.Object) *fixture {
	f := newFixture(t, testOptions(), append([]runtime.Object{readyNode("n1")}, objects...)...)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(51 * time.Second)
	f.sync("n1")
	f.clock.Step(5 * time.Minute)
	f.sync("n1")
	f.client.ClearActions()
	return f
}

// evictionsOf returns the names of the pods evicted since the last call.
func evictionsOf(f *fixture) []string {
	var out []string
	for _, a := range f.writes() {
		if a.GetSubresource() == "eviction" {
			out = append(out, a.(core.CreateAction).GetObject().(*policyv1.Eviction).Name)
		}
	}
	return out
}

// Issue 9 defect 5: an eviction failing with an error other than 404/429
// must not block the node's other pods; the failing pod is backed off on its
// own and named in an Event.
func TestFailingEvictionDoesNotBlockTheOtherPods(t *testing.T) {
	f := escalationDue(t, pod("a-fails", "n1"), pod("b", "n1"), pod("c", "n1"))
	failures := 2
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || action.(core.CreateAction).GetObject().(*policyv1.Eviction).Name != "a-fails" || failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	})

	after, err := f.c.escalateNode(f.ctx, "n1")
	if err != nil {
		t.Fatalf("one failing pod failed the node's escalation: %v", err)
	}
	if diff := cmp.Diff([]string{"a-fails", "b", "c"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	if after != evictionInitialBackoff {
		t.Fatalf("retry in %v, want the failing pod's back-off %v", after, evictionInitialBackoff)
	}
	f.expectEvent(EventEvictionFailed + " Evicting pod default/a-fails failed")

	// Before its back-off ends the failing pod is not tried again, and the
	// evicted ones are not evicted twice.
	f.clock.Step(evictionInitialBackoff - time.Second)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != time.Second {
		t.Fatalf("retry in %v (err %v), want the rest of the back-off", after, err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Fatalf("evicted %v during the back-off", got)
	}
	// Second failure: the back-off doubles.
	f.clock.Step(time.Second)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 2*evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the doubled back-off", after, err)
	}
	if diff := cmp.Diff([]string{"a-fails"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	f.clock.Step(2 * evictionInitialBackoff)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v), want done", after, err)
	}
	if diff := cmp.Diff([]string{"a-fails"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	if got := testCounter(t, f, "error"); got != 2 {
		t.Errorf("evictions_total{result=error} = %v, want 2", got)
	}
	if got := testCounter(t, f, "evicted"); got != 3 {
		t.Errorf("evictions_total{result=evicted} = %v, want 3", got)
	}
}

// A node that recovers while a pod backs off is not evicted any further.
func TestRecoveredNodeStopsItsDrain(t *testing.T) {
	f := escalationDue(t, pod("blocked", "n1"))
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}}
		return true, nil, err
	})
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the back-off", after, err)
	}
	f.expectEvent(EventEvictionBlocked + " Cannot evict pod default/blocked yet, retrying in 5s: The disruption budget web-pdb")
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(evictionInitialBackoff)
	f.client.ClearActions()
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) after recovery, want none", after, err)
	}
	if got := describe(f.client.Actions()); len(got) != 0 {
		t.Errorf("API actions after recovery: %q, want none", got)
	}
	if f.c.drains.m["n1"] != nil {
		t.Error("the recovered node's drain is still held")
	}
}

// The eviction queue retries a node when its earliest refused pod is due,
// not on the queue's own back-off.
func TestEvictionQueueRetriesAtTheDrainsBackoff(t *testing.T) {
	f := escalationDue(t, pod("a-fails", "n1"))
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	f.c.evictions.Add("n1")
	if !f.c.processNextEviction(f.ctx) {
		t.Fatal("queue shut down")
	}
	if n := f.c.evictions.Len(); n != 0 {
		t.Fatalf("node requeued at once (%d queued)", n)
	}
	if n := f.c.evictions.NumRequeues("n1"); n != 0 {
		t.Errorf("a pod's refusal counted as a node failure (%d requeues)", n)
	}
}

func testCounter(t *testing.T, f *fixture, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(f.c.metrics.Evictions.WithLabelValues(result))
}

// A drain retry still queued when the node recovered must not evict anything
// when it fires during a new failure of the node whose eviction clock has not
// run out (simulation seed 84: a refused pod's retry evicted the node's new
// pods 10 s into its next failure, with a 30 s eviction timeout).
func TestADrainRetryOfAnEarlierFailureDoesNotEvictInTheNextOne(t *testing.T) {
	f := escalationDue(t, pod("blocked", "n1"))
	refuse := true
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || !refuse {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}}
		return true, nil, err
	})
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the back-off", after, err)
	}
	// Recovered, then failing again before the retry fires.
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated after the renewal")
	}
	f.clock.Step(51 * time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated after the second expiry")
	}
	refuse = false
	f.client.ClearActions()
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) in the new failure, want none", after, err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Errorf("evicted %q with the new failure's eviction clock at 0s of 5m", got)
	}
	// Once the new failure's clock runs out, the node is escalated again.
	f.clock.Step(5 * time.Minute)
	f.sync("n1")
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) once due, want none", after, err)
	}
	if got := evictionsOf(f); len(got) != 1 || got[0] != "blocked" {
		t.Errorf("evicted %q once the new failure was due, want [blocked]", got)
	}
}
