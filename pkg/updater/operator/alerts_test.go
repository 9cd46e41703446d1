package operator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
)

// fakeSource is an alert source: it answers alerts, or err, and records
// the matchers it was asked with.
type fakeSource struct {
	alerts []alertmanager.Alert
	err    error
	asked  [][]alertmanager.Matcher
}

func (s *fakeSource) Firing(_ context.Context, m []alertmanager.Matcher) ([]alertmanager.Alert, error) {
	s.asked = append(s.asked, m)
	if s.err != nil {
		return nil, s.err
	}
	return s.alerts, nil
}

func alert(name string, labels ...string) alertmanager.Alert {
	l := map[string]string{"alertname": name}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return alertmanager.Alert{Fingerprint: name + strings.Join(labels, ""), Labels: l}
}

// alertGates sets spec.gates.alerts: one entry of source with the matcher
// severity=critical.
func alertGates(source string) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		p.Spec.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: source,
			Matchers: []updatesv1alpha1.AlertMatcher{{Name: "severity", Value: "critical", IsEqual: ptr.To(true)}}}}}
	}
}

func withSources(o Options, sources map[string]AlertSource) Options {
	o.AlertSources = sources
	return o
}

// blockedOf is the policy's Blocked condition as "Status/Reason: message".
func (f *fixture) blockedOf(name string) string {
	f.t.Helper()
	p, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyBlocked)
	if c == nil {
		return ""
	}
	if err := f.policies.Update(p); err != nil {
		f.t.Fatal(err)
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// TestAFiringAlertHoldsEveryStartUntilItResolves: before a start the
// operator asks the policy's source with its matchers; a firing alert holds
// every start (Blocked, FiringAlerts, naming the alert and the source) and
// the pass asks again after DefaultGateRecheck; once the alert resolved the node
// starts.
func TestAFiringAlertHoldsEveryStartUntilItResolves(t *testing.T) {
	src := &fakeSource{alerts: []alertmanager.Alert{alert("DiskFull", "severity", "critical")}}
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	if got, want := f.blockedOf("fleet"), "True/FiringAlerts: Alerts of spec.gates.alerts fire and hold back every start: DiskFull (source prom)"; got != want {
		t.Errorf("Blocked:\n  got  %s\n  want %s", got, want)
	}
	if want := [][]alertmanager.Matcher{{{Name: "severity", Value: "critical", IsEqual: true}}}; !slices.EqualFunc(src.asked, want, slices.Equal) {
		t.Errorf("asked %v, want %v", src.asked, want)
	}
	if timers := f.timers[startKey]; len(timers) == 0 || timers[len(timers)-1] != DefaultGateRecheck {
		t.Errorf("start pass timers %v, want one in %s", timers, DefaultGateRecheck)
	}
	f.client.ClearActions()

	src.alerts = nil
	f.clock.Step(DefaultGateRecheck)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"list", "list policies", "update a StagedAndPerformedUpdate 1.20.0", "status fleet"})
	if got := f.blockedOf("fleet"); !strings.HasPrefix(got, "False/NotBlocked") {
		t.Errorf("Blocked %s, want False/NotBlocked", got)
	}
}

// TestAShorterGateRecheckReadsTheGatesAgainSooner: Options.GateRecheck sets
// both when a held pass looks again and how long the alert sources' answer
// is shared, so that the pass it wakes asks anew.
func TestAShorterGateRecheckReadsTheGatesAgainSooner(t *testing.T) {
	src := &fakeSource{alerts: []alertmanager.Alert{alert("DiskFull", "severity", "critical")}}
	opts := withSources(defaultOptions(), map[string]AlertSource{"prom": src})
	opts.GateRecheck = 2 * time.Second
	f := newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	if got := f.blockedOf("fleet"); !strings.HasPrefix(got, "True/FiringAlerts") {
		t.Errorf("Blocked %s, want True/FiringAlerts", got)
	}
	if timers := f.timers[startKey]; len(timers) == 0 || timers[len(timers)-1] != 2*time.Second {
		t.Errorf("start pass timers %v, want one in 2s", timers)
	}
	f.client.ClearActions()

	src.alerts = nil
	f.clock.Step(2 * time.Second)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 2 {
		t.Errorf("the source was asked %d times, want 2: the answer is kept past GateRecheck", len(src.asked))
	}
	f.expect([]string{"list", "list policies", "update a StagedAndPerformedUpdate 1.20.0", "status fleet"})
}

// TestANegativeGateRecheckIsRejected: zero takes the default, a negative
// interval would read the gates again in a loop.
func TestANegativeGateRecheckIsRejected(t *testing.T) {
	opts := defaultOptions()
	opts.GateRecheck = -time.Second
	if err := opts.Validate(); err == nil || !strings.Contains(err.Error(), "recheck interval must not be negative") {
		t.Errorf("Validate with a negative GateRecheck: %v", err)
	}
	opts.GateRecheck = 0
	if err := opts.Validate(); err != nil {
		t.Errorf("Validate with GateRecheck 0 (the default): %v", err)
	}
}

// TestAnUnreachableAlertSourceHoldsEveryStart: fail closed, the condition
// names the source and the error.
func TestAnUnreachableAlertSourceHoldsEveryStart(t *testing.T) {
	src := &fakeSource{err: errors.New("dial tcp 127.0.0.1:9093: connect: connection refused")}
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	want := "True/GateUnavailable: No node starts while a gate cannot be read (fail closed): querying alert source prom: dial tcp 127.0.0.1:9093: connect: connection refused"
	if got := f.blockedOf("fleet"); got != want {
		t.Errorf("Blocked:\n  got  %s\n  want %s", got, want)
	}
}

// TestAPolicyNamingAnUnknownAlertSourceStartsNothingAndTheOthersGoOn: the
// source is not in the operator's configuration: the policy says so
// (UnknownAlertSource) and starts nothing, no source is asked, and another
// policy starts its node.
func TestAPolicyNamingAnUnknownAlertSourceStartsNothingAndTheOthersGoOn(t *testing.T) {
	src := &fakeSource{}
	pools := func(p string) map[string]string { return map[string]string{"pool": p} }
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{mkPolicy("fleet", pools("a"), alertGates("staging-am")), mkPolicy("other", pools("b"))},
		[]*v1.Node{mkNode("a", label("pool", "a")), mkNode("b", label("pool", "b"))},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet", "status other", "list", "list policies", "update b StagedAndPerformedUpdate 1.20.0"})
	want := "True/UnknownAlertSource: No node starts: spec.gates.alerts names alert sources the operator's configuration does not define (alertSources): staging-am"
	if got := f.blockedOf("fleet"); got != want {
		t.Errorf("Blocked:\n  got  %s\n  want %s", got, want)
	}
	if len(src.asked) != 0 {
		t.Errorf("a source was asked: %v", src.asked)
	}
}

// soakingShadow is n1 one minute into its soak, two minutes before its
// MonitoringUpdate deadline, started by fleet from oldV.
func soakingShadow(mods ...shadowMod) *updatesv1alpha1.BottlerocketShadow {
	return mkShadow("n1", monitor, monitor, append([]shadowMod{running(newV), since(monitorDL - 2*time.Minute), fromVersion(oldV), startedBy("fleet"),
		annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-time.Minute).Format(time.RFC3339))}, mods...)...)
}

// TestAnAlertNamingTheNodeDuringItsSoakFailsItsHealthGate: like a missed
// health gate it halts, or rolls back with onHealthGateFailure Rollback;
// an alert that names another node, or none, does not touch the soak.
func TestAnAlertNamingTheNodeDuringItsSoakFailsItsHealthGate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		alerts   []alertmanager.Alert
		policy   policyMod
		want     []string
		rollback string
	}{
		{name: "names the node, Halt", alerts: []alertmanager.Alert{alert("NodeDown", "node", "n1")}, policy: func(*updatesv1alpha1.UpdatePolicy) {},
			want: []string{"update n1 Idle 1.20.0 failed=FiringAlert:"}},
		{name: "names the node, Rollback", alerts: []alertmanager.Alert{alert("NodeDown", "node", "n1")}, policy: rollbackPolicy,
			want: []string{"update n1 Idle 1.20.0 failed=FiringAlert:"}, rollback: newV},
		{name: "names another node", alerts: []alertmanager.Alert{alert("NodeDown", "node", "n2"), alert("Fleet")}, policy: func(*updatesv1alpha1.UpdatePolicy) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{alerts: tc.alerts}
			f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
				[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"), tc.policy)}, []*v1.Node{mkNode("n1")},
				[]*updatesv1alpha1.BottlerocketShadow{soakingShadow()})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect(tc.want)
			got, err := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r := got.Annotations[updatesv1alpha1.RollbackAnnotation]; r != tc.rollback {
				t.Errorf("rollback annotation %q, want %q", r, tc.rollback)
			}
			if tc.want != nil && !strings.Contains(got.Annotations[updatesv1alpha1.FailureReasonAnnotation], "NodeDown{node=n1} (source prom)") {
				t.Errorf("failure reason %q does not name the alert", got.Annotations[updatesv1alpha1.FailureReasonAnnotation])
			}
		})
	}
}

// TestAnUnreachableSourceDuringTheSoakPausesTheSoakAndItsDeadline: the
// pause is recorded in the shadow; past the MonitoringUpdate deadline the
// node still does not fail while the source cannot answer; once it answers
// again the pause is added up, and the soak and the deadline end that much
// later.
func TestAnUnreachableSourceDuringTheSoakPausesTheSoakAndItsDeadline(t *testing.T) {
	src := &fakeSource{err: errors.New("context deadline exceeded")}
	s := soakingShadow()
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	healthy := "annotate n1 healthy-since=" + t0.Add(-time.Minute).Format(time.RFC3339)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{healthy + " soak-paused-since=" + t0.Format(time.RFC3339)})
	annotate(updatesv1alpha1.SoakPausedSinceAnnotation, t0.Format(time.RFC3339))(s)
	_ = f.shadows.Update(s)

	// Ten minutes later, eight past the deadline: no failure, and no timer
	// but the recheck.
	f.clock.Step(10 * time.Minute)
	f.timers = map[string][]time.Duration{}
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	if got := f.timers["n1"]; !equalDurations(got, []time.Duration{DefaultGateRecheck}) {
		t.Errorf("timers %v, want only the recheck", got)
	}

	// The source answers again; the operator asks it when the last
	// answer, shared by every reader of the gate, expires.
	src.err = nil
	f.clock.Step(DefaultGateRecheck)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{healthy + " soak-paused=610"})
	delete(s.Annotations, updatesv1alpha1.SoakPausedSinceAnnotation)
	annotate(updatesv1alpha1.SoakPausedAnnotation, "610")(s)
	_ = f.shadows.Update(s)
	f.timers = map[string][]time.Duration{}
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	// The deadline was 2m away when the pause began, the soak 4m.
	if got := f.timers["n1"]; !slices.Contains(got, 2*time.Minute) || !slices.Contains(got, 4*time.Minute) {
		t.Errorf("timers %v, want the deadline's 2m and the soak's 4m", got)
	}
	f.clock.Step(4 * time.Minute)
	f.client.ClearActions()
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	// 4m later the deadline (moved by the pause) has passed first.
	f.expect([]string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"})
}

// TestAPausedSoakEndsItsPauseWhenTheNodeLosesReadiness: with no soak to
// pause the deadline runs again, so a node that stays unready fails at its
// (moved) deadline even while the source cannot answer.
func TestAPausedSoakEndsItsPauseWhenTheNodeLosesReadiness(t *testing.T) {
	src := &fakeSource{err: errors.New("connection refused")}
	s := soakingShadow(annotate(updatesv1alpha1.SoakPausedSinceAnnotation, t0.Add(-time.Minute).Format(time.RFC3339)))
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("n1", unready("KubeletNotReady"))},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"annotate n1 healthy-since=" + t0.Add(-time.Minute).Format(time.RFC3339) + " soak-paused=60"})
}
