package operator

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func TestSyncShadowMovesAnUpdateToItsNextStepOrFailsItAtItsDeadline(t *testing.T) {
	cases := []struct {
		name   string
		node   *v1.Node // default mkNode("n1")
		noNode bool
		shadow *updatesv1alpha1.BottlerocketShadow
		dryRun bool
		want   []string
		timer  []time.Duration // timers armed for the node
		events []string
	}{
		{name: "idle shadow: nothing", shadow: mkShadow("n1", idle, idle)},
		{name: "staged reached: reboot next", shadow: mkShadow("n1", staged, staged, since(time.Minute)),
			want: []string{"update n1 RebootedIntoUpdate 1.20.0"}, timer: []time.Duration{stagedDL - time.Minute},
			events: []string{"Normal UpdateProgressing"}},
		{name: "staged in progress: deadline armed", shadow: mkShadow("n1", staged, idle, since(time.Minute)),
			timer: []time.Duration{stagedDL - time.Minute}},
		{name: "staged one second before its deadline", shadow: mkShadow("n1", staged, idle, since(stagedDL-time.Second)),
			timer: []time.Duration{time.Second}},
		{name: "staged at its deadline fails and halts", shadow: mkShadow("n1", staged, idle, since(stagedDL)),
			want: []string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"}, events: []string{"Warning UpdateFailed"}},
		{name: "staged deadline beats the agent's late report", shadow: mkShadow("n1", staged, staged, since(stagedDL+time.Minute)),
			want: []string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"}, events: []string{"Warning UpdateFailed"}},
		{name: "rebooted into the right version: monitoring next", shadow: mkShadow("n1", rebooted, rebooted, running(newV)),
			want: []string{"update n1 MonitoringUpdate 1.20.0"}, timer: []time.Duration{rebootDL}, events: []string{"Normal UpdateProgressing"}},
		{name: "rebooted into v-prefixed same version", shadow: mkShadow("n1", rebooted, rebooted, running("v1.20.0")),
			want: []string{"update n1 MonitoringUpdate 1.20.0"}, timer: []time.Duration{rebootDL}, events: []string{"Normal UpdateProgressing"}},
		{name: "rebooted into the wrong version fails and halts", shadow: mkShadow("n1", rebooted, rebooted, running(oldV)),
			want: []string{"update n1 Idle 1.20.0 failed=WrongVersion:"}, events: []string{"Warning UpdateFailed"}},
		{name: "rebooted draining: deadline armed", shadow: mkShadow("n1", rebooted, staged, since(10*time.Minute)),
			timer: []time.Duration{rebootDL - 10*time.Minute}},
		{name: "rebooted at its deadline fails", shadow: mkShadow("n1", rebooted, staged, since(rebootDL)),
			want: []string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"}, events: []string{"Warning UpdateFailed"}},
		{name: "error reset before the reboot: idle, no halt", shadow: mkShadow("n1", staged, errReset, crashed(1, t0)),
			want: []string{"update n1 Idle 1.20.0"}, events: []string{"Warning UpdateAborted"}},
		{name: "error reset during the drain: idle, no halt", shadow: mkShadow("n1", rebooted, errReset, crashed(2, t0)),
			want: []string{"update n1 Idle 1.20.0"}, events: []string{"Warning UpdateAborted"}},
		{name: "monitoring, healthy: the soak's start recorded", node: mkNode("n1"), shadow: mkShadow("n1", monitor, monitor, running(newV)),
			want: []string{"annotate n1 healthy-since=" + t0.Format(time.RFC3339)}, timer: []time.Duration{monitorDL}},
		{name: "monitoring, healthy, soaking: soak armed", node: mkNode("n1"),
			shadow: mkShadow("n1", monitor, monitor, running(newV), annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Format(time.RFC3339))),
			timer:  []time.Duration{monitorDL, soak}},
		{name: "monitoring, agent not there yet: soak runs, no timer", node: mkNode("n1"),
			shadow: mkShadow("n1", monitor, rebooted, running(newV), annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Format(time.RFC3339))),
			timer:  []time.Duration{monitorDL}},
		{name: "monitoring, not ready: waits", node: mkNode("n1", unready(nodev1alpha1.ReasonNodeRebooted)),
			shadow: mkShadow("n1", monitor, monitor, running(newV)), timer: []time.Duration{monitorDL}},
		{name: "monitoring, True for another reason is not the gate", node: mkNode("n1", readyReason(nodev1alpha1.ReasonExtensionsFailedOpen)),
			shadow: mkShadow("n1", monitor, monitor, running(newV)), timer: []time.Duration{monitorDL}},
		{name: "monitoring, condition missing: waits", node: mkNode("n1", noCondition),
			shadow: mkShadow("n1", monitor, monitor, running(newV)), timer: []time.Duration{monitorDL}},
		{name: "monitoring, node gone: failed and halts", noNode: true, shadow: mkShadow("n1", monitor, monitor, running(newV)),
			want: []string{"update n1 Idle 1.20.0 failed=NodeDeleted:"}, events: []string{"Warning UpdateFailed"}},
		{name: "staged, node gone: nothing, no deadline", noNode: true, shadow: mkShadow("n1", staged, staged)},
		{name: "monitoring at its deadline fails", node: mkNode("n1"), shadow: mkShadow("n1", monitor, monitor, running(newV), since(monitorDL)),
			want: []string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"}, events: []string{"Warning UpdateFailed"}},
		{name: "dry run writes nothing", dryRun: true, shadow: mkShadow("n1", staged, staged),
			timer: []time.Duration{stagedDL}, events: []string{"Normal UpdateProgressing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			opts.DryRun = tc.dryRun
			nodes := []*v1.Node{mkNode("n1")}
			if tc.node != nil {
				nodes = []*v1.Node{tc.node}
			}
			if tc.noNode {
				nodes = nil
			}
			f := newFixture(t, opts, nodes, []*updatesv1alpha1.BottlerocketShadow{tc.shadow})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect(tc.want)
			if got := f.timers["n1"]; !equalDurations(got, tc.timer) {
				t.Errorf("timers = %v, want %v", got, tc.timer)
			}
			if got := distinct(f.events()); strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events = %v, want %v", got, tc.events)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHealthGateSoak walks one node through its soak: readiness lost half
// way starts the soak over; it passes only after postRebootSoak of
// continuous readiness.
func TestHealthGateSoak(t *testing.T) {
	node := mkNode("n1")
	s := mkShadow("n1", monitor, monitor, running(newV))
	f := newFixture(t, defaultOptions(), []*v1.Node{node}, []*updatesv1alpha1.BottlerocketShadow{s})
	step := func(d time.Duration, n *v1.Node, want ...string) {
		t.Helper()
		f.clock.Step(d)
		_ = f.nodes.Update(n)
		if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		written := f.client.Actions()
		f.expect(want)
		for _, a := range written { // the informer sees the operator's writes
			if u, ok := a.(clienttesting.UpdateAction); ok {
				_ = f.shadows.Update(u.GetObject())
			}
		}
	}
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	step(0, node, "annotate n1 healthy-since="+at(0))                                                         // soak starts at t0
	step(3*time.Minute, mkNode("n1", unready(nodev1alpha1.ReasonNodeRebooted)), "annotate n1 healthy-since=") // lost: starts over
	step(time.Minute, node, "annotate n1 healthy-since="+at(4*time.Minute))                                   // soak starts again at t0+4m
	step(0, node)                                                                                             // soaking
	step(soak-time.Second, node)                                                                              // one second short
	if got := f.timers["n1"]; got[len(got)-1] != time.Second {
		t.Errorf("last timer = %v, want the remaining 1s", got[len(got)-1])
	}
	step(time.Second, node, "update n1 Idle")
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal UpdateSucceeded" {
		t.Errorf("events = %v", got)
	}
}

// TestDeadlineAfterFailover: a new leader re-arms the deadline from the
// stored transition time, not from its own start.
func TestDeadlineAfterFailover(t *testing.T) {
	s := mkShadow("n1", rebooted, staged, since(25*time.Minute))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got := f.timers["n1"]; !equalDurations(got, []time.Duration{5 * time.Minute}) {
		t.Fatalf("timers = %v, want the 5m left", got)
	}
	f.clock.Step(5 * time.Minute)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle 1.20.0 failed=DeadlineExceeded:"})
	if got := testutilCounter(f.c.metrics.DeadlineExpiries.WithLabelValues(string(rebooted))); got != 1 {
		t.Errorf("deadline expiries = %v, want 1", got)
	}
}

// A write that loses to a concurrent writer (the agent, a user) is retried
// from a fresh read: the sync fails, and nothing is announced.
func TestConflictIsRetried(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, staged)})
	f.client.PrependReactor("update", "bottlerocketshadows", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "updates.nodehealth.io", Resource: "bottlerocketshadows"}, "n1", errors.New("modified"))
	})
	err := f.c.syncShadow(f.ctx, "n1")
	if !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want the conflict", err)
	}
	if got := f.events(); len(got) != 0 {
		t.Errorf("events after a failed write: %v", got)
	}
}

func rebootRequested(s *updatesv1alpha1.BottlerocketShadow) {
	s.Status.RebootFromBootID = "boot-0"
	s.Status.RebootRequestedAt = &metav1.Time{Time: t0.Add(-time.Minute)}
}

// TestANodeDeletedAfterItsRebootWasRequestedHaltsTheRollout: a release that
// boots but never becomes healthy leaves an empty NotReady node, exactly what
// cluster-autoscaler, Karpenter or node repair delete. Past the drain that
// deletion is the update's failure, and it halts the rollout; otherwise a bad
// release walks the fleet one deleted node at a time.
func TestANodeDeletedAfterItsRebootWasRequestedHaltsTheRollout(t *testing.T) {
	recreated := mkNode("n1")
	recreated.UID = "uid-of-a-new-node"
	for _, tc := range []struct {
		name   string
		node   *v1.Node
		shadow *updatesv1alpha1.BottlerocketShadow
	}{
		{"deleted after the reboot was requested", nil, mkShadow("n1", rebooted, staged, rebootRequested, since(time.Minute))},
		{"deleted after the reboot, before the agent reported", nil, mkShadow("n1", rebooted, rebooted, rebootRequested, running(newV))},
		{"deleted in MonitoringUpdate", nil, mkShadow("n1", monitor, monitor, rebootRequested, running(newV))},
		{"deleted and re-created with the same name", recreated, mkShadow("n1", monitor, monitor, rebootRequested, running(newV))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*v1.Node
			if tc.node != nil {
				nodes = append(nodes, tc.node)
			}
			f := newFixture(t, defaultOptions(), nodes, []*updatesv1alpha1.BottlerocketShadow{tc.shadow})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{"update n1 Idle 1.20.0 failed=NodeDeleted:"})
			if got := distinct(f.events()); strings.Join(got, ",") != "Warning UpdateFailed" {
				t.Errorf("events = %v, want Warning UpdateFailed", got)
			}
		})
	}
}

// TestANodeDeletedBeforeItsRebootWasRequestedFreesItsSlot: a node deleted
// while it still served, or drained but never rebooted, was scaled down, not
// broken by the release: no failure, and the next node may start at once
// (the shadow controller deletes the shadow).
func TestANodeDeletedBeforeItsRebootWasRequestedFreesItsSlot(t *testing.T) {
	gone := mkShadow("a", rebooted, staged, since(time.Minute))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{gone, mkShadow("b", idle, idle)})
	if err := f.c.syncShadow(f.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	if got := f.timers["a"]; len(got) != 0 {
		t.Errorf("timers = %v: a deadline for a node that no longer exists could fail it", got)
	}
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet", "list", "list policies", "update b StagedAndPerformedUpdate 1.20.0"})
}

// TestANodeThatNeverReturnsToIdleIsFailedAfterTheReturnToIdleDeadline: spec
// is Idle but the agent still reports an update state — it can neither
// complete nor abort (crash-looping, its update repository unreachable). It
// holds a slot, so past ReturnToIdle it is marked failed and halts the
// rollout, naming it, instead of silently freezing every other node.
func TestANodeThatNeverReturnsToIdleIsFailedAfterTheReturnToIdleDeadline(t *testing.T) {
	for _, status := range []updatesv1alpha1.ShadowState{monitor, errReset, staged} {
		t.Run(string(status), func(t *testing.T) {
			s := mkShadow("n1", idle, status, since(returnDL-time.Minute), crashed(1, t0.Add(-time.Hour)))
			f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{s})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect(nil)
			if got := f.timers["n1"]; !equalDurations(got, []time.Duration{time.Minute}) {
				t.Errorf("timers = %v, want the minute left of ReturnToIdle", got)
			}
			f.clock.Step(time.Minute)
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{"update n1 Idle  failed=DeadlineExceeded:"})
			if got := distinct(f.events()); strings.Join(got, ",") != "Warning UpdateFailed" {
				t.Errorf("events = %v", got)
			}
			if got := testutilCounter(f.c.metrics.DeadlineExpiries.WithLabelValues("ReturnToIdle")); got != 1 {
				t.Errorf("deadline expiries{ReturnToIdle} = %v, want 1", got)
			}
		})
	}
}

// TestARestartLateInMonitoringUpdateContinuesTheSoak: the deadline is
// measured from the stored transition time, so a soak kept only in memory
// would start over after a restart or failover and could outlast the
// deadline, failing a healthy node. Its start is kept in the shadow.
func TestARestartLateInMonitoringUpdateContinuesTheSoak(t *testing.T) {
	s := mkShadow("n1", monitor, monitor, running(newV), since(monitorDL-2*time.Minute),
		annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-soak+time.Minute).Format(time.RFC3339)))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	if got := f.timers["n1"]; !equalDurations(got, []time.Duration{2 * time.Minute, time.Minute}) {
		t.Fatalf("timers = %v, want the deadline's 2m and the soak's remaining minute", got)
	}
	f.clock.Step(time.Minute)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle"})
}

// An operator that was down (or failing over) when a node's soak ended and
// still when its MonitoringUpdate deadline passed finds an update that passed
// its health gate in time: a node ready now passes, as it would have at the
// soak's end, instead of being failed (and, with Rollback, rolled back) for
// the operator's own absence. One not ready now, or whose soak would have
// ended only at the deadline, fails as before.
func TestAnOperatorBackAfterTheDeadlinePassesANodeWhoseSoakEndedInTime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		soakFrom time.Duration // healthy-since, before t0
		node     *v1.Node
		want     string
	}{
		{"soak ended before the deadline, ready now", monitorDL, mkNode("n1"), "update n1 Idle"},
		{"soak ended before the deadline, not ready now", monitorDL, mkNode("n1", unready(nodev1alpha1.ReasonNodeRebooted)), "update n1 Idle 1.20.0 failed=DeadlineExceeded:"},
		{"soak would have ended at the deadline", soak + time.Minute, mkNode("n1"), "update n1 Idle 1.20.0 failed=DeadlineExceeded:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline passed a minute ago.
			s := mkShadow("n1", monitor, monitor, running(newV), since(monitorDL+time.Minute),
				annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-tc.soakFrom).Format(time.RFC3339)))
			f := newFixture(t, defaultOptions(), []*v1.Node{tc.node}, []*updatesv1alpha1.BottlerocketShadow{s})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{tc.want})
		})
	}
}

// TestTheSoakStartIsRecordedInTheShadowAndClearedWhenReadinessLapses walks
// the annotation through one soak.
func TestTheSoakStartIsRecordedInTheShadowAndClearedWhenReadinessLapses(t *testing.T) {
	s := mkShadow("n1", monitor, monitor, running(newV))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"annotate n1 healthy-since=" + t0.Format(time.RFC3339)})
	annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Format(time.RFC3339))(s)
	_ = f.shadows.Update(s)
	_ = f.nodes.Update(mkNode("n1", unready(nodev1alpha1.ReasonNodeRebooted)))
	f.clock.Step(time.Minute)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"annotate n1 healthy-since="})
}

// TestTheHealthGateAlsoRequiresTheNodesReadyAndAcceptsNoRequiredExtensions:
// SystemExtensionsReady says nothing about the kubelet, and a node that
// lists no gating extension is ready with reason NoRequiredExtensions.
func TestTheHealthGateAlsoRequiresTheNodesReadyAndAcceptsNoRequiredExtensions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  *v1.Node
		soaks bool
	}{
		{"extensions ready, kubelet not ready", mkNode("n1", kubeletNotReady), false},
		{"no required extensions, kubelet ready", mkNode("n1", readyReason(nodev1alpha1.ReasonNoRequiredExtensions)), true},
		{"extensions failed open", mkNode("n1", readyReason(nodev1alpha1.ReasonExtensionsFailedOpen)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkShadow("n1", monitor, monitor, running(newV), annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-soak).Format(time.RFC3339)))
			f := newFixture(t, defaultOptions(), []*v1.Node{tc.node}, []*updatesv1alpha1.BottlerocketShadow{s})
			if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			want := []string{"annotate n1 healthy-since="}
			if tc.soaks {
				want = []string{"update n1 Idle"}
			}
			f.expect(want)
		})
	}
}

// TestASoakStartWhoseWriteFailedIsWrittenAgain: found by the simulation. The
// write of healthy-since can fail (a conflict: the agent reported
// MonitoringUpdate meanwhile); the retry must write it again. Remembering the
// soak's start in memory before the write succeeded kept it there for good,
// so a failover later in MonitoringUpdate started the soak over, past the
// deadline for a node that was healthy all along.
func TestASoakStartWhoseWriteFailedIsWrittenAgain(t *testing.T) {
	s := mkShadow("n1", monitor, rebooted, running(newV))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{s})
	conflicts := 1
	f.client.PrependReactor("update", "bottlerocketshadows", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "updates.nodehealth.io", Resource: "bottlerocketshadows"}, "n1", errors.New("modified"))
	})
	if err := f.c.syncShadow(f.ctx, "n1"); !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want the conflict", err)
	}
	f.client.ClearActions()
	f.clock.Step(time.Second)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"annotate n1 healthy-since=" + t0.Add(time.Second).Format(time.RFC3339)})
}
