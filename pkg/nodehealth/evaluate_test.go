package nodehealth

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// leaseAt describes one extension Lease for the decision table: renewed (as
// the controller observed it) at an offset from t0, released with a reason,
// or absent (nil in the table).
type leaseAt struct {
	renewed  time.Duration
	released string
}

// TestEvaluate is the decision table of the gate state machine (docs/controller.md):
// state, facts and Leases in, decision and state out, with no API server and
// no controller, in the manner of kwok's Test_tryAcquireOrRenew.
func TestEvaluate(t *testing.T) {
	const now = 60 * time.Second // every case evaluates at t0+60s
	gatedAt := func(cause gateCause, at time.Duration, mutate ...func(*nodeState)) func() *nodeState {
		return func() *nodeState {
			st := newNodeState(t0)
			st.uid, st.bootID = "uid-n1", "boot-1"
			st.hadGating = true
			st.gate(cause, t0.Add(at))
			st.readyInBoot = !cause.bootstrap()
			st.extReady = map[string]bool{"a": false, "b": true}
			for _, m := range mutate {
				m(st)
			}
			return st
		}
	}
	inService := func() *nodeState {
		st := newNodeState(t0)
		st.uid, st.bootID, st.readyInBoot, st.hadGating = "uid-n1", "boot-1", true, true
		st.extReady = map[string]bool{"a": true, "b": true}
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

		wantTaint, wantSuppressed, wantStarted, wantEnded, wantEscalate bool
		wantCause                                                       gateCause
		wantFailing                                                     bool
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
			state: gatedAt(causeNotReady, 40*time.Second, func(st *nodeState) { st.scope.Insert("a") }), tainted: true,
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
			state: gatedAt(causeMaintenance, 40*time.Second, func(st *nodeState) { st.plannedExts.Insert("a") }), tainted: true,
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
			state: gatedAt(causeNotReady, 40*time.Second, func(st *nodeState) { st.scope.Insert("a") }), tainted: true,
			leases: map[string]*leaseAt{"a": fresh, "b": fresh}, ownStale: true,
			wantEnded: true},
		{name: "eviction clock ran out: escalate",
			state: gatedAt(causeNotReady, 0, func(st *nodeState) { st.scope.Insert("a") }), tainted: true,
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, failedFor: 5 * time.Minute,
			wantTaint: true, wantEscalate: true, wantCause: causeNotReady, wantFailing: true},
		{name: "eviction clock ran out while suspended: no escalation",
			state: gatedAt(causeNotReady, 0, func(st *nodeState) { st.scope.Insert("a") }), tainted: true,
			leases: map[string]*leaseAt{"a": nil, "b": fresh}, failedFor: 5 * time.Minute, suspended: true,
			wantTaint: true, wantCause: causeNotReady, wantFailing: true},
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
				st.failing = true
				st.escElapsed = tc.failedFor
			}
			bootID := tc.bootID
			if bootID == "" {
				bootID = "boot-1"
			}
			f := nodeFacts{name: "n1", uid: types.UID("uid-n1"), bootID: bootID, tainted: tc.tainted,
				record: bootRecord{BootID: "boot-1", UID: "uid-n1"}, hasRecord: true}
			var failing, tracked bool
			env := evalEnv{now: t0.Add(now), opts: &opts, tracker: tracker, live: tc.live, ownViewStale: tc.ownStale,
				suspended:     func(string) bool { return tc.suspended },
				updateFailing: func(fl, tr bool) { failing, tracked = fl, tr }}
			d := evaluate(env, f, st, exts)

			if d.taint != tc.wantTaint || d.suppressed != tc.wantSuppressed || d.started != tc.wantStarted ||
				d.ended != tc.wantEnded || d.escalate != tc.wantEscalate {
				t.Errorf("decision taint=%v suppressed=%v started=%v ended=%v escalate=%v, want %v %v %v %v %v",
					d.taint, d.suppressed, d.started, d.ended, d.escalate,
					tc.wantTaint, tc.wantSuppressed, tc.wantStarted, tc.wantEnded, tc.wantEscalate)
			}
			if gateReason(st) != tc.wantCause {
				t.Errorf("gate reason %q, want %q", gateReason(st), tc.wantCause)
			}
			if failing != tc.wantFailing || !tracked {
				t.Errorf("blast radius told failing=%v tracked=%v, want failing=%v tracked=true", failing, tracked, tc.wantFailing)
			}
		})
	}
}
