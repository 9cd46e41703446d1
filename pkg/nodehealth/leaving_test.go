package nodehealth

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func withLeavingTaint(key string) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
	}
}

func withLifecycleCondition(kind, reason string, since time.Time) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeConditionType(kind),
			Status: v1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(since)})
	}
}

// expectLeaving checks that node n is gated with reason NodeLeaving, the
// message naming signal, and that it counts on neither side of the blast
// radius.
func (f *fixture) expectLeaving(n, signal string) {
	f.t.Helper()
	if !f.tainted(n) {
		f.t.Errorf("%s: a leaving node whose extension is not ready is not gated", n)
	}
	c := f.condition(n)
	if c.Status != v1.ConditionFalse || c.Reason != nodev1alpha1.ReasonNodeLeaving {
		f.t.Errorf("%s: condition %s/%s (%s), want False/%s", n, c.Status, c.Reason, c.Message, nodev1alpha1.ReasonNodeLeaving)
	}
	if want := "leaving (" + signal; !contains(c.Message, want) {
		f.t.Errorf("%s: condition message %q does not name the signal %q", n, c.Message, want)
	}
	if _, counted := f.c.blast.memberOf(n); counted {
		f.t.Errorf("%s: a leaving node is counted in the blast radius", n)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Since Kubernetes 1.28 kube-proxy's /healthz fails on a node carrying
// ToBeDeletedByClusterAutoscaler, so a heartbeat probing it releases its
// Lease on every node being scaled down. A scale-down of 4 of 6 nodes
// (threshold 50 %) must suspend nothing, evict nothing, and leave the next
// real failure tainted as usual.
func TestAScaleDownOfMostNodesSuspendsNothingAndTheNextFailureIsTainted(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	for _, n := range names[:4] {
		f.updateNode(n, withLeavingTaint(nodev1alpha1.TaintToBeDeletedByClusterAutoscaler))
		f.release("kube-proxy", n, "Unhealthy")
	}
	f.syncAll(names...)
	if s, _ := f.c.blast.suspended(""); s {
		t.Fatal("a scale-down of 4 of 6 nodes suspended gating")
	}
	for _, n := range names[:4] {
		f.expectLeaving(n, "taint "+nodev1alpha1.TaintToBeDeletedByClusterAutoscaler)
	}
	if got := testutil.ToFloat64(f.c.metrics.LeavingNodes); got != 4 {
		t.Errorf("nodehealth_leaving_nodes = %v, want 4", got)
	}
	// Past the eviction timeout nothing is escalated.
	for range 7 {
		f.clock.Step(time.Minute)
		for _, n := range names[4:] {
			f.renew("kube-proxy", n)
		}
		f.syncAll(names...)
	}
	if n := f.c.evictions.Len(); n != 0 {
		t.Errorf("%d leaving nodes queued for eviction", n)
	}
	for _, n := range names[:4] {
		if f.state(n).escalation.marked || f.state(n).escalation.clock.elapsed > 0 || !f.state(n).escalation.clock.runningSince.IsZero() {
			t.Errorf("%s: a leaving node runs an eviction clock: %+v", n, f.state(n).escalation.clock)
		}
	}
	// e stops renewing: a failure like any other.
	f.clock.Step(51 * time.Second)
	f.renew("kube-proxy", "f")
	f.syncAll(names...)
	if !f.tainted("e") || f.condition("e").Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Errorf("e failed and is not tainted as usual: tainted %v, condition %s", f.tainted("e"), f.condition("e").Reason)
	}
	if !f.c.blast.isFailing("e") {
		t.Error("e failed and is not counted as failing")
	}
}

// A node whose drain is under way and that then starts leaving (here the
// autoscaler takes it) is drained no further, even before its next
// evaluation, and its condition says why.
func TestADrainStopsWhenTheNodeStartsLeaving(t *testing.T) {
	f := escalationDue(t, pod("blocked", "n1"))
	budgetRefusesEvictions(f)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the back-off", after, err)
	}
	f.updateNode("n1", withLeavingTaint(nodev1alpha1.TaintKarpenterDisrupted))
	f.clock.Step(evictionInitialBackoff)
	f.client.ClearActions()
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) after the node started leaving, want none", after, err)
	}
	if got := describe(f.client.Actions()); len(got) != 0 {
		t.Errorf("API actions after the node started leaving: %q, want none", got)
	}
	if f.c.drains.m["n1"] != nil {
		t.Error("the leaving node's drain is still held")
	}
	f.sync("n1")
	f.expectLeaving("n1", "taint "+nodev1alpha1.TaintKarpenterDisrupted)
	if st := f.state("n1"); st.escalation.marked {
		t.Error("the leaving node is still marked escalated")
	}
}

// A foreign lifecycle condition counts while the node is unschedulable or
// the condition is recent; a Drained=True written 3 hours ago on a
// schedulable node, which nobody cleared, does not exempt the node, and a
// condition with one of nodehealth's own reasons never does.
func TestAStaleForeignDrainedConditionDoesNotExemptASchedulableNode(t *testing.T) {
	opts := testOptions()
	// Two of three nodes fail here: the blast radius is not what this is about.
	opts.BlastRadius = BlastRadiusOptions{}
	f := newFixture(t, opts,
		readyNode("stale", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", t0.Add(-3*time.Hour))),
		readyNode("own", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonExtensionFailed, t0)),
		readyNode("recent", withLifecycleCondition(nodev1alpha1.LifecycleConditionMaintenanceInProgress, "AdminRequested", t0.Add(-time.Hour))))
	names := []string{"stale", "own", "recent"}
	for _, n := range names {
		f.renew("kube-proxy", n)
	}
	f.syncAll(names...)
	f.clock.Step(51 * time.Second)
	f.syncAll(names...)
	for _, n := range []string{"stale", "own"} {
		if c := f.condition(n); !f.tainted(n) || c.Reason != nodev1alpha1.ReasonExtensionsNotReady || !f.c.blast.isFailing(n) {
			t.Errorf("%s: tainted %v, condition %s, failing %v: want a failure like any other", n, f.tainted(n), c.Reason, f.c.blast.isFailing(n))
		}
	}
	f.expectLeaving("recent", "condition MaintenanceInProgress=True, reason AdminRequested")

	// Cordoned, the stale condition counts again: someone is draining it.
	f.updateNode("stale", func(n *v1.Node) { n.Spec.Unschedulable = true })
	f.sync("stale")
	f.expectLeaving("stale", "condition Drained=True, reason AdminRequested, node unschedulable")

	// The recent one grows stale at 2 h without any event: the node is
	// evaluated again then and fails.
	f.clock.Step(time.Hour)
	f.sync("recent")
	if c := f.condition("recent"); c.Reason != nodev1alpha1.ReasonExtensionsNotReady || !f.c.blast.isFailing("recent") {
		t.Errorf("recent: condition %s, failing %v once its lifecycle condition is 2 h old: want a failure", c.Reason, f.c.blast.isFailing("recent"))
	}
}

// The update operator's lifecycle conditions are nodehealth's own
// (docs/updater.md): a node it updates, or whose failed update halts a
// rollout, is not leaving, and a failure on it is gated like any other.
func TestTheUpdateOperatorsLifecycleConditionsDoNotMakeANodeLeaving(t *testing.T) {
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{}
	f := newFixture(t, opts,
		readyNode("updating",
			withLifecycleCondition(nodev1alpha1.LifecycleConditionMaintenanceInProgress, nodev1alpha1.LifecycleReasonBottlerocketUpdate, t0),
			withLifecycleCondition(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonBottlerocketUpdate, t0),
			withLifecycleCondition(nodev1alpha1.LifecycleConditionDrained, nodev1alpha1.LifecycleReasonBottlerocketUpdate, t0)),
		readyNode("halted", withLifecycleCondition(nodev1alpha1.LifecycleConditionMaintenanceInProgress, nodev1alpha1.LifecycleReasonUpdateFailed, t0)))
	names := []string{"updating", "halted"}
	for _, n := range names {
		f.renew("kube-proxy", n)
	}
	f.syncAll(names...)
	f.clock.Step(51 * time.Second)
	f.syncAll(names...)
	for _, n := range names {
		if c := f.condition(n); !f.tainted(n) || c.Reason != nodev1alpha1.ReasonExtensionsNotReady || !f.c.blast.isFailing(n) {
			t.Errorf("%s: tainted %v, condition %s, failing %v: want a failure like any other", n, f.tainted(n), c.Reason, f.c.blast.isFailing(n))
		}
	}
}

// The leaving condition stops counting when it grows stale: the evaluation
// asks to be run again at that instant.
func TestALeavingNodeIsEvaluatedAgainWhenItsLifecycleConditionGrowsStale(t *testing.T) {
	opts := testOptions()
	since := t0.Add(-2*time.Hour + 10*time.Minute)
	st := newNodeState(t0)
	st.uid, st.bootID, st.readyInBoot, st.last.hadGating = "uid-n1", "boot-1", true, true
	ref := nodev1alpha1.LeaseReference{Namespace: testNS, Name: "a.n1"}
	exts := []requiredExtension{{name: "a", lease: ref, affects: true}}
	d := evaluatePurely(t, evalInput{now: t0, opts: &opts, prev: st, exts: exts, leases: []leaseLookup{{}},
		node: nodeFacts{name: "n1", uid: "uid-n1", bootID: "boot-1", leaving: leavingFacts{
			Conditions: []lifecycleCondition{{Kind: nodev1alpha1.LifecycleConditionDrained, Reason: "AdminRequested", Since: since}}}},
		blast: testBlastView(false, false)})
	if d.leaving == "" {
		t.Fatal("a 1h50m old foreign Drained condition does not make the node leaving")
	}
	if want := since.Add(2 * time.Hour); !d.nextCheck.Equal(want) {
		t.Errorf("next check at %v, want %v when the condition grows stale", d.nextCheck, want)
	}
}

// Found by the simulation (seed 1 once leaving nodes were in its schedule):
// the Node handler queued a node only for what evaluation read before, so a
// node whose leaving taint was taken off stayed NodeLeaving, and a node that
// started leaving went on being drained until something else changed.
func TestANodeThatStartsOrStopsLeavingIsEvaluatedAgain(t *testing.T) {
	opts := testOptions()
	base := readyNode("n1")
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Node)
	}{
		{"leaving taint", withLeavingTaint(nodev1alpha1.TaintToBeDeletedByClusterAutoscaler)},
		{"deletionTimestamp", func(n *v1.Node) { n.DeletionTimestamp = &metav1.Time{Time: t0} }},
		{"foreign lifecycle condition", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", t0)},
		{"cordoned under a foreign lifecycle condition", func(n *v1.Node) { n.Spec.Unschedulable = true }},
	} {
		before := base.DeepCopy()
		if tc.name == "cordoned under a foreign lifecycle condition" {
			withLifecycleCondition(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", t0)(before)
		}
		after := before.DeepCopy()
		tc.mutate(after)
		if !nodeChanged(before, after, &opts) || !nodeChanged(after, before, &opts) {
			t.Errorf("%s: the node is not queued when it starts or stops leaving", tc.name)
		}
	}
	// Neither other taints nor the kubelet's conditions are news.
	after := base.DeepCopy()
	after.Spec.Taints = append(after.Spec.Taints, v1.Taint{Key: "example.com/other", Effect: v1.TaintEffectNoSchedule})
	after.Status.Conditions = append(after.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue})
	if nodeChanged(base, after, &opts) {
		t.Error("an unrelated taint or condition queues the node")
	}
}

// A node in service whose leaving depends on the clock (a foreign lifecycle
// condition that grows stale later than its Leases expire) is not steady: a
// renewal of a steady node only moves its expiry timer, and the instant the
// condition grows stale, when the node starts to count in the blast radius,
// would never be evaluated.
func TestANodeLeavingUntilItsLifecycleConditionGrowsStaleIsNotSteady(t *testing.T) {
	opts := testOptions()
	clk := testingclock.NewFakeClock(t0)
	tracker := newLeaseTracker(clk, 0)
	ref := nodev1alpha1.LeaseReference{Namespace: testNS, Name: "a.n1"}
	tracker.observe(lease("a", "n1", "holder", t0))
	st := newNodeState(t0)
	st.uid, st.bootID, st.readyInBoot, st.last.hadGating = "uid-n1", "boot-1", true, true
	exts := []requiredExtension{{name: "a", lease: ref, affects: true}}
	d := evaluatePurely(t, evalInput{now: t0, opts: &opts, prev: st, exts: exts, leases: tracker.lookupLeases(exts),
		node: nodeFacts{name: "n1", uid: "uid-n1", bootID: "boot-1", leaving: leavingFacts{
			Conditions: []lifecycleCondition{{Kind: nodev1alpha1.LifecycleConditionDrained, Reason: "AdminRequested", Since: t0.Add(-time.Hour)}}}},
		blast: testBlastView(false, false)})
	if d.leaving == "" || d.tracked {
		t.Fatalf("leaving %q, tracked %v: want a leaving node not tracked", d.leaving, d.tracked)
	}
	if d.steady {
		t.Error("a node whose leaving ends with the clock is steady: its renewals would only move its expiry timer")
	}
}

// A foreign lifecycle condition grows stale at an instant, without an
// event: the node stops leaving then, and its failure counts from then on.
// A failure of another node that comes due in the same instant and is
// decided first must be counted with it (simulation seed
// 13131537040437977849: n1's kube-proxy expired in the second n4's
// Drained=True grew stale, the controller tainted n1 on a count without n4,
// and n4's evaluation right after suspended gating at 3 of 5).
func TestANodeThatStopsLeavingInTheInstantAnotherFailsIsCountedBeforeTheFailureTaint(t *testing.T) {
	opts := testOptions()
	opts.LifecycleConditionMaxAge = 90 * time.Second
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	objs := append(readyNodes("n1", "n2", "n3", "n5"),
		readyNode("n4", withLifecycleCondition(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", t0)), lease("kube-proxy", "n4", "holder", t0))
	f := newFixture(t, opts, objs...)
	f.syncAll(names...)
	f.clock.Step(time.Second)
	for _, n := range []string{"n4", "n5"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	f.expectLeaving("n4", "condition Drained=True, reason AdminRequested")
	if !f.tainted("n5") || !f.c.blast.isFailing("n5") {
		t.Fatalf("n5 not tainted for its failure (condition %s)", f.condition("n5").Reason)
	}

	for _, at := range []time.Duration{40 * time.Second, 80 * time.Second} {
		f.clock.SetTime(t0.Add(at))
		for _, n := range []string{"n1", "n2", "n3"} {
			f.renew("kube-proxy", n)
		}
	}
	// n4's Drained=True is 90 s old in the instant n1 fails; n1 is decided
	// first.
	f.clock.SetTime(t0.Add(opts.LifecycleConditionMaxAge))
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	f.sync("n4")
	if !f.c.blast.isFailing("n4") {
		t.Fatalf("n4 does not fail once its Drained=True is stale (condition %s)", f.condition("n4").Reason)
	}
	if f.tainted("n1") {
		t.Errorf("n1 tainted although 3 of 5 nodes fail in this instant (n4 no longer leaving): condition %s", f.condition("n1").Reason)
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("n1's condition: %s, want %s", r, nodev1alpha1.ReasonGatingSuspended)
	}
}
