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

// A node found gated at a start that was in service in its boot, and fails,
// counts as failing: its readiness taint, once someone else removes it during
// a suspension, is a failure taint like any other, held until the
// suspension ends; the found gate stays full (docs/controller.md, "Other
// writers"; the simulation's seeds 10644956011548756368 and
// 15660107569789160911, where the model put the taint back).
func TestAFailingNodeFoundGatedWhoseTaintSomeoneElseRemovesDuringASuspensionIsHeldUntilItEnds(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	// n1 and n2 stop renewing at 0 s and expire at 50 s: 2 of 6, tainted.
	for range 6 {
		f.clock.Step(10 * time.Second)
		for _, n := range names[2:] {
			f.renew("kube-proxy", n)
		}
		f.syncAll(names...)
	}
	f.expectTainted(map[string]bool{"n1": true, "n2": true, "n3": false})
	g := f.restart(testOptions())
	g.c.primeBlastRadius(g.ctx)
	g.syncAll(names...)
	if r := g.condition("n1").Reason; !g.tainted("n1") || r != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("n1 after the restart: tainted %v, reason %s; want found gated and failing (%s)", g.tainted("n1"), r, nodev1alpha1.ReasonExtensionsNotReady)
	}
	// n3 stops renewing too: 3 of 6 suspend at the 50 % threshold.
	for range 6 {
		g.clock.Step(10 * time.Second)
		for _, n := range names[3:] {
			g.renew("kube-proxy", n)
		}
		g.syncAll(names...)
	}
	if r := g.condition("n3").Reason; g.tainted("n3") || r != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("n3 expired: tainted %v, reason %s; want held (%s)", g.tainted("n3"), r, nodev1alpha1.ReasonGatingSuspended)
	}
	g.updateNode("n1", func(n *v1.Node) { n.Spec.Taints, _ = nodeutil.RemoveTaints(n.Spec.Taints, testKey) })
	g.sync("n1")
	if r := g.condition("n1").Reason; g.tainted("n1") || r != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("n1's taint removed during the suspension: tainted %v, reason %s; want held (%s)", g.tainted("n1"), r, nodev1alpha1.ReasonGatingSuspended)
	}
	g.expectTainted(map[string]bool{"n2": true})
	// n3 back: 2 of 6, the suspension ends at its sync.
	g.renew("kube-proxy", "n3")
	g.sync("n3")
	g.sync("n1")
	if r := g.condition("n1").Reason; !g.tainted("n1") || r != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("the suspension ended: n1 tainted %v, reason %s; want tainted again (%s)", g.tainted("n1"), r, nodev1alpha1.ReasonExtensionsNotReady)
	}
	g.renew("kube-proxy", "n1")
	g.sync("n1")
	if c := g.condition("n1"); g.tainted("n1") || c.Status != v1.ConditionTrue {
		t.Fatalf("n1 renewed since the start: tainted %v, condition %s/%s; want ungated", g.tainted("n1"), c.Status, c.Reason)
	}
}

// Found by the simulation (seed 17122793937090481195): a failure gate that
// an own-view recovery restarted waits for its extensions to renew after the
// recovery, nothing failing. Someone else removes its taint while the view
// is stale again: the guard holds the taint off, which makes the gate a held
// failure, and a held failure with nothing failing is no gate at all. The
// node is ready in that sync, not GatingSuspended until a later one.
func TestAWaitingGateWhoseTaintSomeoneElseRemovesInAStaleViewEndsInThatSync(t *testing.T) {
	f := newFixture(t, withCNI(guardOptions(), 0, FailurePolicyKeepGated), readyNode("a"),
		lease("kube-proxy", "a", "holder", t0), lease("cni", "a", "holder", t0))
	f.sync("a")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	if !f.tainted("a") {
		t.Fatal("kube-proxy's release did not gate the node")
	}
	// The watch stalls: the view is stale at +20 s, and cni runs out by
	// the clock at +50 s (it was ready when the guard fired).
	f.pass(55*time.Second, false)
	f.renew("kube-proxy", "a")
	f.sync("a")
	if !f.tainted("a") || !f.c.viewStale {
		t.Fatalf("in the stall: tainted %v, view stale %v; want the gate on and the view stale", f.tainted("a"), f.c.viewStale)
	}
	f.passUntilRecovered()
	f.sync("a")
	if c := f.condition("a"); !f.tainted("a") || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("after the recovery: tainted %v, condition %s; want the gate restarted, waiting for renewals", f.tainted("a"), c.Reason)
	}
	// Stale again; both Leases are still within their duration.
	f.pass(20*time.Second, false)
	if !f.c.viewStale {
		t.Fatal("the own view is not stale again")
	}
	f.updateNode("a", func(n *v1.Node) { n.Spec.Taints, _ = nodeutil.RemoveTaints(n.Spec.Taints, testKey) })
	f.sync("a")
	if c := f.condition("a"); f.tainted("a") || c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonExtensionsReady {
		t.Errorf("the taint someone else removed in the stale view: tainted %v, condition %s/%s; want untainted and %s in this sync",
			f.tainted("a"), c.Status, c.Reason, nodev1alpha1.ReasonExtensionsReady)
	}
}
