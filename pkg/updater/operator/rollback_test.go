package operator

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func rollbackPolicy(p *updatesv1alpha1.UpdatePolicy) {
	p.Spec.OnHealthGateFailure = updatesv1alpha1.HealthGateFailureRollback
}

func TestOnHealthGateFailureIsHaltRollbackOrAnInvalidSpec(t *testing.T) {
	for _, tc := range []struct {
		action   updatesv1alpha1.HealthGateFailureAction
		rollback bool
		invalid  string
	}{
		{action: "", rollback: false},
		{action: updatesv1alpha1.HealthGateFailureHalt, rollback: false},
		{action: updatesv1alpha1.HealthGateFailureRollback, rollback: true},
		{action: "Retry", invalid: `spec.onHealthGateFailure "Retry" must be Halt or Rollback`},
	} {
		p := parsePolicy(fleet(func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.OnHealthGateFailure = tc.action }), defaultOptions().Deadlines)
		if p.rollback != tc.rollback || p.invalid != tc.invalid {
			t.Errorf("%q: rollback %v invalid %q, want %v %q", tc.action, p.rollback, p.invalid, tc.rollback, tc.invalid)
		}
	}
}

func fromVersion(v string) shadowMod { return annotate(updatesv1alpha1.FromVersionAnnotation, v) }
func rolledBack(v string) shadowMod  { return annotate(updatesv1alpha1.RollbackAnnotation, v) }

// specVersion sets spec.version, as a failure or an abort keeps it at Idle.
func specVersion(v string) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.Version = v }
}

// transitionAt sets spec's transition time.
func transitionAt(t time.Time) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.StateTransitionTimestamp = &metav1.Time{Time: t} }
}

func TestStartRecordsTheVersionTheNodeRanBefore(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	s, err := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.State != staged || s.Annotations[updatesv1alpha1.FromVersionAnnotation] != oldV {
		t.Errorf("spec %s, from-version %q; want %s and %q", s.Spec.State, s.Annotations[updatesv1alpha1.FromVersionAnnotation], staged, oldV)
	}
}

// TestOnlyAHealthGateFailureOfAPolicyThatAsksForItNamesAVersionToRollBack:
// the failure is recorded (and halts) as ever; the rollback annotation is
// added only for the health gate (the MonitoringUpdate deadline) of a
// policy with onHealthGateFailure Rollback, an update that recorded the
// version it left, and never for a rollback's own failure.
func TestOnlyAHealthGateFailureOfAPolicyThatAsksForItNamesAVersionToRollBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   policyMod
		shadow   *updatesv1alpha1.BottlerocketShadow
		want     string // the update
		rollback string // the rollback annotation written
		events   string
	}{
		{name: "health gate, Rollback: rolled back", policy: rollbackPolicy,
			shadow: mkShadow("n1", monitor, monitor, running(newV), since(monitorDL), fromVersion(oldV), startedBy("fleet")),
			want:   "update n1 Idle 1.20.0 failed=DeadlineExceeded:", rollback: newV, events: "Warning UpdateFailed"},
		{name: "health gate, Halt: halts only", policy: func(*updatesv1alpha1.UpdatePolicy) {},
			shadow: mkShadow("n1", monitor, monitor, running(newV), since(monitorDL), fromVersion(oldV), startedBy("fleet")),
			want:   "update n1 Idle 1.20.0 failed=DeadlineExceeded:", events: "Warning UpdateFailed"},
		{name: "wrong version, Rollback: halts only", policy: rollbackPolicy,
			shadow: mkShadow("n1", rebooted, rebooted, running(oldV), fromVersion(oldV), startedBy("fleet")),
			want:   "update n1 Idle 1.20.0 failed=WrongVersion:", events: "Warning UpdateFailed"},
		{name: "RebootedIntoUpdate deadline, Rollback: halts only", policy: rollbackPolicy,
			shadow: mkShadow("n1", rebooted, staged, since(rebootDL), fromVersion(oldV), startedBy("fleet")),
			want:   "update n1 Idle 1.20.0 failed=DeadlineExceeded:", events: "Warning UpdateFailed"},
		{name: "health gate, Rollback, no version recorded at the start: halts only", policy: rollbackPolicy,
			shadow: mkShadow("n1", monitor, monitor, running(newV), since(monitorDL), startedBy("fleet")),
			want:   "update n1 Idle 1.20.0 failed=DeadlineExceeded:", events: "Warning UpdateFailed"},
		{name: "a rollback's own health gate: halts only, the annotation kept", policy: rollbackPolicy,
			shadow: mkShadow("n1", monitor, monitor, running(oldV), since(monitorDL), specVersion(oldV), fromVersion(newV), rolledBack(newV), startedBy("fleet")),
			want:   "update n1 Idle 1.19.0 failed=DeadlineExceeded:", rollback: newV, events: "Warning RollbackFailed,Warning UpdateFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(tc.policy)}, []*v1.Node{mkNode("n1")},
				[]*updatesv1alpha1.BottlerocketShadow{tc.shadow})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{tc.want})
			s, _ := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
			if got := s.Annotations[updatesv1alpha1.RollbackAnnotation]; got != tc.rollback {
				t.Errorf("rollback annotation %q, want %q", got, tc.rollback)
			}
			if got := distinct(f.events()); strings.Join(got, ",") != tc.events {
				t.Errorf("events = %v, want %v", got, tc.events)
			}
		})
	}
}

// TestTheOperatorRollsANodeBackOnceAfterItsAgentReportsIdle: once the agent
// of a node whose health gate failed reports Idle, the operator updates it
// to the version it left, through the usual states; never a second time
// for the same failure, nor after the rollback failed.
func TestTheOperatorRollsANodeBackOnceAfterItsAgentReportsIdle(t *testing.T) {
	failed := []shadowMod{running(newV), specVersion(newV), transitionAt(t0), failedAt(t0), fromVersion(oldV), rolledBack(newV), startedBy("fleet")}
	for _, tc := range []struct {
		name   string
		shadow *updatesv1alpha1.BottlerocketShadow
		want   []string
		events string
	}{
		{name: "the agent still completes: waits", shadow: mkShadow("n1", idle, monitor, failed...)},
		{name: "the agent reports Idle: rolled back", shadow: mkShadow("n1", idle, idle, failed...),
			want: []string{"update n1 StagedAndPerformedUpdate 1.19.0"}, events: "Warning RollbackStarted"},
		{name: "resumed meanwhile: rolled back all the same", shadow: mkShadow("n1", idle, idle, append(failed, resumedAt(t0))...),
			want: []string{"update n1 StagedAndPerformedUpdate 1.19.0"}, events: "Warning RollbackStarted"},
		{name: "the node no longer runs the failed version: nothing", shadow: mkShadow("n1", idle, idle, append(failed, running(oldV))...)},
		{name: "the rollback ended (spec moved on since the failure): nothing",
			shadow: mkShadow("n1", idle, idle, append(failed, specVersion(""), transitionAt(t0.Add(time.Hour)), running(oldV))...)},
		{name: "the rollback failed: nothing", shadow: mkShadow("n1", idle, idle,
			append(failed, specVersion(oldV), fromVersion(newV), transitionAt(t0.Add(time.Hour)), failedAt(t0.Add(time.Hour)))...)},
		{name: "the rollback failed before its reboot: nothing", shadow: mkShadow("n1", idle, idle,
			append(failed, specVersion(oldV), fromVersion(newV), transitionAt(t0.Add(time.Hour)), crashed(1, t0.Add(time.Hour)))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(rollbackPolicy)}, []*v1.Node{mkNode("n1")},
				[]*updatesv1alpha1.BottlerocketShadow{tc.shadow})
			f.clock.SetTime(t0.Add(2 * time.Hour))
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect(tc.want)
			if got := distinct(f.events()); strings.Join(got, ",") != tc.events {
				t.Errorf("events = %v, want %v", got, tc.events)
			}
			if len(tc.want) == 0 {
				return
			}
			s, _ := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
			if !updatesv1alpha1.Halting(s.Annotations) && s.Annotations[updatesv1alpha1.ResumeAnnotation] == "" {
				t.Errorf("the failure record is gone: %v", s.Annotations)
			}
			if got := s.Annotations[updatesv1alpha1.FromVersionAnnotation]; got != newV {
				t.Errorf("from-version %q, want %q (the version the rollback leaves)", got, newV)
			}
		})
	}
}

// TestARollbackThatPassesItsHealthGateEndsIdleWithTheFailureKept: the node
// ends Idle on the old version; the policy records no success (a rollback
// is no update that passed), and the failure still halts it.
func TestARollbackThatPassesItsHealthGateEndsIdleWithTheFailureKept(t *testing.T) {
	s := mkShadow("n1", monitor, monitor, running(oldV), specVersion(oldV), since(monitorDL/2), failedAt(t0.Add(-time.Hour)),
		fromVersion(newV), rolledBack(newV), startedBy("fleet"), annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-soak).Format(time.RFC3339)))
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(rollbackPolicy)}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle"})
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal RollbackSucceeded" {
		t.Errorf("events = %v, want Normal RollbackSucceeded", got)
	}
	out, _ := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
	if !updatesv1alpha1.Halting(out.Annotations) || out.Annotations[updatesv1alpha1.RollbackAnnotation] != newV {
		t.Errorf("annotations %v: want the failure and the rollback kept", out.Annotations)
	}
}

// TestANodeIsNeverStartedAgainIntoTheVersionItRolledBackFrom: not after a
// resume either; a newer version starts, and removing the annotation lets
// the version start again.
func TestANodeIsNeverStartedAgainIntoTheVersionItRolledBackFrom(t *testing.T) {
	resumed := []shadowMod{running(oldV), failedAt(t0.Add(-time.Hour)), resumedAt(t0.Add(-time.Hour)), fromVersion(newV), startedBy("fleet")}
	for _, tc := range []struct {
		name string
		mods []shadowMod
		want []string
	}{
		{name: "rolled back from the offered version: not started", mods: append(resumed, rolledBack(newV))},
		{name: "v-prefixed alike", mods: append(resumed, rolledBack("v"+newV))},
		{name: "a newer version offered: started", mods: append(resumed, rolledBack(newV), offered("1.21.0")),
			want: []string{"list", "list policies", "update n1 StagedAndPerformedUpdate 1.21.0"}},
		{name: "the annotation removed: started", mods: resumed,
			want: []string{"list", "list policies", "update n1 StagedAndPerformedUpdate 1.20.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(rollbackPolicy)}, []*v1.Node{mkNode("n1")},
				[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", idle, idle, tc.mods...)})
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range f.actions() {
				if !strings.HasPrefix(a, "status ") {
					got = append(got, a)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

// TestARollbackStartsOnlyInASecondAfterTheFailure: the API stores times in
// seconds, and a failure not older than spec's transition marks the
// attempt failed (it frees its slot); a rollback written in the second of
// the failure would not count toward the limits nor as in flight. It waits
// for the next second.
func TestARollbackStartsOnlyInASecondAfterTheFailure(t *testing.T) {
	s := mkShadow("n1", idle, idle, running(newV), specVersion(newV), transitionAt(t0), failedAt(t0), fromVersion(oldV), rolledBack(newV), startedBy("fleet"),
		annotate(updatesv1alpha1.FailureReasonAnnotation, "DeadlineExceeded: …"))
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(rollbackPolicy)}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	f.clock.SetTime(t0.Add(300 * time.Millisecond))
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	if got := f.timers["n1"]; len(got) != 1 || got[0] != 700*time.Millisecond {
		t.Errorf("timers %v, want one of 700ms", got)
	}
	f.clock.SetTime(t0.Add(time.Second))
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 StagedAndPerformedUpdate 1.19.0"})
	out, _ := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
	if !counts(out) {
		t.Errorf("the rollback does not count toward the limits: %+v %v", out.Spec, out.Annotations)
	}
}

// TestARollbackThatFailsBeforeItsRebootHaltsAgain: a failed rollback halts,
// whatever failed: an ErrorReset of the rollback (its prepare failed, or
// the old version is not offered) is recorded as a failure, not aborted
// with a back-off, so a resume written meanwhile does not let the rollout
// go on past it.
func TestARollbackThatFailsBeforeItsRebootHaltsAgain(t *testing.T) {
	for _, notOffered := range []bool{false, true} {
		s := mkShadow("n1", staged, errReset, running(newV), specVersion(oldV), since(time.Minute), failedAt(t0.Add(-time.Hour)), resumedAt(t0.Add(-time.Hour)),
			fromVersion(newV), rolledBack(newV), startedBy("fleet"), crashed(1, t0))
		if notOffered {
			s.Status.Conditions = []metav1.Condition{{Type: updatesv1alpha1.ConditionUpdateFailed, Status: metav1.ConditionTrue, Reason: updatesv1alpha1.ReasonVersionNotOffered,
				LastTransitionTime: metav1.Time{Time: t0}}}
		}
		f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(rollbackPolicy)}, []*v1.Node{mkNode("n1")},
			[]*updatesv1alpha1.BottlerocketShadow{s})
		if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		f.expect([]string{"update n1 Idle 1.19.0 failed=RollbackFailed:"})
		out, _ := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, "n1", metav1.GetOptions{})
		if !updatesv1alpha1.Halting(out.Annotations) || out.Annotations[updatesv1alpha1.RollbackAnnotation] != newV {
			t.Errorf("notOffered %v: annotations %v, want a new failure that halts and the rollback annotation kept", notOffered, out.Annotations)
		}
		if got := distinct(f.events()); strings.Join(got, ",") != "Warning RollbackFailed,Warning UpdateFailed" {
			t.Errorf("notOffered %v: events = %v", notOffered, got)
		}
	}
}

// TestAFailedUpdateWhoseRollbackIsStillToStartHoldsItsSlotAfterAResume: the
// rollback takes the slot its failed update had, so that slot stays taken
// from the failure until the rollback starts, and a resume written in
// between lets no other node take it (seed 8071646136539781039: two nodes
// in flight at a limit of 1). A failure that rolls nothing back frees the
// slot, so a resume lets the rollout go on.
func TestAFailedUpdateWhoseRollbackIsStillToStartHoldsItsSlotAfterAResume(t *testing.T) {
	failed := []shadowMod{running(newV), specVersion(newV), transitionAt(t0), failedAt(t0), resumedAt(t0), fromVersion(oldV),
		rolledBack(newV), startedBy("fleet")}
	later := t0.Add(time.Hour)
	startsN2 := []string{"list", "list policies", "update n2 StagedAndPerformedUpdate 1.20.0"}
	for _, tc := range []struct {
		name   string
		policy policyMod
		nodes  []string
		n1     *updatesv1alpha1.BottlerocketShadow
		now    time.Time
		want   []string
	}{
		{name: "the agent still completes the failed update: held", n1: mkShadow("n1", idle, monitor, failed...)},
		{name: "the agent still aborts: held", n1: mkShadow("n1", idle, errReset, failed...)},
		{name: "the agent reports Idle on the failed version, the rollback is due: held", n1: mkShadow("n1", idle, idle, failed...)},
		{name: "the rollback waits for the failure's second to pass: held", n1: mkShadow("n1", idle, idle, failed...), now: t0},
		{name: "the policy says Halt since the failure: the recorded rollback still starts, held", policy: func(*updatesv1alpha1.UpdatePolicy) {},
			n1: mkShadow("n1", idle, idle, failed...)},
		{name: "the host is back on the old version on its own: no rollback, free",
			n1: mkShadow("n1", idle, idle, append(failed, running(oldV))...), want: startsN2},
		{name: "no version recorded at the start: halted only, free",
			n1: mkShadow("n1", idle, monitor, running(newV), specVersion(newV), transitionAt(t0), failedAt(t0), resumedAt(t0), startedBy("fleet")), want: startsN2},
		{name: "another update's failure, the annotation of an earlier rollback: free",
			n1: mkShadow("n1", idle, monitor, append(failed, specVersion("1.21.0"), running("1.21.0"))...), want: startsN2},
		{name: "the rollback failed and was resumed: free",
			n1:   mkShadow("n1", idle, idle, append(failed, specVersion(oldV), fromVersion(newV), transitionAt(later), failedAt(later), resumedAt(later))...),
			want: startsN2},
		{name: "the node is gone: free", nodes: []string{"n2"}, n1: mkShadow("n1", idle, idle, failed...), want: startsN2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := tc.policy
			if policy == nil {
				policy = rollbackPolicy
			}
			names := tc.nodes
			if names == nil {
				names = []string{"n1", "n2"}
			}
			var nodes []*v1.Node
			for _, n := range names {
				nodes = append(nodes, mkNode(n))
			}
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(policy)}, nodes,
				[]*updatesv1alpha1.BottlerocketShadow{tc.n1, mkShadow("n2", idle, idle)})
			now := tc.now
			if now.IsZero() {
				now = t0.Add(2 * time.Hour)
			}
			f.clock.SetTime(now)
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range f.actions() {
				if !strings.HasPrefix(a, "status ") {
					got = append(got, a)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}
