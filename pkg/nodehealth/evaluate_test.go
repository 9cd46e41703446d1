package nodehealth

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"nodehealth.io/nodehealth/pkg/nodeutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// exportAll lets cmp compare the controller's unexported state.
var exportAll = cmp.Exporter(func(reflect.Type) bool { return true })

// evaluatePurely evaluates in twice and requires the same decision: an
// evaluation that changed its input (the state it was given, the Leases it
// read) would decide differently the second time, as a fail-open ended, a
// planned release's boot or a startup timeout recorded in the given state
// would show.
//
// It also requires, directly, that the snapshot is unchanged after the
// evaluation: a deep copy taken before compares equal to it after, the
// state's maps and sets and the Leases' observations included (the options
// are configuration, compared by identity).
func evaluatePurely(t *testing.T, in evalInput) decision {
	t.Helper()
	before := deepCopy(reflect.ValueOf(in)).Interface().(evalInput)
	before.opts = in.opts
	d := evaluate(in)
	if !cmp.Equal(in, before, exportAll) {
		t.Fatalf("the evaluation changed its snapshot (-before +after):\n%s", cmp.Diff(before, in, exportAll))
	}
	if again := evaluate(in); !cmp.Equal(d, again, exportAll) {
		t.Fatalf("evaluating the same input twice decided differently: the evaluation changed its input (-first +second):\n%s",
			cmp.Diff(d, again, exportAll))
	}
	return d
}

// deepCopy copies v and everything it reaches through pointers, maps and
// slices, unexported fields included, so that a change through any of them
// shows against the copy. Interfaces and functions are shared.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(deepCopy(v.Elem()))
		return out
	case reflect.Struct:
		if !v.CanAddr() {
			addressable := reflect.New(v.Type()).Elem()
			addressable.Set(v)
			v = addressable
		}
		out := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			src := v.Field(i)
			if !src.CanInterface() {
				src = reflect.NewAt(src.Type(), unsafe.Pointer(src.UnsafeAddr())).Elem()
			}
			dst := out.Field(i)
			dst = reflect.NewAt(dst.Type(), unsafe.Pointer(dst.UnsafeAddr())).Elem()
			dst.Set(deepCopy(src))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(deepCopy(it.Key()), deepCopy(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	}
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	return out
}

// testBlastView is a blast radius that suspends failure taints or not,
// whatever the node's own count, and counts the node as failing or not.
func testBlastView(suspended, failing bool) blastView {
	v := blastView{clusterBP: 5000, zoneBP: 6000, clusterThreshold: 0.5, zoneThreshold: 0.6,
		member: member{failing: failing}, counted: true, cluster: counter{total: 1}}
	if failing {
		v.cluster.failing = 1
	}
	if suspended {
		v.cluster = counter{total: 200, failing: 150, suspended: true}
	}
	return v
}

// leaseAt describes one extension Lease for the decision table: renewed (as
// the controller observed it) at an offset from t0, released with a reason,
// or absent (nil in the table).
type leaseAt struct {
	renewed  time.Duration
	released string
}

// TestEvaluateTurnsStateFactsAndLeasesIntoADecisionAndTheNextState is the
// decision table of the gate state machine (docs/controller.md): state, facts
// and Leases in, decision and state out, with no API server and no
// controller, in the manner of kwok's Test_tryAcquireOrRenew.
func TestEvaluateTurnsStateFactsAndLeasesIntoADecisionAndTheNextState(t *testing.T) {
	const now = 60 * time.Second // every case evaluates at t0+60s
	gatedAt := func(cause gateCause, at time.Duration, mutate ...func(*nodeState)) func() *nodeState {
		return func() *nodeState {
			st := newNodeState(t0)
			st.uid, st.bootID = "uid-n1", "boot-1"
			st.last.hadGating = true
			st.beginGate(cause, t0.Add(at))
			st.readyInBoot = !cause.bootstrap()
			st.last.extReady = map[string]bool{"a": false, "b": true}
			for _, m := range mutate {
				m(st)
			}
			return st
		}
	}
	inService := func() *nodeState {
		st := newNodeState(t0)
		st.uid, st.bootID, st.readyInBoot, st.last.hadGating = "uid-n1", "boot-1", true, true
		st.last.extReady = map[string]bool{"a": true, "b": true}
		return st
	}
	fresh, stale := &leaseAt{renewed: 50 * time.Second}, &leaseAt{renewed: 0}
	cases := []struct {
		name      string
		state     func() *nodeState // nil: first sight
		tainted   bool
		bootID    string // default boot-1
		live      bool
		leases    map[string]*leaseAt // a and b; nil entry: Lease missing
		suspended bool
		ownStale  bool
		failedFor time.Duration // eviction clock already run
		leaving   leavingFacts

		wantTaint, wantSuppressed, wantStarted, wantEnded, wantEscalate bool
		wantCause                                                       gateCause
		wantFailing                                                     bool
		// wantUntracked: the node counts on neither side of the blast
		// radius; wantReason: the condition's reason, when it matters.
		wantUntracked bool
		wantReason    string
	}{
		{name: "found untainted and ready: adopted, not gated",
			leases: map[string]*leaseAt{"a": fresh, "b": fresh}},
		{name: "found untainted with a missing Lease: a failure, gated",
			leases:    map[string]*leaseAt{"a": nil, "b": fresh},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true},
		{name: "found untainted with a missing Lease while suspended: counted, taint withheld",
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, suspended: true,
			wantSuppressed: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true},
		{name: "found tainted with fresh Leases: full gate, waits for renewals after the start",
			tainted: true, leases: map[string]*leaseAt{"a": fresh, "b": fresh},
			wantTaint: true, wantCause: causeFoundGated},
		{name: "new node: bootstrap gate, never a failure",
			live: true, leases: map[string]*leaseAt{"a": nil, "b": nil},
			wantTaint: true, wantCause: causeNew},
		{name: "new node while suspended: bootstrap gates are never withheld",
			live: true, leases: map[string]*leaseAt{"a": nil, "b": nil}, suspended: true,
			wantTaint: true, wantCause: causeNew},
		{name: "reboot: full gate even with fresh Leases",
			state: inService, bootID: "boot-2", leases: map[string]*leaseAt{"a": fresh, "b": fresh},
			wantTaint: true, wantCause: causeRebooted},
		{name: "failed-only gate: the failed extension renewed, the other did not need to",
			state: gatedAt(causeNotReady, 40*time.Second, func(st *nodeState) { insert(&st.gate.scope, "a") }), tainted: true,
			leases:    map[string]*leaseAt{"a": fresh, "b": {renewed: 30 * time.Second}},
			wantEnded: true},
		{name: "full gate: every extension must renew after the gate",
			state: gatedAt(causeRebooted, 40*time.Second), tainted: true,
			leases:    map[string]*leaseAt{"a": fresh, "b": {renewed: 30 * time.Second}},
			wantTaint: true, wantCause: causeRebooted},
		{name: "planned release: maintenance, not a failure",
			state: inService, leases: map[string]*leaseAt{"a": {renewed: 50 * time.Second, released: nodev1alpha1.ReasonUpdating}, "b": fresh},
			wantTaint: true, wantStarted: true, wantCause: causeMaintenance},
		{name: "planned release makes the node's other failures planned",
			state: gatedAt(causeMaintenance, 40*time.Second, func(st *nodeState) { insert(&st.gate.planned, "a") }), tainted: true,
			leases:    map[string]*leaseAt{"a": {renewed: 50 * time.Second, released: nodev1alpha1.ReasonUpdating}, "b": stale},
			wantTaint: true, wantCause: causeMaintenance},
		{name: "release without a maintenance reason: a failure",
			state: inService, leases: map[string]*leaseAt{"a": {renewed: 50 * time.Second, released: "Crashed"}, "b": fresh},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true},
		{name: "expired Lease: a failure",
			state: inService, leases: map[string]*leaseAt{"a": stale, "b": fresh},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true},
		{name: "own view stale: taint additions wait",
			state: inService, leases: map[string]*leaseAt{"a": nil, "b": fresh}, ownStale: true,
			wantSuppressed: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true},
		{name: "own view stale: untaints proceed",
			state: gatedAt(causeNotReady, 40*time.Second, func(st *nodeState) { insert(&st.gate.scope, "a") }), tainted: true,
			leases: map[string]*leaseAt{"a": fresh, "b": fresh}, ownStale: true,
			wantEnded: true},
		{name: "eviction clock ran out: escalate",
			state: gatedAt(causeNotReady, 0, func(st *nodeState) { insert(&st.gate.scope, "a") }), tainted: true,
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, failedFor: 5 * time.Minute,
			wantTaint: true, wantEscalate: true, wantCause: causeNotReady, wantFailing: true},
		{name: "eviction clock ran out while suspended: no escalation",
			state: gatedAt(causeNotReady, 0, func(st *nodeState) { insert(&st.gate.scope, "a") }), tainted: true,
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, failedFor: 5 * time.Minute, suspended: true,
			wantTaint: true, wantCause: causeNotReady, wantFailing: true},
		{name: "a node the autoscaler removes whose Lease was released is gated but neither failing nor counted",
			state: inService, leases: map[string]*leaseAt{"a": {renewed: 50 * time.Second, released: "Unhealthy"}, "b": fresh},
			leaving:   leavingFacts{Taint: nodev1alpha1.TaintToBeDeletedByClusterAutoscaler},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantUntracked: true, wantReason: nodev1alpha1.ReasonNodeLeaving},
		{name: "a leaving node is gated while the blast radius is suspended: its gate is no failure taint",
			state: inService, leases: map[string]*leaseAt{"a": stale, "b": fresh}, suspended: true,
			leaving:   leavingFacts{Taint: nodev1alpha1.TaintKarpenterDisrupted},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantUntracked: true, wantReason: nodev1alpha1.ReasonNodeLeaving},
		{name: "a node whose eviction clock ran out is not escalated once it is leaving",
			state: gatedAt(causeNotReady, 0, func(st *nodeState) { insert(&st.gate.scope, "a") }), tainted: true,
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, failedFor: 5 * time.Minute,
			leaving:   leavingFacts{Deleting: true},
			wantTaint: true, wantCause: causeNotReady, wantUntracked: true, wantReason: nodev1alpha1.ReasonNodeLeaving},
		{name: "a foreign Drained condition 3 hours old on a schedulable node does not exempt it",
			state: inService, leases: map[string]*leaseAt{"a": stale, "b": fresh},
			leaving:   leavingFacts{Conditions: []lifecycleCondition{{Kind: nodev1alpha1.LifecycleConditionDrained, Reason: "AdminRequested", Since: t0.Add(-3 * time.Hour)}}},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantFailing: true, wantReason: nodev1alpha1.ReasonExtensionsNotReady},
		{name: "a foreign Drained condition 3 hours old on an unschedulable node makes it leaving",
			state: inService, leases: map[string]*leaseAt{"a": stale, "b": fresh},
			leaving:   leavingFacts{Unschedulable: true, Conditions: []lifecycleCondition{{Kind: nodev1alpha1.LifecycleConditionDrained, Reason: "AdminRequested", Since: t0.Add(-3 * time.Hour)}}},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantUntracked: true, wantReason: nodev1alpha1.ReasonNodeLeaving},
		{name: "a foreign DrainInProgress condition an hour old on a schedulable node makes it leaving",
			state: inService, leases: map[string]*leaseAt{"a": stale, "b": fresh},
			leaving:   leavingFacts{Conditions: []lifecycleCondition{{Kind: nodev1alpha1.LifecycleConditionDrainInProgress, Reason: "AdminRequested", Since: t0.Add(-time.Hour)}}},
			wantTaint: true, wantStarted: true, wantCause: causeNotReady, wantUntracked: true, wantReason: nodev1alpha1.ReasonNodeLeaving},
		{name: "a leaving node whose extensions are ready is not counted in the blast radius either",
			state: inService, leases: map[string]*leaseAt{"a": fresh, "b": fresh},
			leaving:       leavingFacts{Taint: nodev1alpha1.TaintOutOfService},
			wantUntracked: true, wantReason: nodev1alpha1.ReasonExtensionsReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			tracker := newLeaseTracker(clk, 0)
			var exts []requiredExtension
			for _, name := range []string{"a", "b"} {
				ref := nodev1alpha1.LeaseReference{Namespace: testNS, Name: name + ".n1"}
				exts = append(exts, requiredExtension{name: name, lease: ref, affects: true})
				l := tc.leases[name]
				if l == nil {
					continue
				}
				clk.SetTime(t0.Add(l.renewed))
				holder := "h"
				tracker.observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: ref.Name},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](40),
						RenewTime: &metav1.MicroTime{Time: t0.Add(l.renewed)}}})
				if l.released != "" {
					tracker.observe(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: ref.Name,
						Annotations: map[string]string{nodev1alpha1.ReasonAnnotation: l.released}},
						Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](40),
							RenewTime: &metav1.MicroTime{Time: t0.Add(l.renewed)}}})
				}
			}
			opts := testOptions()
			st := newNodeState(t0)
			if tc.state != nil {
				st = tc.state()
			}
			if tc.failedFor > 0 {
				st.escalation.clock.elapsed = tc.failedFor
			}
			bootID := tc.bootID
			if bootID == "" {
				bootID = "boot-1"
			}
			f := nodeFacts{name: "n1", uid: types.UID("uid-n1"), bootID: bootID, tainted: tc.tainted,
				record: bootRecord{BootID: "boot-1", UID: "uid-n1"}, hasRecord: true, leaving: tc.leaving}
			in := evalInput{now: t0.Add(now), opts: &opts, node: f, prev: st, exts: exts, leases: tracker.lookupLeases(exts),
				live: tc.live, ownViewStale: tc.ownStale, blast: testBlastView(tc.suspended, tc.failedFor > 0)}
			d := evaluatePurely(t, in)
			// The state it was given is the state it was given: built again
			// the same way, it is equal.
			twin := newNodeState(t0)
			if tc.state != nil {
				twin = tc.state()
			}
			twin.escalation.clock.elapsed = st.escalation.clock.elapsed
			if diff := cmp.Diff(twin, st, exportAll); diff != "" {
				t.Errorf("the evaluation changed the state it was given (-before +after):\n%s", diff)
			}
			st, failing, tracked := d.next, d.failing, d.tracked

			if d.taint != tc.wantTaint || d.suppressed != tc.wantSuppressed || d.started != tc.wantStarted ||
				d.ended != tc.wantEnded || d.escalate != tc.wantEscalate {
				t.Errorf("decision taint=%v suppressed=%v started=%v ended=%v escalate=%v, want %v %v %v %v %v",
					d.taint, d.suppressed, d.started, d.ended, d.escalate,
					tc.wantTaint, tc.wantSuppressed, tc.wantStarted, tc.wantEnded, tc.wantEscalate)
			}
			if gateReason(st) != tc.wantCause {
				t.Errorf("gate reason %q, want %q", gateReason(st), tc.wantCause)
			}
			if failing != tc.wantFailing || tracked == tc.wantUntracked {
				t.Errorf("blast radius told failing=%v tracked=%v, want failing=%v tracked=%v", failing, tracked, tc.wantFailing, !tc.wantUntracked)
			}
			if tc.wantReason != "" {
				if _, reason, message, _ := conditionFor(in.now, st, d, d.suspendedWhy); reason != tc.wantReason {
					t.Errorf("condition reason %q (%s), want %q", reason, message, tc.wantReason)
				}
			}
		})
	}
}

// A node released by failurePolicy Ungate stays released after a restart:
// the boot record says which extensions failed open in this boot, so the new
// controller neither taints the node nor counts it as failing (issue 9
// defect 3).
func TestFailOpenSurvivesARestart(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].StartupTimeout = time.Minute
	opts.Rules[0].FailurePolicy = FailurePolicyUngate
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("Ungate kept the node gated")
	}
	rec, ok := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if !ok || len(rec.FailedOpen) != 1 || rec.FailedOpen[0] != "kube-proxy" {
		t.Fatalf("boot record %q does not name the failed-open extension", f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	}

	g := f.restart(opts)
	g.sync("n1")
	if g.tainted("n1") {
		t.Fatalf("the restarted controller tainted a node released by failing open: %s", fmtTaints(g.node("n1")))
	}
	g.c.mu.Lock()
	failing, gated := g.c.blast.isFailing("n1"), g.c.nodes["n1"].gated
	g.c.mu.Unlock()
	if failing || gated {
		t.Fatalf("after the restart: failing=%v gated=%v, want neither", failing, gated)
	}
	g.expectWrites()

	// Once the extension comes up, the record forgets it, so that a later
	// failure is a failure, also for a controller started after that.
	g.renew("kube-proxy", "n1")
	g.sync("n1")
	rec, _ = parseBootRecord(g.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if len(rec.FailedOpen) != 0 {
		t.Fatalf("boot record still names %v after the extension became ready", rec.FailedOpen)
	}
	g.release("kube-proxy", "n1", "Crash")
	h := g.restart(opts)
	h.sync("n1")
	if !h.tainted("n1") {
		t.Fatal("a failure after the failed-open extension came up must gate, also after a restart")
	}
}

// Found by the simulation: a startup timeout is for an extension that never
// comes up after the gate began. One that came up and then died while
// another extension still kept the node gated did start: failing it open
// would ungate the node with that extension down, and failing it closed
// would call a crash a startup timeout.
func TestAnExtensionThatCameUpAndDiedDuringTheGateHasNoStartupTimeout(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 30 * time.Second, FailurePolicy: FailurePolicyUngate})
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	// cni comes up and dies; kube-proxy never comes up.
	f.clock.Step(5 * time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	f.clock.Step(25 * time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the node was ungated while kube-proxy never came up")
	}
	f.clock.Step(time.Minute)
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatalf("the node was ungated with cni down: cni failed open although it came up after the gate began (condition %s)", f.condition("n1").Reason)
	}
	if r := f.condition("n1").Reason; r == nodev1alpha1.ReasonStartupTimeout {
		t.Errorf("condition %s: cni came up, its later failure is not a startup timeout", r)
	}
}

// Found by the simulation: StartupTimeout says a late extension keeps the
// node gated; once it comes up while another extension still has to renew,
// the reason is the gate's own again (here NodeRegistered).
func TestTheStartupTimeoutReasonEndsWhenTheLateExtensionComesUp(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 30 * time.Second, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(31 * time.Second)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Fatalf("condition %s after cni's startup timeout, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated although kube-proxy never renewed")
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonNodeRegistered {
		t.Errorf("condition %s once cni came up, want %s", r, nodev1alpha1.ReasonNodeRegistered)
	}
}

// After a reboot the extension's Lease from the previous boot may still be
// within its duration when the startup timeout passes: the extension has not
// come up in this boot, so the timeout is reported all the same (seed 22 of
// the simulation, where the old Lease outlived an 11 s timeout by a second).
func TestAStartupTimeoutIsReportedWhileTheLeaseOfThePreviousBootIsStillValid(t *testing.T) {
	f := newFixture(t, withCNI(testOptions(), 5*time.Second, FailurePolicyKeepGated), readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	if r := f.condition("n1").Reason; r != string(causeRebooted) {
		t.Fatalf("condition %s after the reboot, want %s", r, causeRebooted)
	}
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated although cni never renewed in this boot")
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Errorf("condition %s once cni's startup timeout passed with its old Lease still valid, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
}

// Found by the simulation (seed 11173182051072828070): a startup timeout
// with failurePolicy Ungate passed while the extension's Lease of the
// previous boot was still within its duration. That Lease is the one the
// timeout found wanting, so it must not end the fail-open: the node, ungated
// at the timeout, was otherwise taken as in service with the extension
// ready, and then tainted, as failing, when that old Lease expired. Failing
// open lasts until the extension renews.
func TestALeaseLeftFromThePreviousBootDoesNotEndAFailOpen(t *testing.T) {
	f := newFixture(t, withCNI(testOptions(), 5*time.Second, FailurePolicyUngate), readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	if !f.tainted("n1") {
		t.Fatal("the reboot was not gated")
	}
	// kube-proxy comes up; cni does not, and its startup timeout passes
	// 7 s after its last renewal, well within the Lease's 40 s.
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("cni failed open and kube-proxy came up, but the node is still gated (condition %s)", f.condition("n1").Reason)
	}
	f.clock.Step(time.Second)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Errorf("condition %s a second after the ungate, want %s: cni has not renewed in this boot", r, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
	// The old Lease expires (40 s after its renewal, plus the grace);
	// kube-proxy keeps renewing.
	for range 6 {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
		if f.tainted("n1") {
			t.Fatalf("%s after cni failed open, its old Lease's expiry tainted the node (condition %s)",
				f.clock.Now().Sub(t0), f.condition("n1").Reason)
		}
	}
	// cni comes up: from then on it gates like any other extension.
	f.renew("cni", "n1")
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsReady {
		t.Fatalf("condition %s once cni renewed, want %s", r, nodev1alpha1.ReasonExtensionsReady)
	}
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Error("a failure of cni after it came up did not gate")
	}
}

// A fail-open restored from the boot record ends at the first renewal the new
// controller observes after the Lease it listed, also one observed in the very
// instant it listed it (simulation seed 10772932245992471847: a restart in the
// second cni came back kept cni failed open until its next renewal). The
// listed Lease and the renewal carry the same observation instant; only the
// start grace tells them apart, as it does for a dead mark.
func TestARenewalInTheInstantOfARestartEndsARestoredFailOpen(t *testing.T) {
	opts := withCNI(testOptions(), 5*time.Second, FailurePolicyUngate)
	f := newFixture(t, opts, readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("cni did not fail open (tainted %v, condition %s)", f.tainted("n1"), f.condition("n1").Reason)
	}

	g := f.restart(opts)
	g.sync("n1")
	if r := g.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("condition %s after the restart, want %s: the listed Lease is the previous boot's", r, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
	g.renew("cni", "n1")
	g.sync("n1")
	if r := g.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsReady {
		t.Fatalf("condition %s once cni renewed in the instant of the restart, want %s", r, nodev1alpha1.ReasonExtensionsReady)
	}
	if rec, _ := parseBootRecord(g.node("n1").Annotations[nodev1alpha1.BootAnnotation]); len(rec.FailedOpen) != 0 {
		t.Errorf("boot record still names %v as failed open after cni renewed", rec.FailedOpen)
	}
	g.release("cni", "n1", "Crash")
	g.sync("n1")
	if !g.tainted("n1") {
		t.Error("a failure of cni after it came up did not gate")
	}
}

// A fail-open that ends while the node is gated again for another
// extension, or held by a guard, leaves the boot record at once, as it does
// on a node in service (simulation seed 17519778984855938557: cni renewed
// while kube-proxy's failure was held under a suspension; the record still
// named cni, so the controller that started next restored its fail-open and
// reported ExtensionsFailedOpen until cni's next renewal).
func TestAFailOpenThatEndsWhileTheNodeIsGatedAgainLeavesTheBootRecord(t *testing.T) {
	opts := withCNI(testOptions(), 5*time.Second, FailurePolicyUngate)
	f := newFixture(t, opts, readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("cni did not fail open (tainted %v, condition %s)", f.tainted("n1"), f.condition("n1").Reason)
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatalf("kube-proxy's failure did not gate the node (condition %s)", f.condition("n1").Reason)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation]); len(rec.FailedOpen) != 0 {
		t.Fatalf("boot record still names %v as failed open after cni renewed", rec.FailedOpen)
	}

	// A restarted controller takes cni as the extension it is again: the
	// node waits for its renewal after the restart, and then is ready.
	g := f.restart(opts)
	g.sync("n1")
	g.clock.Step(time.Second)
	g.renew("kube-proxy", "n1")
	g.sync("n1")
	if !g.tainted("n1") {
		t.Fatalf("ungated after the restart before cni renewed (condition %s)", g.condition("n1").Reason)
	}
	g.renew("cni", "n1")
	g.sync("n1")
	if g.tainted("n1") || g.condition("n1").Reason != nodev1alpha1.ReasonExtensionsReady {
		t.Errorf("once both renewed after the restart: tainted %v, condition %s, want untainted and %s",
			g.tainted("n1"), g.condition("n1").Reason, nodev1alpha1.ReasonExtensionsReady)
	}
}

// A renewal the controller observes ends a fail-open also while the node's
// list does not hold the extension (a label took its rule off the node), and
// the boot record loses it then (simulation seed 11458548706464037492: cni
// renewed after the cni=true label went off n1; the record still named it,
// so the controllers that two reloads started restored its fail-open and
// reported ExtensionsFailedOpen when the label came back). After a restart
// the same holds for a fail-open restored from the record: the Lease as the
// restarted controller first sees it is its baseline, and the next renewal
// ends it, listed or not. The renewals go through the queue: a node waiting
// for such a renewal is not steady, or the renewal would be taken for one
// that only moves the expiry timer.
func TestAFailOpenEndsWhenItsExtensionRenewsOffTheNodesList(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.SelectorFromSet(labels.Set{"cni": "true"}),
		AffectsReadiness: true, StartupTimeout: 5 * time.Second, FailurePolicy: FailurePolicyUngate})
	cniLabel := func(on bool) func(*v1.Node) {
		return func(n *v1.Node) {
			if on {
				n.Labels = labels.Merge(n.Labels, labels.Set{"cni": "true"})
			} else {
				delete(n.Labels, "cni")
			}
		}
	}
	recorded := func(f *fixture) []string {
		rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
		return rec.FailedOpen
	}
	// failedOpenOffTheList fails cni open on n1 after a reboot and takes
	// the label off: the record still names cni, which has not renewed.
	failedOpenOffTheList := func(t *testing.T) *fixture {
		n := readyNode("n1")
		cniLabel(true)(n)
		f := newFixture(t, opts, n)
		f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
		f.clock.Step(6 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
		if f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
			t.Fatalf("cni did not fail open (tainted %v, condition %s)", f.tainted("n1"), f.condition("n1").Reason)
		}
		f.clock.Step(time.Second)
		f.updateNode("n1", cniLabel(false))
		f.sync("n1")
		if got := recorded(f); !slices.Equal(got, []string{"cni"}) {
			t.Fatalf("boot record names %v as failed open once the label went off, want [cni] (cni has not renewed)", got)
		}
		return f
	}
	// readyOnceListedAgain restarts the controller, puts the label back,
	// and wants cni ready: its fail-open ended.
	readyOnceListedAgain := func(t *testing.T, f *fixture) {
		g := f.restart(opts)
		g.sync("n1")
		g.clock.Step(time.Second)
		g.updateNode("n1", cniLabel(true))
		g.sync("n1")
		if g.tainted("n1") || g.condition("n1").Reason != nodev1alpha1.ReasonExtensionsReady {
			t.Errorf("the label back after a restart: tainted %v, condition %s, want untainted and %s (cni renewed off the list)",
				g.tainted("n1"), g.condition("n1").Reason, nodev1alpha1.ReasonExtensionsReady)
		}
	}

	t.Run("renewed while this controller runs", func(t *testing.T) {
		f := failedOpenOffTheList(t)
		f.drainQueue("n1")
		f.clock.Step(time.Second)
		// Through the queue: a node whose unlisted extension is failed
		// open is not steady, so the renewal is evaluated.
		f.renew("cni", "n1")
		f.drainQueue("n1")
		if got := recorded(f); len(got) != 0 {
			t.Fatalf("boot record still names %v as failed open after cni renewed off the list", got)
		}
		readyOnceListedAgain(t, f)
	})

	t.Run("restored from the record after a restart", func(t *testing.T) {
		f := failedOpenOffTheList(t)
		g := f.restart(opts)
		g.sync("n1")
		if got := recorded(g); !slices.Equal(got, []string{"cni"}) {
			t.Fatalf("boot record names %v after the restart, want [cni]: the listed Lease is not a renewal", got)
		}
		// The first evaluation took the listed Lease for baseline: the
		// renewal right after it ends the fail-open.
		g.clock.Step(time.Second)
		g.renew("cni", "n1")
		g.drainQueue("n1")
		if got := recorded(g); len(got) != 0 {
			t.Fatalf("boot record still names %v as failed open after cni renewed off the list", got)
		}
		readyOnceListedAgain(t, g)
	})
}

// The same on a node whose only gating extension failed open: off the list
// the node lists none, and the record loses the fail-open all the same.
func TestAFailOpenEndsOffTheListOfANodeThatListsNoOtherGatingExtension(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].AffectsReadiness = false
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.SelectorFromSet(labels.Set{"cni": "true"}),
		AffectsReadiness: true, StartupTimeout: 5 * time.Second, FailurePolicy: FailurePolicyUngate})
	f := newFixture(t, opts, readyNode("n1", func(n *v1.Node) { n.Labels = labels.Merge(n.Labels, labels.Set{"cni": "true"}) }))
	failedOpen := func() []string {
		rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
		return rec.FailedOpen
	}
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	f.clock.Step(6 * time.Second)
	f.sync("n1")
	if f.tainted("n1") || !slices.Equal(failedOpen(), []string{"cni"}) {
		t.Fatalf("cni did not fail open (tainted %v, condition %s, record %v)", f.tainted("n1"), f.condition("n1").Reason, failedOpen())
	}
	f.clock.Step(time.Second)
	f.updateNode("n1", func(n *v1.Node) { delete(n.Labels, "cni") })
	f.sync("n1")
	if got := failedOpen(); !slices.Equal(got, []string{"cni"}) {
		t.Fatalf("boot record names %v as failed open once the label went off, want [cni] (cni has not renewed)", got)
	}
	f.drainQueue("n1")
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.drainQueue("n1")
	if got := failedOpen(); len(got) != 0 {
		t.Fatalf("boot record still names %v as failed open after cni renewed off the list", got)
	}
}

// expiredUpdaterBeforeARestart runs a controller until the updater, an
// extension that does not affect readiness, has expired on node n1 in
// service, and returns its options, its fixture and the condition it wrote
// (True, naming the expired updater), for a restarted controller to find.
func expiredUpdaterBeforeARestart(t *testing.T) (Options, *fixture, v1.NodeCondition) {
	t.Helper()
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: false,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	f.sync("n1")
	for range 5 {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
	}
	held := f.condition("n1")
	if held.Status != v1.ConditionTrue || !strings.Contains(held.Message, "updater (LeaseExpired") {
		t.Fatalf("condition %s/%s %q, want True naming the expired updater", held.Status, held.Reason, held.Message)
	}
	return opts, f, held
}

// After a restart every Lease counts as observed at the start, so a
// non-gating extension that had expired looks ready until its grace runs out
// again, and the condition's message then says again what the node already
// holds: nothing to write (simulation seed 84, a write at steady state).
func TestAConditionTheNodeAlreadyHoldsIsNotRewrittenAfterARestart(t *testing.T) {
	opts, f, held := expiredUpdaterBeforeARestart(t)

	g := newFixture(t, opts, f.node("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	g.sync("n1")
	g.expectWrites()
	for i := 0; i < 5; i++ {
		g.clock.Step(10 * time.Second)
		g.renew("kube-proxy", "n1")
		g.sync("n1")
	}
	if c := g.condition("n1"); c.Message != held.Message {
		t.Fatalf("message %q after the updater's grace ran out again, want %q", c.Message, held.Message)
	}
	g.expectWrites()
}

// The boot record stays readable however many extensions fail open: 64
// extensions of 63-character names would list 4.2 KiB, over what the Node
// cache keeps of the record (nodeutil.MaxBootRecordLength), and a record the
// cache replaces by a marker tells a restarted controller nothing. The list
// is capped like the start-up timeline, the rest counted, and the capped
// record is stable: the next sync does not rewrite it.
func TestTheFailedOpenListInTheBootRecordIsBounded(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	for i := range nodev1alpha1.MaxSystemExtensions {
		name := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), i)
		opts.Rules = append(opts.Rules, Rule{Name: name, Extension: name, Selector: labels.Everything(), AffectsReadiness: true,
			StartupTimeout: time.Minute, FailurePolicy: FailurePolicyUngate})
	}
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("every extension failed open, yet the node is gated: %s", f.condition("n1").Message)
	}
	value := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]
	if len(value) > nodeutil.MaxBootRecordLength {
		t.Fatalf("boot record of %d bytes, over the %d the Node cache keeps", len(value), nodeutil.MaxBootRecordLength)
	}
	cached, _ := nodeutil.TransformNode(f.node("n1"))
	rec, ok := parseBootRecord(cached.(*v1.Node).Annotations[nodev1alpha1.BootAnnotation])
	if !ok {
		t.Fatalf("the cached boot record does not parse: %q", value)
	}
	if len(rec.FailedOpen) != maxFailedOpen || rec.FailedOpenOmitted != nodev1alpha1.MaxSystemExtensions-maxFailedOpen {
		t.Errorf("failedOpen lists %d and omits %d, want %d and the rest", len(rec.FailedOpen), rec.FailedOpenOmitted, maxFailedOpen)
	}
	if first := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), 0); rec.FailedOpen[0] != first {
		t.Errorf("first listed %s, want %s (name order)", rec.FailedOpen[0], first)
	}
	f.writes()
	f.sync("n1")
	f.expectWrites()
}

// twoExtensions lists a manual cni next to the rule's kube-proxy.
func twoExtensions(n *v1.Node) {
	n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"cni"},{"name":"kube-proxy","source":"rule/kube-proxy"}]`
}

// After a failure gate, only the extensions that failed must renew: the
// node is ungated at the returning extension's first renewal, not at the
// next renewal of every other extension (docs/controller.md gate scope).
func TestFailureGateUngatesOnTheFailedExtensionsRenewal(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.clock.Step(5 * time.Second)
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated by the release")
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after the failed extension renewed: kube-proxy never stopped renewing and must not have to renew again")
	}
}

// An extension added to the list during a failure gate is in its scope.
func TestFailureGateScopeIncludesExtensionsAddedDuringIt(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	f.putLease(lease("cni", "n1", "holder", f.clock.Now()))
	f.updateNode("n1", twoExtensions)
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated before the extension added during the gate renewed")
	}
	f.renew("cni", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after every extension in scope renewed")
	}
}

// A gate found at a start is full, also once an extension's failure
// becomes its reason: ControllerStarted turning into ExtensionsNotReady must
// not let the node go on the failed extension's renewal alone.
func TestFoundGatedStaysFullWhenItsReasonChanges(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions, withTaint),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("reason %q, want %q", c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("a gate found at start ungated without a fresh renewal of kube-proxy")
	}
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after every extension renewed")
	}
}

// A reboot during a failure gate restarts it as full.
func TestRebootDuringAFailureGateMakesItFull(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if st := f.state("n1"); st.gate.cause != causeRebooted || !st.gate.full {
		t.Fatalf("after a reboot during a failure gate: cause %q full %v, want %q and full", st.gate.cause, st.gate.full, causeRebooted)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated after a reboot without kube-proxy renewing")
	}
}

// While a gate includes a planned release, the node's other failures are
// planned too: kube-proxy expiring while the updater reboots the node
// starts no eviction clock and does not count for the blast radius.
func TestPlannedReleaseMakesTheNodesOtherFailuresPlanned(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("cni", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1") // kube-proxy expired
	if f.c.blast.isFailing("n1") {
		t.Fatal("an expiry during a planned gate counts as a failure")
	}
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Errorf("reason %q, want %q", c.Reason, nodev1alpha1.ReasonPlannedMaintenance)
	}
	f.clock.Step(10 * time.Minute)
	f.sync("n1")
	if f.c.evictions.Len() != 0 {
		t.Fatal("escalated a planned gate")
	}
	// The planned Lease renews: kube-proxy's failure is a failure again.
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.c.blast.isFailing("n1") {
		t.Fatal("kube-proxy still not ready after the planned Lease renewed, and not failing")
	}
}

// The other order: a node whose failure is held by a suspension gets a
// planned release of another extension (the updater asks for the taint
// before it drains). Its failures are planned from that evaluation on, as
// they would be had the release come first: it is tainted for planned
// maintenance at once, not held (simulation seed 5177122390577962639).
func TestAPlannedReleaseOnANodeHeldForAFailureTaintsItForMaintenance(t *testing.T) {
	t.Run("seen by the same instance", func(t *testing.T) { plannedReleaseOnAHeldNode(t, false) })
	t.Run("seen first by a restarted instance", func(t *testing.T) { plannedReleaseOnAHeldNode(t, true) })
}

func plannedReleaseOnAHeldNode(t *testing.T, restart bool) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n, twoExtensions), lease("cni", n, "holder", t0), lease("kube-proxy", n, "holder", t0))
	}
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, objs...)
	for _, n := range names {
		f.sync(n)
	}
	f.clock.Step(time.Second)
	for _, n := range []string{"n1", "n2", "n3"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if f.tainted("n3") || f.condition("n3").Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("n3 not held by the suspension: tainted %v, %+v", f.tainted("n3"), f.condition("n3"))
	}

	f.clock.Step(time.Second)
	f.release("cni", "n3", nodev1alpha1.ReasonUpdating)
	g := f
	if restart {
		// The release is first seen by a new instance, which knows
		// nothing of the held failure but what the Node says.
		g = f.restart(opts)
		g.c.primeBlastRadius(g.ctx)
	}
	g.sync("n3")
	if !g.tainted("n3") {
		t.Fatal("a planned release on a node held for a failure was held too")
	}
	if c := g.condition("n3"); c.Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Errorf("reason %q, want %q", c.Reason, nodev1alpha1.ReasonPlannedMaintenance)
	}
	if g.c.blast.isFailing("n3") {
		t.Error("a node in planned maintenance counts as failing")
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// The timeline keeps the record small whatever the node's list holds: the
// slowest extensions, a count of the others, durations to 100 ms, the start
// to the second.
func TestTheTimelineInTheBootRecordIsBounded(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	var list []string
	for i := range nodev1alpha1.MaxSystemExtensions {
		list = append(list, fmt.Sprintf(`{"name":"%s%02d"}`, strings.Repeat("x", 61), i))
	}
	f := newFixture(t, opts, newNode("n1", func(n *v1.Node) {
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: "[" + strings.Join(list, ",") + "]"}
	}))
	f.live("n1")
	f.clock.Step(123456 * time.Microsecond)
	f.sync("n1")
	for i := range nodev1alpha1.MaxSystemExtensions {
		f.clock.Step(456 * time.Millisecond)
		f.renew(fmt.Sprintf("%s%02d", strings.Repeat("x", 61), i), "n1")
		f.sync("n1")
	}
	if f.tainted("n1") {
		t.Fatalf("node not ungated: %s", f.condition("n1").Message)
	}
	value := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]
	t.Logf("boot record of %d bytes", len(value))
	if len(value) > 1024 {
		t.Errorf("boot record of %d bytes, want at most 1 KiB: %s", len(value), value)
	}
	rec, ok := parseBootRecord(value)
	if !ok || rec.Startup == nil {
		t.Fatalf("no timeline: %s", value)
	}
	tl := rec.Startup
	if len(tl.Extensions) != nodev1alpha1.MaxStartupExtensions || int(tl.Omitted) != nodev1alpha1.MaxSystemExtensions-nodev1alpha1.MaxStartupExtensions {
		t.Errorf("%d extensions and %d omitted, want %d and the rest", len(tl.Extensions), tl.Omitted, nodev1alpha1.MaxStartupExtensions)
	}
	if last := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), nodev1alpha1.MaxSystemExtensions-1); tl.Extensions[0].Name != last {
		t.Errorf("slowest is %s, want %s", tl.Extensions[0].Name, last)
	}
	for _, e := range tl.Extensions {
		if e.Ready == nil || e.Ready.Duration%nodev1alpha1.StartupResolution != 0 {
			t.Errorf("%s: ready %v, not rounded to %s", e.Name, e.Ready, nodev1alpha1.StartupResolution)
		}
	}
	if !strings.Contains(value, `"start":"2026-11-21T10:00:00Z"`) {
		t.Errorf("start not to the second: %s", value)
	}
}

// The start-up of a new node: the time from the gate's start (the
// controller observing the node) to each extension's first ready renewal and
// to the ungate, written in the ungate patch; the creation delay on the API
// server's clock; the histograms; and the NodeUngated Event in one line.
func TestANewNodeRecordsItsStartupTimelineInTheUngatePatch(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true, FailurePolicy: FailurePolicyKeepGated},
		Rule{Name: "csi", Extension: "csi", Selector: labels.Everything(), AffectsReadiness: true, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, newNode("n1", func(n *v1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Second)) }))
	f.live("n1")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")

	f.clock.Step(12 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(3 * time.Second) // csi at 15s
	f.renew("csi", "n1")
	f.sync("n1")
	f.clock.Step(time.Second) // a second renewal is not the first
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(22 * time.Second) // cni at 38s, the last
	f.writes()
	f.renew("cni", "n1")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	if f.tainted("n1") {
		t.Fatal("not ungated")
	}

	rec, ok := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if !ok || rec.Startup == nil {
		t.Fatalf("no timeline in the boot record: %q", f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	}
	want := nodev1alpha1.StartupTimeline{Cause: nodev1alpha1.ReasonNodeRegistered, Start: metav1.NewTime(t0), Ready: metav1.Duration{Duration: 38 * time.Second},
		SinceCreation: dur(40 * time.Second),
		Extensions: []nodev1alpha1.StartupExtension{
			{Name: "cni", Ready: dur(38 * time.Second)}, {Name: "csi", Ready: dur(15 * time.Second)}, {Name: "kube-proxy", Ready: dur(12 * time.Second)}}}
	if got := *rec.Startup; got.Summary() != want.Summary() || !got.Start.Equal(&want.Start) || got.Cause != want.Cause {
		t.Errorf("timeline\n got %+v\nwant %+v", got, want)
	}
	if got, want := rec.Startup.Summary(), "ready 38s after registration (40s after creation); slowest cni 38s, then csi 15s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	f.expectEvent("ready 38s after registration (40s after creation); slowest cni 38s, then csi 15s")

	if count, sum := observed(t, f.c.metrics.NodeStartup, "bootstrap"); count != 1 || sum != 38 {
		t.Errorf("node_startup_seconds{cause=bootstrap}: %d observations summing %vs, want 1 of 38s", count, sum)
	}
	for ext, secs := range map[string]float64{"cni": 38, "csi": 15, "kube-proxy": 12} {
		if count, sum := observed(t, f.c.metrics.ExtensionStartup, ext); count != 1 || sum != secs {
			t.Errorf("extension_startup_seconds{extension=%s}: %d observations summing %vs, want 1 of %vs", ext, count, sum, secs)
		}
	}

	// Steady state: renewals write nothing, and nothing more is observed.
	for range 3 {
		f.clock.Step(10 * time.Second)
		for _, ext := range []string{"kube-proxy", "cni", "csi"} {
			f.renew(ext, "n1")
		}
		f.sync("n1")
	}
	f.expectWrites()
	if count, _ := observed(t, f.c.metrics.NodeStartup, "bootstrap"); count != 1 {
		t.Errorf("%d start-ups observed, want 1", count)
	}
}

// TestEvaluateStartupTimeline is the decision table of the start-up
// timeline: which gates are start-ups, what their timeline says when they
// end, and what is left out. Each case evaluates the node at t0 (the gate's
// start) and again at each renewal of its extensions a and b, as the
// controller does.
func TestEvaluateStartupTimeline(t *testing.T) {
	type renewal struct {
		ext string
		at  time.Duration
	}
	cases := []struct {
		name     string
		live     bool
		tainted  bool
		state    func() *nodeState // nil: first sight
		bootID   string            // default boot-1
		record   *bootRecord       // default: of boot-1, ready
		renewals []renewal
		// failOpenB: b's rule has a startup timeout of 20s with
		// failurePolicy Ungate.
		failOpenB bool

		want        string // the summary; "" for no timeline
		wantFound   bool
		wantObserve map[string]time.Duration
	}{
		{name: "a new node: from its first sight to each first ready renewal and to the ungate",
			live: true, renewals: []renewal{{"a", 12 * time.Second}, {"a", 13 * time.Second}, {"b", 30 * time.Second}},
			want: "ready 30s after registration; slowest b 30s, then a 12s", wantObserve: map[string]time.Duration{"a": 12 * time.Second, "b": 30 * time.Second}},
		{name: "a reboot of a node in service",
			state: inServiceState, bootID: "boot-2", renewals: []renewal{{"b", 4 * time.Second}, {"a", 9 * time.Second}},
			want: "ready 9s after reboot; slowest a 9s, then b 4s", wantObserve: map[string]time.Duration{"a": 9 * time.Second, "b": 4 * time.Second}},
		{name: "a reboot found in the record at the controller's start: the start is the controller's",
			bootID: "boot-2", renewals: []renewal{{"a", 2 * time.Second}, {"b", 3 * time.Second}},
			want: "ready 3s after reboot (found at the controller's start: the start-up began earlier); slowest b 3s, then a 2s", wantFound: true,
			wantObserve: map[string]time.Duration{"a": 2 * time.Second, "b": 3 * time.Second}},
		{name: "found gated before the node was ever ready in its boot",
			tainted: true, record: &bootRecord{BootID: "boot-1", UID: "uid-n1", Pending: true}, renewals: []renewal{{"a", time.Second}, {"b", 2 * time.Second}},
			want: "ready 2s after the controller started (found at the controller's start: the start-up began earlier); slowest b 2s, then a 1s", wantFound: true,
			wantObserve: map[string]time.Duration{"a": time.Second, "b": 2 * time.Second}},
		{name: "found gated after the node was ready in its boot: a failure, not a start-up",
			tainted: true, renewals: []renewal{{"a", time.Second}, {"b", 2 * time.Second}}},
		{name: "a failure gate of a node in service is not a start-up",
			state: func() *nodeState {
				st := inServiceState()
				st.beginGate(causeNotReady, t0)
				insert(&st.gate.scope, "a")
				return st
			}, tainted: true, renewals: []renewal{{"b", time.Second}, {"a", 5 * time.Second}}},
		{name: "an extension that failed open is the slowest, never ready",
			live: true, failOpenB: true, renewals: []renewal{{"a", 5 * time.Second}, {"a", 25 * time.Second}},
			want: "ready 25s after registration; slowest b never (failed open), then a 5s", wantObserve: map[string]time.Duration{"a": 5 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			tracker := newLeaseTracker(clk, 0)
			opts := testOptions()
			var exts []requiredExtension
			for _, name := range []string{"a", "b"} {
				ext := requiredExtension{name: name, lease: nodev1alpha1.LeaseReference{Namespace: testNS, Name: name + ".n1"}, affects: true}
				if name == "b" && tc.failOpenB {
					ext.rule = &Rule{Name: "b", Extension: "b", StartupTimeout: 20 * time.Second, FailurePolicy: FailurePolicyUngate, AffectsReadiness: true}
				}
				exts = append(exts, ext)
			}
			bootID := tc.bootID
			if bootID == "" {
				bootID = "boot-1"
			}
			record := bootRecord{BootID: "boot-1", UID: "uid-n1"}
			if tc.record != nil {
				record = *tc.record
			}
			st := newNodeState(t0)
			if tc.state != nil {
				st = tc.state()
			}
			tainted := tc.tainted
			var last decision
			step := func(at time.Duration) {
				clk.SetTime(t0.Add(at))
				f := nodeFacts{name: "n1", uid: "uid-n1", bootID: bootID, tainted: tainted, record: record, hasRecord: !tc.live}
				d := evaluatePurely(t, evalInput{now: t0.Add(at), opts: &opts, node: f, prev: st, exts: exts,
					leases: tracker.lookupLeases(exts), live: tc.live, blast: testBlastView(false, false)})
				st = d.next
				tainted = d.taint
				if d.startup != nil {
					if last.startup != nil {
						t.Fatalf("a second timeline at %s: %s", at, d.startup.Summary())
					}
					last = d
				}
			}
			step(0)
			for _, r := range tc.renewals {
				clk.SetTime(t0.Add(r.at))
				tracker.observe(lease(r.ext, "n1", "holder", t0.Add(r.at)))
				step(r.at)
			}
			if tainted {
				t.Fatalf("still gated after the renewals: %+v", st)
			}
			if got := last.startup.Summary(); got != tc.want {
				t.Errorf("timeline %q, want %q", got, tc.want)
			}
			if last.startup != nil && last.startup.FoundAtStart != tc.wantFound {
				t.Errorf("foundAtStart %v, want %v", last.startup.FoundAtStart, tc.wantFound)
			}
			if tc.want != "" && fmt.Sprint(last.startupExtensions) != fmt.Sprint(tc.wantObserve) {
				t.Errorf("observed %v, want %v", last.startupExtensions, tc.wantObserve)
			}
			if st.startup.firstReady != nil {
				t.Errorf("first renewals kept after the ungate: %v", st.startup.firstReady)
			}
		})
	}
}

func inServiceState() *nodeState {
	st := newNodeState(t0)
	st.uid, st.bootID, st.readyInBoot, st.last.hadGating = "uid-n1", "boot-1", true, true
	st.last.extReady = map[string]bool{"a": true, "b": true}
	return st
}

// A restarted controller finds the timeline on a ready node and writes
// nothing; a later failure gate of the node is no start-up, and its ungate
// keeps the boot's timeline as it is.
func TestARestartedControllerKeepsTheTimelineWithoutWriting(t *testing.T) {
	tl := `{"cause":"NodeRebooted","start":"2026-11-21T09:00:00Z","ready":"41.2s","extensions":[{"name":"kube-proxy","ready":"38.1s"}]}`
	n := readyNode("n1", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.BootAnnotation] = `{"bootID":"boot-1","uid":"uid-n1","startup":` + tl + `}`
	})
	f := newFixture(t, testOptions(), n)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectWrites()

	f.release("kube-proxy", "n1", "Crashed")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated for the failure")
	}
	f.clock.Step(5 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated")
	}
	if got := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]; !strings.Contains(got, `"startup":`+tl) {
		t.Errorf("boot record %s, want the boot's timeline kept as it was", got)
	}
	for _, e := range f.events() {
		if strings.Contains(e, "Start-up:") {
			t.Errorf("a failure gate's ungate reported a start-up: %s", e)
		}
	}
}

// A restarted controller adopts a condition that says what it would say, to
// write no Node at all after a start, but only if the condition names the
// same extensions not ready: one the previous instance named released has
// renewed since, and the condition no longer names it (simulation seed 22:
// a node gated for its reboot kept "Not ready: kube-proxy (LeaseReleased…)"
// after a failover, though kube-proxy had come back before it).
func TestARestartedControllerRewritesAConditionNamingAnExtensionThatCameBackSince(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.release("kube-proxy", "n1", "Updating")
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonNodeRebooted || !strings.Contains(c.Message, "kube-proxy (LeaseReleased") {
		t.Fatalf("condition %s %q, want NodeRebooted naming the released kube-proxy", c.Reason, c.Message)
	}
	// kube-proxy renews; the controller stops before it sees it.
	f.clock.Step(5 * time.Second)
	g := newFixture(t, testOptions(), f.node("n1"), lease("kube-proxy", "n1", "holder", f.clock.Now()))
	g.sync("n1")
	c := g.condition("n1")
	if c.Reason != nodev1alpha1.ReasonNodeRebooted || strings.Contains(c.Message, "kube-proxy (") {
		t.Fatalf("condition %s %q after the restart, want NodeRebooted naming nothing not ready", c.Reason, c.Message)
	}
}

// A condition that names an extension expired which looks ready to a
// restarted controller only by its start's grace is adopted: the grace hides
// an expiry, it shows no renewal (the test above). The first renewal
// observed rewrites it.
func TestAnAdoptedConditionNamingAnExpiryTheStartGraceHidesIsRewrittenAtTheFirstRenewal(t *testing.T) {
	opts, f, _ := expiredUpdaterBeforeARestart(t)
	g := newFixture(t, opts, f.node("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	g.sync("n1")
	g.expectWrites()
	g.clock.Step(time.Second)
	g.renew("updater", "n1")
	g.sync("n1")
	if c := g.condition("n1"); c.Status != v1.ConditionTrue || strings.Contains(c.Message, "updater (") {
		t.Fatalf("condition %s/%s %q after the updater renewed, want it no longer named", c.Status, c.Reason, c.Message)
	}
}

// The renewal that ends the start's grace of an expiry an adopted condition
// names is no quiet renewal of a steady node: it queues the node, whose sync
// rewrites the condition (simulation seed 15660107569789160911: n4's updater
// renewed 6 s after controller 3's start, and the condition named it expired
// until its next change).
func TestTheRenewalThatEndsTheGraceOfAnAdoptedConditionsExpiryQueuesTheNode(t *testing.T) {
	opts, f, _ := expiredUpdaterBeforeARestart(t)
	g := newFixture(t, opts, f.node("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	g.sync("n1")
	g.expectWrites()
	for g.c.queue.Len() > 0 {
		key, _ := g.c.queue.Get()
		g.c.queue.Done(key)
	}
	g.clock.Step(time.Second)
	g.renew("updater", "n1")
	if got := g.c.queue.Len(); got != 1 {
		t.Fatalf("the updater's first renewal after the restart queued %d nodes, want n1", got)
	}
	key, _ := g.c.queue.Get()
	g.sync(key)
	g.c.queue.Done(key)
	if c := g.condition("n1"); c.Status != v1.ConditionTrue || strings.Contains(c.Message, "updater (") {
		t.Fatalf("condition %s/%s %q after the updater renewed, want it no longer named", c.Status, c.Reason, c.Message)
	}
}

// The condition a restarted controller adopts names each extension in the
// same list, of those that gate or of those that do not: a planned release
// the previous instance saw in the node's new boot gates, and one a
// restarted controller finds after a reboot the boot record reveals belongs
// to the previous boot and does not (simulation seed 9061028151232962236).
func TestARestartedControllerRewritesAConditionNamingAnExtensionInTheOtherList(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: false,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	f.sync("n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("updater", "n1", "Updating")
	f.sync("n1")
	gating, _, _ := strings.Cut(f.condition("n1").Message, "Not ready but not affecting readiness")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonNodeRebooted || !strings.Contains(gating, "updater (LeaseReleased") {
		t.Fatalf("condition %s %q, want NodeRebooted naming the updater's release among the extensions that gate", c.Reason, c.Message)
	}
	released := lease("updater", "n1", "", f.clock.Now())
	released.Annotations = map[string]string{nodev1alpha1.ReasonAnnotation: "Updating"}
	g := newFixture(t, opts, f.node("n1"), lease("kube-proxy", "n1", "holder", t0), released)
	g.sync("n1")
	c := g.condition("n1")
	if c.Reason != nodev1alpha1.ReasonNodeRebooted || !strings.Contains(c.Message, "Not ready but not affecting readiness: updater (LeaseReleased") {
		t.Fatalf("condition %s %q after the restart, want NodeRebooted naming the release among the extensions that do not gate", c.Reason, c.Message)
	}
}

// Found by the simulation (seed 5918163945968055005): a startup timeout took
// the gate's reason over from PlannedMaintenance; the updater's Lease came
// back, and the late extension came up while another one had failed. The
// gate's own reason came back as it was before the timeout, PlannedMaintenance,
// until the node's next sync, though nothing was planned any more.
func TestTheReasonAStartupTimeoutGivesBackSaysWhatTheFailuresAreNow(t *testing.T) {
	f := newFixture(t, withCNI(testOptions(), 30*time.Second, FailurePolicyKeepGated),
		newNode("n1", withTaint), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("a node found tainted without a record of its boot, cni never up, was not gated at the start")
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonPlannedMaintenance {
		t.Fatalf("condition %s after kube-proxy's release for an update, want %s", r, nodev1alpha1.ReasonPlannedMaintenance)
	}
	f.clock.Step(30 * time.Second)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Fatalf("condition %s after cni's startup timeout, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
	f.clock.Step(time.Second)
	f.deleteLease(lease("kube-proxy", "n1", "holder", t0))
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated with kube-proxy's Lease gone")
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsNotReady {
		t.Errorf("condition %s once cni came up with kube-proxy's Lease deleted, want %s: nothing is planned any more", r, nodev1alpha1.ReasonExtensionsNotReady)
	}
}
