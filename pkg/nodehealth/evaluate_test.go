package nodehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"nodehealth.io/nodehealth/pkg/nodeutil"

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
	st := g.c.nodes["n1"]
	failing, gated := st.failing, st.gated
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
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 5 * time.Second, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	f.sync("n1")
	f.clock.Step(2 * time.Second)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
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

// After a restart every Lease counts as observed at the start, so a
// non-gating extension that had expired looks ready until its grace runs out
// again, and the condition's message then says again what the node already
// holds: nothing to write (simulation seed 84, a write at steady state).
func TestAConditionTheNodeAlreadyHoldsIsNotRewrittenAfterARestart(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: false,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	f.sync("n1")
	for i := 0; i < 5; i++ {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
	}
	held := f.condition("n1")
	if held.Status != v1.ConditionTrue || !strings.Contains(held.Message, "updater (LeaseExpired") {
		t.Fatalf("condition %s/%s %q, want True naming the expired updater", held.Status, held.Reason, held.Message)
	}

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
	if st := f.state("n1"); st.cause != causeRebooted || !st.full {
		t.Fatalf("after a reboot during a failure gate: cause %q full %v, want %q and full", st.cause, st.full, causeRebooted)
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
	st := f.state("n1")
	if st.failing {
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
	if st := f.state("n1"); !st.failing {
		t.Fatal("kube-proxy still not ready after the planned Lease renewed, and not failing")
	}
}
