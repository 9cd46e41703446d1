package nodehealth

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// The readiness taint's key is the controller's (docs/controller.md, "Other
// writers"): what someone else does with it is undone, within the guards.

// A leaving node (the autoscaler's taint) whose extension expires while the
// own view is stale is held: no taint is added. A readiness taint someone
// else added in that instant is not the gate's, and goes like any taint the
// guard holds off (the simulation's seed 6450100404079171451, a cordoned
// node with someone's Drained=True: the controller kept the taint as its
// gate's, tainting a node the guard held).
func TestAReadinessTaintSomeoneElseAddsToALeavingNodeHeldByAStaleViewIsRemoved(t *testing.T) {
	leaving := func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: nodev1alpha1.TaintToBeDeletedByClusterAutoscaler, Effect: v1.TaintEffectNoSchedule})
	}
	f := newFixture(t, guardOptions(), readyNode("a", leaving), lease("kube-proxy", "a", "holder", t0))
	f.sync("a")
	f.pass(30*time.Second, true, "a")
	f.sync("a")
	// The watch stalls: the view goes stale, then the Lease expires.
	f.pass(70*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the canary did not go stale")
	}
	f.updateNode("a", withTaint)
	f.sync("a")
	if f.tainted("a") {
		t.Errorf("a leaving node held by the stale view kept the readiness taint someone else added (condition %s)", f.condition("a").Reason)
	}
	if c := f.condition("a"); c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("condition %s/%s, want %s", c.Status, c.Reason, nodev1alpha1.ReasonGatingSuspended)
	}
	if !nodeutil.HasTaint(f.node("a"), nodev1alpha1.TaintToBeDeletedByClusterAutoscaler, v1.TaintEffectNoSchedule) {
		t.Error("the autoscaler's taint was removed")
	}
}

// A gated node whose readiness taint someone else removes gets it back at
// its next sync, and keeps everyone else's taints.
func TestAReadinessTaintSomeoneElseRemovesFromAGatedNodeIsPutBack(t *testing.T) {
	other := v1.Taint{Key: "example.com/maintenance", Effect: v1.TaintEffectPreferNoSchedule}
	f := newFixture(t, testOptions(), readyNode("a"), lease("kube-proxy", "a", "holder", t0))
	f.sync("a")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	if !f.tainted("a") {
		t.Fatal("the release did not gate the node")
	}
	f.updateNode("a", func(n *v1.Node) {
		n.Spec.Taints, _ = nodeutil.RemoveTaints(n.Spec.Taints, testKey)
		n.Spec.Taints = append(n.Spec.Taints, other)
	})
	f.sync("a")
	if !f.tainted("a") {
		t.Errorf("the readiness taint someone else removed was not put back (condition %s)", f.condition("a").Reason)
	}
	if !nodeutil.HasTaint(f.node("a"), other.Key, other.Effect) {
		t.Errorf("the other writer's taint was lost: %s", fmtTaints(f.node("a")))
	}
}

// The Node event of someone else's change to the readiness taint queues the
// node: nothing else would bring a failed node's sync, whose extension
// renews no more, before its next timer.
func TestSomeoneElsesChangeToTheReadinessTaintQueuesTheNode(t *testing.T) {
	f := newFixture(t, testOptions())
	tainted := newNode("a", withTaint)
	for name, change := range map[string][2]*v1.Node{
		"removed": {tainted, newNode("a")},
		"added":   {newNode("a"), tainted},
	} {
		old, cur := change[0].DeepCopy(), change[1].DeepCopy()
		cur.ResourceVersion = "2"
		f.c.updateNode(old, cur)
		if f.c.queue.Len() != 1 {
			t.Errorf("readiness taint %s by someone else: %d nodes queued, want 1", name, f.c.queue.Len())
			continue
		}
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
}
