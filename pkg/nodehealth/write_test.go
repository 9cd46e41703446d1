package nodehealth

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// conflictOnFirstPatch makes the first patch of the Node (not its status)
// fail with 409 after mutate changed the stored node, as when another writer
// got there between the controller's read and its patch; the count it
// returns says how many patches it failed.
func (f *fixture) conflictOnFirstPatch(name string, mutate func(*v1.Node)) *int {
	conflicts := 0
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		obj, _ := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", name)
		n := obj.(*v1.Node).DeepCopy()
		mutate(n)
		n.ResourceVersion = "2"
		if err := f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
			f.t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, nil)
	})
	return &conflicts
}

// A manual entry added between the controller's cached read and its patch
// (kubectl nodehealth register, kubectl annotate) survives the retry: the
// retried patch recomputes the list from the fresh node (docs/system-extensions.md).
func TestConflictRetryKeepsAConcurrentListEntry(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")
	conflicts := f.conflictOnFirstPatch("n1", func(n *v1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"gpu"}]`
	})
	f.sync("n1")
	if *conflicts != 1 {
		t.Fatalf("the test's conflict did not happen (%d)", *conflicts)
	}
	got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]
	if want := `[{"name":"gpu"},{"name":"kube-proxy","source":"rule/kube-proxy"}]`; got != want {
		t.Fatalf("list after the retried write: got %s, want %s (the concurrent manual entry must survive)", got, want)
	}
}

// A list that became invalid meanwhile is never rewritten: the write fails
// and the node is retried, where the sync reports the list.
func TestConflictRetryNeverRewritesAListThatBecameInvalid(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")
	f.conflictOnFirstPatch("n1", func(n *v1.Node) {
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"gpu"`}
	})
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("sync succeeded although the list became invalid during the write")
	}
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"gpu"` {
		t.Fatalf("invalid list was rewritten to %s", got)
	}
}

// A node deleted and re-created under the same name between the cached read
// and the patch is never written with what was computed for the old one: the
// conflict's fresh read shows another UID, and the write stops there until
// the informer delivers the new node.
func TestConflictRetryNeverWritesANodeReCreatedMeanwhile(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")
	conflicts := 0
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "" {
			return false, nil, nil
		}
		conflicts++
		if conflicts == 1 {
			obj, _ := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "n1")
			n := obj.(*v1.Node).DeepCopy()
			n.UID, n.ResourceVersion = "uid-new", "2"
			if err := f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
				t.Fatal(err)
			}
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	err := f.c.syncNode(f.ctx, "n1")
	if err == nil || !strings.Contains(err.Error(), "re-created") {
		t.Fatalf("sync: err %v, want the re-created node refused", err)
	}
	if got := strings.Join(describe(f.client.Actions()), ","); got != "patch nodes,get nodes" {
		t.Fatalf("actions %q: want the conflicting patch and the fresh read, nothing written to the new node", got)
	}
}

// loseTheNextAnswer makes the next patch of a Node (subresource "" for the
// object, "status" for its conditions) be applied and answered with a
// timeout, as when the API server's answer is lost on the way back.
func (f *fixture) loseTheNextAnswer(subresource string) {
	lost := false
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if lost || action.GetSubresource() != subresource {
			return false, nil, nil
		}
		lost = true
		if _, _, err := core.ObjectReaction(f.client.Tracker())(action); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewTimeoutError("the answer was lost", 0)
	})
}

// failAndRecover crashes n1's kube-proxy with the answer to one of the
// failure's writes lost (applied), then renews it before the Node cache
// shows that write, and syncs n1 again.
func failAndRecover(t *testing.T, subresource string) *fixture {
	t.Helper()
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.sync("n1")
	if c := f.condition("n1"); c.Status != v1.ConditionTrue {
		t.Fatalf("n1 starts %s/%s, want True", c.Status, c.Reason)
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	f.loseTheNextAnswer(subresource)
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the sync whose write lost its answer returned no error")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	return f
}

// A condition write whose answer is lost may have been applied: the node
// may hold it although neither the controller's memory of its last write
// nor the cache says so. When the extension recovered before the cache
// showed the write, the evaluation came back to what both said (True), and
// nothing was written: the node kept the False it held until the write's
// own watch event came back (simulation seed 9771644540282225497, a
// timeout as the own view went stale).
func TestAConditionWriteWhoseAnswerWasLostIsWrittenAgainWhenTheDecisionComesBack(t *testing.T) {
	f := failAndRecover(t, "status")
	if c := f.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonExtensionsReady {
		t.Errorf("n1's condition once kube-proxy renewed: %s/%s, want True/%s (the lost write's False stayed)", c.Status, c.Reason, nodev1alpha1.ReasonExtensionsReady)
	}
}

// The taint's twin: an addition whose answer is lost may have been applied,
// and a removal computed from a cache that does not show it removes nothing.
func TestATaintAddedWithItsAnswerLostIsRemovedWhenTheNodeRecovers(t *testing.T) {
	f := failAndRecover(t, "")
	if f.tainted("n1") {
		t.Errorf("n1 tainted once kube-proxy renewed: the removal, computed from a cache without the lost addition, removed nothing")
	}
}

// After a write that lost its answer, the retry's fresh read is what the
// controller knows of the node until the cache shows it: an ungate applied
// with its answer lost, retried with nothing left to remove, then a failure
// before the cache shows the removal. Computed from the cache, which still
// shows the taint, the addition added nothing.
func TestAFailureAfterARetriedUngateWhoseAnswerWasLostIsTaintedBeforeTheCacheShowsTheRemoval(t *testing.T) {
	f := crashedAndTainted(t, guardOptions())
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.loseTheNextAnswer("")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the sync whose ungate lost its answer returned no error")
	}
	if f.tainted("n1") {
		t.Fatal("the ungate whose answer was lost was not applied")
	}
	// The retry finds nothing to remove.
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	crashAgainBeforeTheCacheShowsTheUngate(t, f)
}

// A condition write whose answer was lost and which the cache then shows:
// the node holds what it wrote, applied or not, so the next evaluation that
// decides the same writes nothing. Rewriting it on every sync held back
// what follows the condition in a sync: during an outage of lost answers a
// node's escalation waited for the outage's end (simulation seed
// 12444736020531070715: its turn of the eviction rate came a second late).
func TestAConditionWriteWhoseAnswerWasLostIsKnownOnceTheCacheShowsIt(t *testing.T) {
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	f.loseTheNextAnswer("status")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the sync whose condition write lost its answer returned no error")
	}
	f.refresh("n1")
	if c := f.condition("n1"); c.Status != v1.ConditionFalse {
		t.Fatalf("the lost write was not applied: %s/%s", c.Status, c.Reason)
	}
	f.writes()
	f.clock.Step(time.Second)
	f.sync("n1")
	for _, a := range f.writes() {
		if a.GetSubresource() == "status" {
			t.Errorf("the condition was written again although the cache shows the lost write: %s", patchOf(t, a))
		}
	}
}

// A guard that fires between the decision and the retry of a write that met
// a 409 holds the taint: the retry asks the guards again on its fresh read
// ("Guards come first" in docs/controller.md), never replaying the addition
// decided on a view that has gone stale since (seed 18385101855240172789
// found it through the blast radius; this is the own view).
func TestATaintAdditionRetriedAfterAConflictIsHeldWhenTheOwnViewWentStaleMeanwhile(t *testing.T) {
	f := newFixture(t, guardOptions(), newNode("n1"))
	f.canaryRenewed()
	f.checkView()
	f.live("n1")
	conflicts := f.conflictOnFirstPatch("n1", func(n *v1.Node) {
		// No canary renewal observed for 20 s: the view is overdue by
		// the time the retry reads the node.
		f.clock.Step(20 * time.Second)
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "autoscaler", Effect: v1.TaintEffectPreferNoSchedule})
	})
	err := f.c.syncNode(f.ctx, "n1")
	if *conflicts != 1 {
		t.Fatalf("the test's conflict did not happen (%d)", *conflicts)
	}
	if err == nil || !strings.Contains(err.Error(), "own view went stale since the decision") {
		t.Fatalf("sync: err %v, want the retried addition held by the stale own view", err)
	}
	if f.tainted("n1") {
		t.Fatalf("n1 was tainted by the retry of a decision its own view no longer backs")
	}
	if got := describe(f.client.Actions()); slices.Index(got, "patch nodes") != 0 || slices.Index(got[1:], "patch nodes") >= 0 {
		t.Fatalf("actions %q: want the conflicting patch and no second one", got)
	}
}

// The condition's message names each extension as "name (Reason: detail";
// the prose, the details and the ages around the entries are never read as
// one (conditionNamesSame).
func TestTheEntriesOfAConditionMessageAreReadByNameWithTheirReason(t *testing.T) {
	for _, tc := range []struct {
		list string
		want map[string]string
	}{
		{"Every required system extension is ready.", map[string]string{}},
		{"The node rebooted and waits for its system extensions to renew their Leases. Not ready: cni (LeaseExpired: no renewal observed for 15s (lease duration 10s + grace 5s)), kube-proxy (LeaseReleased: released, reason Updating: stopping; last renewal observed 3s ago).",
			map[string]string{"cni": "LeaseExpired", "kube-proxy": "LeaseReleased"}},
		{"Not tainted although extensions are not ready: too many nodes fail at once (3 of 4 in zone z0). Not ready: kube-proxy (NeverRenewed: lease node-extension-lease/kube-proxy.n1 was never renewed).",
			map[string]string{"kube-proxy": "NeverRenewed"}},
		{"updater (StartupTimeout).", map[string]string{"updater": "StartupTimeout"}},
	} {
		if got := namedEntries(tc.list); !maps.Equal(got, tc.want) {
			t.Errorf("namedEntries(%q) = %v, want %v", tc.list, got, tc.want)
		}
	}
}

// A failure's write carries the boot record's dead mark beside the taint.
// Applied with its answer lost, its retry's fresh read shows a boot record
// the cache does not: the retry took the node for one that changed since
// the decision and sent it back to be decided again on the same cache,
// failing so until the watch delivered the write, and the condition waited
// (simulation seed 14347737726070202354). The record it finds is the one
// the decision wants: the retry goes on and writes the condition.
func TestARetryThatFindsTheBootRecordItsLostWriteAppliedWritesTheCondition(t *testing.T) {
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.sync("n1")
	before := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]
	f.clock.Step(51 * time.Second)
	f.loseTheNextAnswer("")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the sync whose write lost its answer returned no error")
	}
	if !f.tainted("n1") || f.node("n1").Annotations[nodev1alpha1.BootAnnotation] == before {
		t.Fatalf("the lost write did not apply the taint and the dead mark: tainted %v, record %q", f.tainted("n1"), f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	}
	// The cache still shows the node before the write.
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if c := f.condition("n1"); c.Status != v1.ConditionFalse || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Errorf("n1's condition after the retry: %s/%s, want False/%s", c.Status, c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
}
