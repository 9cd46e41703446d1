package operator

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

const pool = "example.com/pool"

// canaryPolicy governs the canary pool; fleetPolicy every other managed
// node: the two never select the same node.
func canaryPolicy(mods ...policyMod) *updatesv1alpha1.UpdatePolicy {
	return mkPolicy("canary", map[string]string{pool: "canary"}, mods...)
}
func fleetPolicy(mods ...policyMod) *updatesv1alpha1.UpdatePolicy {
	p := mkPolicy("fleet", nil, mods...)
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: pool, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"canary"}}}}
	return p
}
func canary(n *v1.Node) { n.Labels[pool] = "canary" }
func startedBy(p string) shadowMod {
	return annotate(updatesv1alpha1.PolicyAnnotation, p)
}

// TestPlanStartsPicksTheNodesEachPolicyStartsOrSaysWhyItStartsNone is the
// start decision as a table: each row is a cluster (policies, nodes, shadows,
// the operator's clock) and the nodes each policy starts, why the others
// start nothing, and the Events planned.
func TestPlanStartsPicksTheNodesEachPolicyStartsOrSaysWhyItStartsNone(t *testing.T) {
	type P = []*updatesv1alpha1.UpdatePolicy
	type N = []*v1.Node
	type S = []*updatesv1alpha1.BottlerocketShadow
	cases := []struct {
		name     string
		now      time.Time // t0 (10:00 UTC, a Monday in March: 11:00 in Berlin) unless set
		own      string
		policies P
		nodes    N
		shadows  S
		// want is, per policy, "start NODE@VERSION ..." or "halt REASON".
		want  map[string]string
		notes map[string]string // node → Event reason
		wake  time.Duration
	}{
		{name: "no policy: no node starts, and no Event floods a fresh install",
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{}},
		{name: "two policies select a node: it never starts, the other node of one of them does",
			policies: P{mkPolicy("one", nil), mkPolicy("two", map[string]string{pool: "canary"})},
			nodes:    N{mkNode("a", canary), mkNode("b")}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle)},
			want:  map[string]string{"one": "start b@1.20.0", "two": ""},
			notes: map[string]string{"a": "UpdatePolicyConflict"}},
		{name: "waves: the canary pool goes to the new pin, the fleet stays on the old one",
			policies: P{canaryPolicy(pin(newV)), fleetPolicy(pin(oldV))},
			nodes:    N{mkNode("c1", canary), mkNode("f1"), mkNode("f2")},
			shadows:  S{mkShadow("c1", idle, idle), mkShadow("f1", idle, idle), mkShadow("f2", idle, idle)},
			want:     map[string]string{"canary": "start c1@1.20.0", "fleet": ""}},
		{name: "limits are per policy: a canary in flight takes no slot of the fleet",
			policies: P{canaryPolicy(), fleetPolicy()},
			nodes:    N{mkNode("c1", canary), mkNode("c2", canary), mkNode("f1")},
			shadows:  S{mkShadow("c1", staged, staged, startedBy("canary")), mkShadow("c2", idle, idle), mkShadow("f1", idle, idle)},
			want:     map[string]string{"canary": "", "fleet": "start f1@1.20.0"}},
		{name: "a percentage is of the nodes the policy governs, not of all managed nodes",
			policies: P{canaryPolicy(), fleetPolicy(limit(intstr.FromString("50%")))},
			nodes:    N{mkNode("c1", canary), mkNode("c2", canary), mkNode("c3", canary), mkNode("c4", canary), mkNode("f1"), mkNode("f2")},
			shadows: S{mkShadow("c1", staged, staged, startedBy("canary")), mkShadow("c2", idle, idle), mkShadow("c3", idle, idle),
				mkShadow("c4", idle, idle), mkShadow("f1", idle, idle), mkShadow("f2", idle, idle)},
			want: map[string]string{"canary": "", "fleet": "start f1@1.20.0"}},
		{name: "a failure halts its policy only",
			policies: P{canaryPolicy(), fleetPolicy()},
			nodes:    N{mkNode("c1", canary), mkNode("c2", canary), mkNode("f1")},
			shadows:  S{mkShadow("c1", idle, idle, running(newV), failedAt(t0), startedBy("canary")), mkShadow("c2", idle, idle), mkShadow("f1", idle, idle)},
			want:     map[string]string{"canary": "halt UpdateFailed c1", "fleet": "start f1@1.20.0"}},
		{name: "a failure halts the policy that started the update although the node's labels moved it",
			policies: P{canaryPolicy(), fleetPolicy()},
			nodes:    N{mkNode("c1"), mkNode("c2", canary), mkNode("f1")},
			shadows:  S{mkShadow("c1", idle, idle, running(newV), failedAt(t0), startedBy("canary")), mkShadow("c2", idle, idle), mkShadow("f1", idle, idle)},
			want:     map[string]string{"canary": "halt UpdateFailed c1", "fleet": "start f1@1.20.0"}},
		{name: "a failure no policy can be placed with halts every policy",
			policies: P{canaryPolicy(), fleetPolicy()},
			nodes:    N{mkNode("c2", canary), mkNode("f1")},
			shadows:  S{mkShadow("gone", idle, idle, failedAt(t0)), mkShadow("c2", idle, idle), mkShadow("f1", idle, idle)},
			want:     map[string]string{"canary": "halt UpdateFailed gone", "fleet": "halt UpdateFailed gone"}},
		{name: "a paused policy starts nothing; the other goes on",
			policies: P{canaryPolicy(paused), fleetPolicy()},
			nodes:    N{mkNode("c1", canary), mkNode("f1")}, shadows: S{mkShadow("c1", idle, idle), mkShadow("f1", idle, idle)},
			want: map[string]string{"canary": "halt Paused", "fleet": "start f1@1.20.0"}},
		{name: "a window at 11:00 Berlin is open at 10:00 UTC in winter, until 12:00 Berlin",
			policies: P{fleet(inWindow("0 11 * * *", time.Hour, "Europe/Berlin"))},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "start a@1.20.0"}, wake: time.Hour},
		{name: "a window at 10:00 Berlin has closed at 10:00 UTC; it opens again at 09:00 UTC tomorrow",
			policies: P{fleet(inWindow("0 10 * * *", time.Hour, "Europe/Berlin"))},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "halt OutsideWindow"}, wake: 23 * time.Hour},
		{name: "in summer the same window opens an hour earlier in UTC",
			now:      time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC),
			policies: P{fleet(inWindow("0 11 * * *", time.Hour, "Europe/Berlin"))},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "start a@1.20.0"}, wake: time.Hour},
		{name: "an unknown time zone: the policy starts nothing",
			policies: P{fleet(inWindow("0 11 * * *", time.Hour, "Mars/Olympus"))},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "halt InvalidSpec"}},
		{name: "a window longer than the interval between its starts: the policy starts nothing",
			policies: P{fleet(inWindow("* * * * *", 8760*time.Hour, ""))},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "halt InvalidSpec"}},
		{name: "a soak the MonitoringUpdate deadline cannot hold: the policy starts nothing",
			policies: P{fleet(func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.PostRebootSoak = &metav1.Duration{Duration: monitorDL} })},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": "halt InvalidSpec"}},
		{name: "back-off: no start, wake when it ends",
			policies: P{fleet()},
			nodes:    N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, crashed(3, t0.Add(-5*time.Minute)))},
			want: map[string]string{"fleet": ""}, wake: 3 * time.Minute},
		{name: "the operator's own node goes last within its policy",
			own:      "a",
			policies: P{fleet(limit(intstr.FromInt32(2)))},
			nodes:    N{mkNode("a"), mkNode("b"), mkNode("c")},
			shadows:  S{mkShadow("a", idle, idle), mkShadow("b", idle, idle), mkShadow("c", idle, idle)},
			want:     map[string]string{"fleet": "start b@1.20.0 c@1.20.0"}},
		{name: "per-zone limit of the policy's nodes in the zone",
			policies: P{fleet(limit(intstr.FromInt32(4)), zoneLimit(intstr.FromInt32(1)))},
			nodes:    N{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b"))},
			shadows:  S{mkShadow("a1", idle, idle), mkShadow("a2", idle, idle), mkShadow("b1", idle, idle)},
			want:     map[string]string{"fleet": "start a1@1.20.0 b1@1.20.0"}},
		{name: "a pin changed after a node started: the node in flight keeps its version and holds the slot",
			policies: P{fleet(pin("1.21.0"), limit(intstr.FromInt32(2)))},
			nodes:    N{mkNode("a"), mkNode("b")},
			shadows:  S{mkShadow("a", rebooted, rebooted, startedBy("fleet")), mkShadow("b", idle, idle)},
			want:     map[string]string{"fleet": "start b@1.21.0"}},
		{name: "an unhealthy node is told why and not started",
			policies: P{fleet()},
			nodes:    N{mkNode("a", unready("ExtensionsNotReady"))}, shadows: S{mkShadow("a", idle, idle)},
			want: map[string]string{"fleet": ""}, notes: map[string]string{"a": "UpdateBlocked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			opts.OwnNode = tc.own
			f := newPolicyFixture(t, opts, tc.policies, tc.nodes, tc.shadows)
			now := t0
			if !tc.now.IsZero() {
				now = tc.now
			}
			pols := parsePolicies(tc.policies, opts.Deadlines)
			snap, err := f.c.snapshot(tc.shadows, pols, now)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			notes := map[string]string{}
			for n, nt := range conflictNotes(snap) {
				notes[n] = nt.reason
			}
			var wakeAt time.Time
			for _, pol := range pols {
				p := planStarts(snap, pol)
				got[pol.name] = describePlan(p)
				for n, nt := range p.notes {
					if nt.reason != "" {
						notes[n] = nt.reason
					}
				}
				wake(&wakeAt, p.wake)
			}
			checkPlans(t, got, tc.want, notes, tc.notes, wakeAt, now, tc.wake)
		})
	}
}

func describePlan(p plan) string {
	if p.halt != "" {
		return strings.TrimSpace("halt " + p.halt + " " + strings.Join(p.haltedBy, ","))
	}
	var s []string
	for _, st := range p.starts {
		s = append(s, st.node+"@"+st.version)
	}
	if len(s) == 0 {
		return ""
	}
	return "start " + strings.Join(s, " ")
}

// TestThePolicyStatusCountsItsNodesByWhereTheyStandAndSaysWhyItStartsNothing:
// the canary has one node of each standing (up to date, in flight, failed,
// waiting), and a node two policies select counts in neither.
func TestThePolicyStatusCountsItsNodesByWhereTheyStandAndSaysWhyItStartsNothing(t *testing.T) {
	pols := []*updatesv1alpha1.UpdatePolicy{canaryPolicy(paused), fleetPolicy(), mkPolicy("overlap", map[string]string{pool: "both"})}
	nodes := []*v1.Node{mkNode("c1", canary), mkNode("c2", canary), mkNode("c3", canary), mkNode("c4", canary), mkNode("f1"),
		mkNode("f2", label(pool, "both"))}
	shadows := []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("c1", idle, idle, running(newV)),                                              // up to date
		mkShadow("c2", monitor, monitor, running(newV), startedBy("canary")),                   // in flight
		mkShadow("c3", idle, idle, running(newV), failedAt(t0), startedBy("canary"), since(0)), // failed
		mkShadow("c4", idle, idle),                                                             // waiting
		mkShadow("f1", idle, idle),
		mkShadow("f2", idle, idle),
	}
	f := newPolicyFixture(t, defaultOptions(), pols, nodes, shadows)
	parsed := parsePolicies(pols, defaultOptions().Deadlines)
	snap, err := f.c.snapshot(shadows, parsed, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, pol := range parsed {
		st := policyStatus(snap, pol, planStarts(snap, pol), nil)
		var conds []string
		for _, c := range st.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		sort.Strings(conds)
		got[pol.name] = fmt.Sprintf("gen=%d nodes=%d upToDate=%d inFlight=%d failed=%d waiting=%d haltedBy=%v %s", st.ObservedGeneration,
			st.Nodes, st.UpToDate, st.InFlight, st.Failed, st.Waiting, st.HaltedBy, strings.Join(conds, " "))
	}
	want := map[string]string{
		"canary": "gen=1 nodes=4 upToDate=1 inFlight=1 failed=1 waiting=1 haltedBy=[c3] Blocked=False/NotBlocked Complete=False/Progressing " +
			"Halted=True/UpdateFailed Paced=False/NotPaced Paused=True/Paused SelectorConflict=False/NoConflict WindowOpen=True/NoWindows",
		"fleet": "gen=1 nodes=1 upToDate=0 inFlight=0 failed=0 waiting=1 haltedBy=[] Blocked=False/NotBlocked Complete=False/Progressing " +
			"Halted=False/NoFailure Paced=False/NotPaced Paused=False/NotPaused SelectorConflict=True/NodesSelectedTwice WindowOpen=True/NoWindows",
		"overlap": "gen=1 nodes=0 upToDate=0 inFlight=0 failed=0 waiting=0 haltedBy=[] Blocked=False/NotBlocked Complete=False/Progressing " +
			"Halted=False/NoFailure Paced=False/NotPaced Paused=False/NotPaused SelectorConflict=True/NodesSelectedTwice WindowOpen=True/NoWindows",
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s:\n  got  %s\n  want %s", k, got[k], want[k])
		}
	}
}

// TestAConflictNamesTheOtherPolicy: two policies whose selectors overlap
// each say, in their SelectorConflict condition, which other policy selects their
// nodes too, so that either of them tells what to edit.
func TestAConflictNamesTheOtherPolicy(t *testing.T) {
	pols := []*updatesv1alpha1.UpdatePolicy{fleetPolicy(), mkPolicy("overlap", map[string]string{pool: "both"})}
	nodes := []*v1.Node{mkNode("f1"), mkNode("f2", label(pool, "both"))}
	shadows := []*updatesv1alpha1.BottlerocketShadow{mkShadow("f1", idle, idle), mkShadow("f2", idle, idle)}
	f := newPolicyFixture(t, defaultOptions(), pols, nodes, shadows)
	parsed := parsePolicies(pols, defaultOptions().Deadlines)
	snap, err := f.c.snapshot(shadows, parsed, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"fleet":   "UpdatePolicy overlap selects these nodes too; they are never started until exactly one policy selects each: f2",
		"overlap": "UpdatePolicy fleet selects these nodes too; they are never started until exactly one policy selects each: f2",
	}
	for _, pol := range parsed {
		st := policyStatus(snap, pol, planStarts(snap, pol), nil)
		c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.PolicySelectorConflict)
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != want[pol.name] {
			t.Errorf("%s: SelectorConflict %+v, want True saying %q", pol.name, c, want[pol.name])
		}
	}
}

// The condition was called Conflict until issue 36: a status written by an
// operator built before loses it, so that no policy shows both types.
func TestTheConflictConditionOfAnOlderOperatorIsRemoved(t *testing.T) {
	pols := []*updatesv1alpha1.UpdatePolicy{fleetPolicy()}
	shadows := []*updatesv1alpha1.BottlerocketShadow{mkShadow("f1", idle, idle)}
	f := newPolicyFixture(t, defaultOptions(), pols, []*v1.Node{mkNode("f1")}, shadows)
	parsed := parsePolicies(pols, defaultOptions().Deadlines)
	snap, err := f.c.snapshot(shadows, parsed, t0)
	if err != nil {
		t.Fatal(err)
	}
	old := &updatesv1alpha1.UpdatePolicyStatus{Conditions: []metav1.Condition{{Type: conflictBeforeRename,
		Status: metav1.ConditionTrue, Reason: "NodesSelectedTwice", LastTransitionTime: metav1.NewTime(t0)}}}
	st := policyStatus(snap, parsed[0], planStarts(snap, parsed[0]), old)
	if c := meta.FindStatusCondition(st.Conditions, conflictBeforeRename); c != nil {
		t.Errorf("the older operator's condition is kept: %+v", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.PolicySelectorConflict); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("SelectorConflict = %+v, want False", c)
	}
}

// TestAPolicyStatusIsWrittenOnlyWhenItChanges: the leader writes a
// policy's status on its first pass and then not again while nothing
// changes (zero writes at steady state); a new generation is written with
// its observedGeneration.
func TestAPolicyStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a"), mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle, running(newV)), mkShadow("b", staged, staged, startedBy("fleet"))})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	written := f.storedPolicy("fleet")
	_ = f.policies.Update(written)
	f.clock.Step(time.Minute)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)

	edited := written.DeepCopy()
	edited.Generation = 2
	edited.Spec.Paused = true
	_ = f.policies.Update(edited)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	if got := f.storedPolicy("fleet").Status.ObservedGeneration; got != 2 {
		t.Errorf("observedGeneration = %d, want 2", got)
	}
}

// TestAPauseSeenOnlyInTheConsistentListStartsNothing: the cache still shows
// the policy unpaused, but the pause was written before the pass confirmed
// with its consistent LIST: nothing starts.
func TestAPauseSeenOnlyInTheConsistentListStartsNothing(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	f.listedPolicies = []*updatesv1alpha1.UpdatePolicy{fleet(paused, generation(2))}
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet", "list", "list policies"})
}

// TestAConflictIsAWarningOnThePolicyOnce: the Conflict condition turning
// True is announced with an Event on the policy; the nodes get their own.
func TestAConflictIsAWarningOnThePolicyOnce(t *testing.T) {
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{mkPolicy("one", nil), mkPolicy("two", nil)},
		[]*v1.Node{mkNode("a")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status one", "status two"})
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal UpdatePolicyConflict,Warning SelectorConflict" {
		t.Errorf("events = %v", got)
	}
}

func (f *fixture) storedPolicy(name string) *updatesv1alpha1.UpdatePolicy {
	f.t.Helper()
	o, err := f.client.Tracker().Get(updatesv1alpha1.SchemeGroupVersion.WithResource("updatepolicies"), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.(*updatesv1alpha1.UpdatePolicy)
}

// TestAStatusWriteConflictBringsThePassBack: the cache can lag behind the
// pass's own last status write, whose event brings no pass back; a
// conflicting write must try again, or the status stays stale until some
// node changes.
func TestAStatusWriteConflictBringsThePassBack(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle, running(newV))})
	f.client.PrependReactor("update", "updatepolicies", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(updatesv1alpha1.Resource("updatepolicies"), "fleet", fmt.Errorf("stale"))
	})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	f.clock.Step(time.Second)
	// The delaying queue moves the key over in its own goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for f.c.startQueue.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.c.startQueue.Len(); got != 1 {
		t.Errorf("queue length %d after a conflicting status write, want the start pass queued again", got)
	}
}

// TestAPolicySpecEditBringsTheStartPassBackAndItsOwnStatusWriteDoesNot: an
// edit of a policy's spec (a pin, a pause, windows, pacing) takes effect at
// once, without waiting for some node or shadow to change; the pass's own
// status writes bring no pass back, or every pass would bring the next.
func TestAPolicySpecEditBringsTheStartPassBackAndItsOwnStatusWriteDoesNot(t *testing.T) {
	at := func(rv string, observed int64) policyMod {
		return func(p *updatesv1alpha1.UpdatePolicy) { p.ResourceVersion, p.Status.ObservedGeneration = rv, observed }
	}
	for _, tc := range []struct {
		name     string
		old, new *updatesv1alpha1.UpdatePolicy
		want     bool
	}{
		{"a spec edit", fleet(at("5", 1)), fleet(pin("1.19.5"), generation(2), at("6", 1)), true},
		{"the pass's status write of the edit it observed", fleet(generation(2), at("6", 1)), fleet(generation(2), at("7", 2)), false},
		{"a status write that counts differently", fleet(generation(2), at("7", 2)), fleet(generation(2), at("8", 2)), false},
		{"a status write of an older pass while an edit waits", fleet(generation(3), at("8", 2)), fleet(generation(3), at("9", 2)), true},
		{"a resync", fleet(at("5", 1)), fleet(at("5", 1)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, defaultOptions(), nil, nil)
			for f.c.startQueue.Len() > 0 {
				key, _ := f.c.startQueue.Get()
				f.c.startQueue.Done(key)
			}
			f.c.onPolicyUpdate(tc.old, tc.new)
			if got := f.c.startQueue.Len() == 1; got != tc.want {
				t.Errorf("start pass queued = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestTheSoakIsThatOfThePolicyThatStartedTheUpdate: the health gate holds a
// node for the postRebootSoak of the policy that started it (the shadow's
// policy annotation), even when another policy governs it now; a node whose
// policy is gone falls back to the policy that selects it, then to the
// default.
func TestTheSoakIsThatOfThePolicyThatStartedTheUpdate(t *testing.T) {
	long := func(p *updatesv1alpha1.UpdatePolicy) {
		p.Spec.PostRebootSoak = &metav1.Duration{Duration: 10 * time.Minute}
	}
	healthy6m := annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-6*time.Minute).Format(time.RFC3339))
	for _, tc := range []struct {
		name     string
		policies []*updatesv1alpha1.UpdatePolicy
		node     *v1.Node
		startBy  string
		want     []string
	}{
		{"the starting policy's 10m soak holds the node after 6m", []*updatesv1alpha1.UpdatePolicy{canaryPolicy(long), fleetPolicy()},
			mkNode("n1"), "canary", nil},
		{"the governing policy's 5m soak lets it pass", []*updatesv1alpha1.UpdatePolicy{canaryPolicy(long), fleetPolicy()},
			mkNode("n1"), "fleet", []string{"record-success fleet " + t0.UTC().Format(time.RFC3339), "update n1 Idle"}},
		{"the starting policy is gone: the governing one's 10m", []*updatesv1alpha1.UpdatePolicy{canaryPolicy(long)},
			mkNode("n1", canary), "deleted", nil},
		{"no policy at all: the default 5m", nil, mkNode("n1"), "deleted", []string{"update n1 Idle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkShadow("n1", monitor, monitor, running(newV), since(7*time.Minute), healthy6m, startedBy(tc.startBy))
			f := newPolicyFixture(t, defaultOptions(), tc.policies, []*v1.Node{tc.node}, []*updatesv1alpha1.BottlerocketShadow{s})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect(tc.want)
		})
	}
}

// checkPlans compares what a table case's policies planned (describePlan per
// policy), the notes they left on nodes and the earliest wake-up, measured
// from from, with what the case wants; no notes wanted means none.
func checkPlans(t *testing.T, got, want, notes, wantNotes map[string]string, wakeAt, from time.Time, wantWake time.Duration) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plans:\n  got  %v\n  want %v", got, want)
	}
	if wantNotes == nil {
		wantNotes = map[string]string{}
	}
	if !reflect.DeepEqual(notes, wantNotes) {
		t.Errorf("notes = %v, want %v", notes, wantNotes)
	}
	var gotWake time.Duration
	if !wakeAt.IsZero() {
		gotWake = wakeAt.Sub(from)
	}
	if gotWake != wantWake {
		t.Errorf("wake in %v, want %v", gotWake, wantWake)
	}
}
