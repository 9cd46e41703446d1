package nodehealth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// lifecycleOn returns the node's lifecycle condition of type kind as
// "Status/Reason" ("" when it has none).
func (f *fixture) lifecycleOn(name, kind string) string {
	f.t.Helper()
	c := nodeutil.Condition(f.node(name), v1.NodeConditionType(kind))
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

func (f *fixture) expectLifecycle(name, drainInProgress, drained string) {
	f.t.Helper()
	if got := f.lifecycleOn(name, nodev1alpha1.LifecycleConditionDrainInProgress); got != drainInProgress {
		f.t.Fatalf("DrainInProgress = %q, want %q", got, drainInProgress)
	}
	if got := f.lifecycleOn(name, nodev1alpha1.LifecycleConditionDrained); got != drained {
		f.t.Fatalf("Drained = %q, want %q", got, drained)
	}
}

// refuseEvictionsWhile makes the API server refuse evictions as a
// PodDisruptionBudget does while *refuse holds.
func refuseEvictionsWhile(f *fixture, refuse *bool) {
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || !*refuse {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	})
}

const ours = "True/" + nodev1alpha1.LifecycleReasonExtensionFailed
const oursCleared = "False/" + nodev1alpha1.LifecycleReasonExtensionFailed

func TestTheEscalationSaysDrainInProgressThenDrainedAndClearsBothWhenTheNodeIsUngated(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	for f.c.queue.Len() > 0 {
		name, _ := f.c.queue.Get()
		f.c.queue.Done(name)
	}
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after == 0 {
		t.Fatalf("escalation: retry in %v, err %v; want a retry of the refused pod", after, err)
	}
	if f.c.queue.Len() == 0 {
		t.Fatal("the escalation did not queue the node's sync, which says DrainInProgress")
	}
	f.sync("n1")
	f.expectLifecycle("n1", ours, "")
	if c := nodeutil.Condition(f.node("n1"), nodev1alpha1.LifecycleConditionDrainInProgress); !strings.Contains(c.Message, "kube-proxy") {
		t.Errorf("DrainInProgress message %q does not name the failed extension", c.Message)
	}

	refuse = false
	f.clock.Step(evictionInitialBackoff)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation: retry in %v, err %v; want done", after, err)
	}
	f.sync("n1")
	f.expectLifecycle("n1", oursCleared, ours)

	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after the extension renewed")
	}
	f.expectLifecycle("n1", oursCleared, oursCleared)
}

func TestDrainedNamesThePodsTheDrainMayNotEvict(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Force = false
	f := newFixture(t, opts, readyNode("n1"), pod("bare", "n1"))
	f.reachEvictionTime("n1")
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", "", ours)
	if c := nodeutil.Condition(f.node("n1"), nodev1alpha1.LifecycleConditionDrained); !strings.Contains(c.Message, "default/bare") {
		t.Errorf("Drained message %q does not name the pod left", c.Message)
	}
}

func TestAnEscalatedNodeAtRestIsNotWrittenAgain(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", "", ours)
	f.writes()
	for range 3 {
		f.clock.Step(time.Minute)
		f.sync("n1")
	}
	f.expectWrites()
}

func TestTheControllerNeverTouchesAnotherWritersLifecycleCondition(t *testing.T) {
	opts := testOptions()
	// Old enough no longer to make the node leaving: the node fails and is
	// escalated like any other, and still the condition is not ours.
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	since := start.Add(-2 * opts.LifecycleConditionMaxAge)
	f := newFixtureAt(t, start, opts, readyNode("n1", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", since)), pod("web", "n1"))
	f.reachEvictionTime("n1")
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", "True/AdminRequested", ours)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectLifecycle("n1", "True/AdminRequested", oursCleared)
}

func TestAFreshForeignDrainInProgressIsLeftAloneAndMakesTheNodeLeaving(t *testing.T) {
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	f := newFixtureAt(t, start, testOptions(), readyNode("n1", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", start)), pod("web", "n1"))
	f.reachEvictionTime("n1")
	f.expectLeaving("n1", "condition DrainInProgress=True, reason AdminRequested")
	for _, a := range f.writes() {
		if p, ok := a.(core.PatchAction); ok && strings.Contains(string(p.GetPatch()), `"type":"`+nodev1alpha1.LifecycleConditionDrainInProgress+`"`) {
			t.Fatalf("patched the foreign condition: %s", p.GetPatch())
		}
	}
	f.expectLifecycle("n1", "True/AdminRequested", "")
}

func TestTheEscalationsConditionsAreClearedWhenTheNodeStartsLeaving(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", "", ours)
	f.updateNode("n1", func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: nodev1alpha1.TaintToBeDeletedByClusterAutoscaler, Effect: v1.TaintEffectNoSchedule})
	})
	f.sync("n1")
	f.expectLifecycle("n1", "", oursCleared)
}

func TestADryRunCountsTheLifecycleConditionsOnceAndWritesNothing(t *testing.T) {
	opts := testOptions()
	opts.DryRun = true
	f := newFixture(t, opts, readyNode("n1"))
	f.reachEvictionTime("n1")
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("lifecycle"))
	f.sync("n1")
	f.sync("n1")
	if got := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("lifecycle")) - before; got != 1 {
		t.Errorf("dry_run_actions_total{action=lifecycle} grew by %v over two syncs, want 1", got)
	}
	f.expectLifecycle("n1", "", "")
}

func TestTheNoExecuteEscalationSaysDrainInProgressWhileItsTaintIsOn(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Mode = EvictionModeNoExecute
	f := newFixture(t, opts, readyNode("n1"))
	f.reachEvictionTime("n1")
	f.escalateAndSync(t, "n1")
	if !nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Fatal("no NoExecute taint")
	}
	f.expectLifecycle("n1", ours, "")
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectLifecycle("n1", oursCleared, "")
}

func TestAGuardHoldingTheDrainLeavesTheLifecycleConditionsAsTheyWere(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), readyNode("n2"), readyNode("n3"), readyNode("n4"), pod("web", "n1"))
	all := []string{"n1", "n2", "n3", "n4"}
	syncAll := func(renewing ...string) {
		for _, n := range renewing {
			f.renew("kube-proxy", n)
		}
		for _, n := range all {
			f.sync(n)
		}
	}
	syncAll(all...)
	f.clock.Step(51 * time.Second)
	syncAll("n2", "n3", "n4")
	f.clock.Step(5 * time.Minute)
	syncAll("n2", "n3", "n4")
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", ours, "")

	// Three of four nodes fail: the blast radius suspends evictions.
	f.clock.Step(51 * time.Second)
	syncAll("n4")
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("3 of 4 nodes failing did not suspend evictions")
	}
	refuse = false
	f.writes()
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Fatalf("evicted %v while the blast radius holds the drain", got)
	}
	syncAll("n4")
	f.expectLifecycle("n1", ours, "")
}

// Found by the simulation's lifecycle invariant: an ungate judged on a cache
// that does not show the DrainInProgress just written yet must still clear
// it.
func TestAnUngateClearsADrainInProgressTheCacheDoesNotShowYet(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	f.escalateThenUngateUndelivered(t, "n1")
}

// escalateThenUngateUndelivered escalates the node (its evictions refused,
// so DrainInProgress says True) and ungates it with a renewal, syncing each
// time without the informer delivering the result, and requires
// DrainInProgress True after the first sync and cleared after the second.
func (f *fixture) escalateThenUngateUndelivered(t *testing.T, node string) {
	t.Helper()
	if _, err := f.c.escalateNode(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncNode(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	f.expectLifecycle(node, ours, "")
	f.renew("kube-proxy", node)
	if err := f.c.syncNode(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	if f.tainted(node) {
		t.Fatal("still gated after the extension renewed")
	}
	f.expectLifecycle(node, oursCleared, "")
}

// The cache can show the clear of an earlier escalation when the next one has
// already set DrainInProgress again: the ungate that follows must clear what
// the controller wrote last, not skip a condition the cache says is False
// (simulation seed 3179572420155271461: the ungate 9 ms after the escalation
// left DrainInProgress=True).
func TestAnUngateClearsADrainInProgressTheCacheStillShowsClearedFromBefore(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", ours, "")
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectLifecycle("n1", oursCleared, "")

	f.reachEvictionTime("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated again after the extension failed again")
	}
	// The cache still shows the clear of the first escalation.
	f.escalateThenUngateUndelivered(t, "n1")
}

// The reverse: a clear the cache does not show yet, then a new escalation.
// The cache's True is the first escalation's; the controller's last write
// said False, so DrainInProgress is set True again.
func TestAnEscalationSetsDrainInProgressTheCacheStillShowsFromBefore(t *testing.T) {
	f := escalationDue(t, pod("web", "n1"))
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", ours, "")
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectLifecycle("n1", oursCleared, "")
	// The cache has the ungate's patch but not yet the status patch after
	// it: DrainInProgress still True. It keeps missing that status patch
	// while it shows the Node writes after it (the fake API server's
	// resourceVersions do not order them, so nothing tells it is behind).
	syncOnACacheWithoutTheClear := func() {
		t.Helper()
		f.refresh("n1")
		cached := f.node("n1").DeepCopy()
		for i := range cached.Status.Conditions {
			if string(cached.Status.Conditions[i].Type) == nodev1alpha1.LifecycleConditionDrainInProgress {
				cached.Status.Conditions[i].Status = v1.ConditionTrue
			}
		}
		if err := f.nodeIndexer().Update(cached); err != nil {
			t.Fatal(err)
		}
		if err := f.c.syncNode(f.ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}

	f.clock.Step(51 * time.Second)
	syncOnACacheWithoutTheClear()
	f.clock.Step(5 * time.Minute)
	syncOnACacheWithoutTheClear()
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	syncOnACacheWithoutTheClear()
	f.expectLifecycle("n1", ours, "")
}

// A lifecycle write whose answer is lost (applied, then a timeout) leaves
// the controller unsure of what it wrote. Its memory of the last write still
// held the escalation's DrainInProgress, and over the cache's Drained=True
// (ours, the write that was applied) it took Drained as False: the ungate
// cleared DrainInProgress and left Drained=True on a node back in service
// (simulation seed 8412077615098173412, an outage of lost answers).
func TestAnUngateClearsADrainedWhoseWriteLostItsAnswer(t *testing.T) {
	ungateAfterALostDrainedWrite(t, true)
}

// The same lost answer, but the ungate comes before the informer delivers
// the applied write: the cache shows no Drained at all. Forgetting the last
// write then left the cache to decide, and it said there was nothing to
// clear: Drained=True stayed on a node back in service (simulation seed
// 7076218198261422834). A write that may have been applied counts as
// possibly applied until one succeeds.
func TestAnUngateBeforeTheCacheShowsADrainedWhoseWriteLostItsAnswerClearsIt(t *testing.T) {
	ungateAfterALostDrainedWrite(t, false)
}

// ungateAfterALostDrainedWrite escalates n1, loses the answer to the write
// of Drained=True (applied), delivers it to the informer if delivered, then
// ungates n1 and requires both conditions of ours cleared.
func ungateAfterALostDrainedWrite(t *testing.T, delivered bool) {
	t.Helper()
	f := failTheDrainedWrite(t, true)
	f.expectLifecycle("n1", oursCleared, ours)
	if delivered {
		f.refresh("n1")
	}

	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after the extension renewed")
	}
	f.expectLifecycle("n1", oursCleared, oursCleared)
}

// The other side of an unsure write: refused, not applied. The retry with
// the same want must still write it, though the controller's last want is
// the same and a write may have set it.
func TestARefusedDrainedWriteIsWrittenAgainByTheRetry(t *testing.T) {
	f := failTheDrainedWrite(t, false)
	f.expectLifecycle("n1", ours, "")
	f.sync("n1")
	f.expectLifecycle("n1", oursCleared, ours)
}

// failTheDrainedWrite escalates n1 (DrainInProgress=True), then lets its
// drain finish with the status patch that says Drained=True failing: applied
// with its answer lost (a timeout) when applied, refused (a 500) otherwise.
// The sync that made it returned the error.
func failTheDrainedWrite(t *testing.T, applied bool) *fixture {
	t.Helper()
	f := escalationDue(t, pod("web", "n1"))
	refuse := true
	refuseEvictionsWhile(f, &refuse)
	f.escalateAndSync(t, "n1")
	f.expectLifecycle("n1", ours, "")

	fail := true
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if !fail || action.GetSubresource() != "status" {
			return false, nil, nil
		}
		fail = false
		if !applied {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
		}
		if _, _, err := core.ObjectReaction(f.client.Tracker())(action); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewTimeoutError("the answer was lost", 0)
	})
	refuse = false
	f.clock.Step(evictionInitialBackoff)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation: retry in %v, err %v; want done", after, err)
	}
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the sync whose lifecycle write failed returned no error")
	}
	return f
}
