package operator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// lifecycle is a KEP-5683 lifecycle condition True since age before t0,
// with reason.
func lifecycle(kind, reason string, age time.Duration) nodeMod {
	return func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: v1.ConditionTrue,
			Reason: reason, LastTransitionTime: metav1.NewTime(t0.Add(-age))})
	}
}

// drainedByHand is a drain an administrator began age ago.
func drainedByHand(age time.Duration) nodeMod {
	return lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", age)
}
func cordoned(n *v1.Node) { n.Spec.Unschedulable = true }
func taint(key string) nodeMod {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
	}
}
func deleting(n *v1.Node)                           { n.DeletionTimestamp = &metav1.Time{Time: t0} }
func countNotReady(p *updatesv1alpha1.UpdatePolicy) { p.Spec.CountNotReady = true }

// TestTheBudgetCountsNodesOtherToolsDisrupt is one disruption budget across
// tools as a table: the nodes a policy selects that are leaving or under
// someone else's maintenance (and, with countNotReady, not ready) take its
// slots, each once, in the cluster and in their zone; the policy's status
// names them.
func TestTheBudgetCountsNodesOtherToolsDisrupt(t *testing.T) {
	type P = []*updatesv1alpha1.UpdatePolicy
	type N = []*v1.Node
	type S = []*updatesv1alpha1.BottlerocketShadow
	idleShadows := func(names ...string) S {
		var out S
		for _, n := range names {
			out = append(out, mkShadow(n, idle, idle))
		}
		return out
	}
	cases := []struct {
		name     string
		policies P
		nodes    N
		shadows  S
		// want is, per policy, what describePlan says, then the others
		// its status counts.
		want  map[string]string
		notes map[string]string // node → Event reason
		wake  time.Duration
	}{
		{name: "a node drained by hand takes the only slot: nothing starts until the condition is stale",
			policies: P{fleet()},
			nodes:    N{mkNode("a", drainedByHand(30*time.Minute)), mkNode("b")}, shadows: idleShadows("a", "b"),
			want:  map[string]string{"fleet": " | others=1 [a: condition DrainInProgress=True, reason AdminRequested, since 2026-03-02T09:30:00Z]"},
			notes: map[string]string{"a": "UpdateBlocked", "b": "UpdateWaiting"}, wake: 90 * time.Minute},
		{name: "a node with every signal counts once",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes: N{mkNode("a", deleting, taint(nodev1alpha1.TaintKarpenterDisrupted), cordoned, drainedByHand(time.Minute)),
				mkNode("b"), mkNode("c")},
			shadows: idleShadows("a", "b", "c"),
			want:    map[string]string{"fleet": "start b@1.20.0 | others=1 [a: deletionTimestamp set]"},
			notes:   map[string]string{"c": "UpdateWaiting"}},
		{name: "a stale foreign condition on a schedulable node is not counted",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes:    N{mkNode("a", lifecycle(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", 3*time.Hour)), mkNode("b")},
			shadows:  idleShadows("a", "b"),
			want:     map[string]string{"fleet": "start a@1.20.0 b@1.20.0 | others=0 []"}},
		{name: "a stale foreign condition on an unschedulable node is counted",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes: N{mkNode("a", cordoned, lifecycle(nodev1alpha1.LifecycleConditionMaintenanceInProgress, "Firmware", 3*time.Hour)),
				mkNode("b")},
			shadows: idleShadows("a", "b"),
			want:    map[string]string{"fleet": "start b@1.20.0 | others=1 [a: condition MaintenanceInProgress=True, reason Firmware, node unschedulable]"},
			notes:   map[string]string{"a": "UpdateBlocked"}},
		{name: "a leaving taint counts; MaintenancePlanned does not",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes: N{mkNode("a", taint(nodev1alpha1.TaintToBeDeletedByClusterAutoscaler)),
				mkNode("b", lifecycle(nodev1alpha1.LifecycleConditionMaintenancePlanned, "AdminRequested", time.Minute)), mkNode("c")},
			shadows: idleShadows("a", "b", "c"),
			want:    map[string]string{"fleet": "start b@1.20.0 | others=1 [a: taint ToBeDeletedByClusterAutoscaler]"},
			notes:   map[string]string{"a": "UpdateBlocked", "c": "UpdateWaiting"}},
		{name: "without countNotReady a node that is not Ready takes no slot",
			policies: P{fleet()},
			nodes:    N{mkNode("a"), mkNode("z", kubeletNotReady)}, shadows: idleShadows("a", "z"),
			want: map[string]string{"fleet": "start a@1.20.0 | others=0 []"}},
		{name: "with countNotReady a node that is not Ready takes the slot",
			policies: P{fleet(countNotReady)},
			nodes:    N{mkNode("a"), mkNode("z", kubeletNotReady)}, shadows: idleShadows("a", "z"),
			want:  map[string]string{"fleet": " | others=1 [z: not Ready]"},
			notes: map[string]string{"a": "UpdateWaiting", "z": "UpdateBlocked"}},
		{name: "with countNotReady a node gated for a failure takes a slot, one gated for planned maintenance does not",
			policies: P{fleet(countNotReady, limit(intstr.FromInt32(2)))},
			nodes: N{mkNode("a"), mkNode("b"),
				mkNode("x", unready(nodev1alpha1.ReasonExtensionsNotReady), taint(nodev1alpha1.DefaultReadinessTaintKey)),
				mkNode("y", unready(nodev1alpha1.ReasonPlannedMaintenance), taint(nodev1alpha1.DefaultReadinessTaintKey))},
			shadows: idleShadows("a", "b", "x", "y"),
			want:    map[string]string{"fleet": "start a@1.20.0 | others=1 [x: gated by the node-health controller (SystemExtensionsReady False, reason ExtensionsNotReady)]"},
			notes:   map[string]string{"b": "UpdateWaiting", "x": "UpdateBlocked", "y": "UpdateBlocked"}},
		{name: "our own node in flight is ours, never also another tool's",
			policies: P{fleet(countNotReady, limit(intstr.FromInt32(2)))},
			nodes: N{mkNode("a", cordoned, kubeletNotReady, taint(nodev1alpha1.DefaultReadinessTaintKey),
				unready(nodev1alpha1.ReasonPlannedMaintenance),
				lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonBottlerocketUpdate, time.Minute)),
				mkNode("b"), mkNode("c")},
			shadows: S{mkShadow("a", rebooted, rebooted, startedBy("fleet")), mkShadow("b", idle, idle), mkShadow("c", idle, idle)},
			want:    map[string]string{"fleet": "start b@1.20.0 | others=0 []"}},
		{name: "our node in flight and a node drained by hand fill a limit of two",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes:    N{mkNode("a"), mkNode("b", drainedByHand(time.Minute)), mkNode("c")},
			shadows:  S{mkShadow("a", staged, staged, startedBy("fleet")), mkShadow("b", idle, idle), mkShadow("c", idle, idle)},
			want:     map[string]string{"fleet": " | others=1 [b: condition DrainInProgress=True, reason AdminRequested, since 2026-03-02T09:59:00Z]"},
			notes:    map[string]string{"b": "UpdateBlocked", "c": "UpdateWaiting"}, wake: 119 * time.Minute},
		{name: "per zone: a node drained by hand takes its zone's slot only",
			policies: P{fleet(limit(intstr.FromInt32(4)), zoneLimit(intstr.FromInt32(1)))},
			nodes: N{mkNode("a1", zone("a"), cordoned, drainedByHand(3*time.Hour)), mkNode("a2", zone("a")), mkNode("b1", zone("b")),
				mkNode("b2", zone("b"))},
			shadows: idleShadows("a1", "a2", "b1", "b2"),
			want:    map[string]string{"fleet": "start b1@1.20.0 | others=1 [a1: condition DrainInProgress=True, reason AdminRequested, node unschedulable]"},
			notes:   map[string]string{"a1": "UpdateBlocked", "a2": "UpdateWaiting"}},
		{name: "a percentage is of the selected nodes, the leaving ones included",
			policies: P{fleet(limit(intstr.FromString("50%")))},
			nodes:    N{mkNode("a", deleting), mkNode("b"), mkNode("c"), mkNode("d")},
			shadows:  idleShadows("a", "b", "c", "d"),
			want:     map[string]string{"fleet": "start b@1.20.0 | others=1 [a: deletionTimestamp set]"},
			notes:    map[string]string{"c": "UpdateWaiting"}},
		{name: "a node another policy selects takes no slot of this one",
			policies: P{canaryPolicy(), fleetPolicy()},
			nodes:    N{mkNode("c1", canary, drainedByHand(time.Minute)), mkNode("c2", canary), mkNode("f1")},
			shadows:  idleShadows("c1", "c2", "f1"),
			want: map[string]string{"canary": " | others=1 [c1: condition DrainInProgress=True, reason AdminRequested, since 2026-03-02T09:59:00Z]",
				"fleet": "start f1@1.20.0 | others=0 []"},
			notes: map[string]string{"c1": "UpdateBlocked", "c2": "UpdateWaiting"}, wake: 119 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			f := newPolicyFixture(t, opts, tc.policies, tc.nodes, tc.shadows)
			pols := parsePolicies(tc.policies, opts.Deadlines)
			snap, err := f.c.snapshot(tc.shadows, pols, t0)
			if err != nil {
				t.Fatal(err)
			}
			got, notes := map[string]string{}, map[string]string{}
			var wakeAt time.Time
			for _, pol := range pols {
				p := planStarts(snap, pol)
				st := policyStatus(snap, pol, p, nil)
				var others []string
				for _, o := range st.OtherNodes {
					others = append(others, o.Name+": "+o.Reason)
				}
				got[pol.name] = fmt.Sprintf("%s | others=%d [%s]", describePlan(p), st.Others, strings.Join(others, "; "))
				for n, nt := range p.notes {
					if nt.reason != "" {
						notes[n] = nt.reason
					}
				}
				wake(&wakeAt, p.wake)
			}
			checkPlans(t, got, tc.want, notes, tc.notes, wakeAt, t0, tc.wake)
		})
	}
}

// TestTheStatusNamesAtMostTenOthers: the status stays small when a tool
// replaces many nodes at once; the count says how many.
func TestTheStatusNamesAtMostTenOthers(t *testing.T) {
	var nodes []*v1.Node
	var shadows []*updatesv1alpha1.BottlerocketShadow
	for i := range 12 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, mkNode(name, taint(nodev1alpha1.TaintKarpenterDisrupted)))
		shadows = append(shadows, mkShadow(name, idle, idle))
	}
	pols := []*updatesv1alpha1.UpdatePolicy{fleet()}
	f := newPolicyFixture(t, defaultOptions(), pols, nodes, shadows)
	parsed := parsePolicies(pols, defaultOptions().Deadlines)
	snap, err := f.c.snapshot(shadows, parsed, t0)
	if err != nil {
		t.Fatal(err)
	}
	st := policyStatus(snap, parsed[0], planStarts(snap, parsed[0]), nil)
	if st.Others != 12 || len(st.OtherNodes) != updatesv1alpha1.MaxOtherNodes || st.OtherNodes[0].Name != "n00" || st.OtherNodes[9].Name != "n09" {
		t.Errorf("others = %d, named %v; want 12, the first ten by name", st.Others, st.OtherNodes)
	}
}

// TestANodeStartingOrStoppingToLeaveBringsTheStartPassBack: a drain by hand
// begun or cleared, a leaving taint or a cordon change a policy's budget
// without touching what else the operator reads; a kubelet heartbeat does
// not.
func TestANodeStartingOrStoppingToLeaveBringsTheStartPassBack(t *testing.T) {
	opts := defaultOptions()
	base := mkNode("a")
	base.ResourceVersion = "1"
	for _, tc := range []struct {
		name string
		mod  nodeMod
		want bool
	}{
		{name: "a heartbeat", mod: func(n *v1.Node) { n.Status.Conditions[1].LastHeartbeatTime = metav1.NewTime(t0) }},
		{name: "a drain by hand begins", mod: drainedByHand(0), want: true},
		{name: "a leaving taint", mod: taint(nodev1alpha1.TaintKarpenterDisrupted), want: true},
		{name: "a cordon", mod: cordoned, want: true},
		{name: "our own lifecycle condition", mod: lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonBottlerocketUpdate, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			n.ResourceVersion = "2"
			tc.mod(n)
			if got := nodeUpdateMatters(base, n, &opts); got != tc.want {
				t.Errorf("forward: %v, want %v", got, tc.want)
			}
			// Clearing it matters as much as setting it.
			if got := nodeUpdateMatters(n, base, &opts); got != tc.want {
				t.Errorf("back: %v, want %v", got, tc.want)
			}
		})
	}
}
