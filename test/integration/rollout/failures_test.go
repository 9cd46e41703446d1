package rollout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The failure paths of issue 21, end to end: each test runs the real
// operator, controller and agents on simulated nodes and breaks one thing.

func failedWith(reason string) func(*updatesv1alpha1.BottlerocketShadow) bool {
	return func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle && strings.HasPrefix(s.Annotations[updatesv1alpha1.FailureReasonAnnotation], reason)
	}
}

// resume copies the shadow's failed value into its resume annotation, as
// `kubectl nodehealth update resume` does.
func resume(t *testing.T, name string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	s, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"annotations":{"` + updatesv1alpha1.ResumeAnnotation + `":"` + s.Annotations[updatesv1alpha1.FailedAnnotation] + `"}}}`
	if _, err := c.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestANodeDeletedDuringItsUpdateHaltsTheRollout: a release that boots but
// never becomes healthy leaves a NotReady node, exactly what autoscalers and
// node repair delete. The deletion is the update's failure (NodeDeleted): the
// rollout halts, the orphaned shadow stays as the halt's record, and only a
// resume lets the next node start.
func TestANodeDeletedDuringItsUpdateHaltsTheRollout(t *testing.T) {
	install(t)
	startController(t)
	names := nodeNames("gone", 2)
	bad, next := names[0], names[1]
	nodes := startNodes(t, nil, names...)
	operator := startOperator(t, 1)
	waitShadows(t, "every agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, names...)
	shadowLog := watchShadows(t)

	offer(t, nodes, bad)
	waitShadows(t, bad+" asked to reboot", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate
	}, bad)
	breakExtension(t, bad) // the new release never becomes healthy
	waitShadows(t, bad+" in MonitoringUpdate, never healthy", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateMonitoringUpdate
	}, bad)
	offer(t, nodes, next)

	if err := testenv.Env(t).DeleteNode(testenv.Context(t), bad); err != nil { // an autoscaler
		t.Fatal(err)
	}
	waitShadows(t, bad+" marked failed: NodeDeleted", failedWith("NodeDeleted"), bad)

	// Event-driven: had the halt not held, the next node would have left
	// Idle within a second. Give it ample time to do the wrong thing.
	time.Sleep(10 * time.Second)
	if _, _, started, err := shadowLog.result(); err != nil || started[next] {
		t.Fatalf("%s started while the rollout was halted by the deleted node (watch error %v)", next, err)
	}
	if v := testenv.Metric(t, operator.MetricsURL(), "update_operator_rollout_halted", map[string]string{"reason": "UpdateFailed"}); v != 1 {
		t.Errorf("update_operator_rollout_halted{UpdateFailed} = %v, want 1", v)
	}
	if _, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(testenv.Context(t), bad, metav1.GetOptions{}); err != nil {
		t.Fatalf("the deleted node's shadow, the halt's record, is gone before any resume: %v", err)
	}

	// The resume lets the orphan go, and the rollout goes on.
	resume(t, bad)
	err := wait.PollUntilContextTimeout(testenv.Context(t), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, bad, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the orphaned shadow of %s was not deleted after the resume: %v", bad, err)
	}
	waitShadows(t, next+" updated after the resume", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == newVersion
	}, next)
}

// TestAnUpdateCalledOffWhileStagingLeavesNothingArmed: the operator's
// staging deadline is shorter than the host's prepare. The node is marked
// failed while the agent still waits on Bottlerocket; once prepare returns,
// nothing may stay activated (the next unplanned reboot would boot it with
// no drain and no health gate) and the version lock must be the user's again.
func TestAnUpdateCalledOffWhileStagingLeavesNothingArmed(t *testing.T) {
	install(t)
	startController(t)
	const node = "slow-1"
	nodes := startNodesWith(t, nil, map[string]emulator.Delays{node: {Prepare: 15 * time.Second}}, node)
	operator := startOperatorWithStagingDeadline(t, 1, 5*time.Second)
	waitShadows(t, "the agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, node)

	offer(t, nodes, node)
	waitShadows(t, node+" marked failed by its staging deadline", failedWith("DeadlineExceeded"), node)
	if v := testenv.Metric(t, operator.MetricsURL(), "update_operator_rollout_halted", map[string]string{"reason": "UpdateFailed"}); v != 1 {
		t.Errorf("update_operator_rollout_halted{UpdateFailed} = %v, want 1", v)
	}

	em := nodes[node].Emulator
	var last emulator.State
	err := wait.PollUntilContextTimeout(testenv.Context(t), 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last = em.State() // what GET /emulator/state answers
		s, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		staged := last.Status != nil && last.Status.StagedVersion() == newVersion
		return staged && last.InFlight == nil && s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.PreviousVersionLock == "", nil
	})
	if err != nil {
		t.Fatalf("the prepare never finished and the agent never reported its abort: %v (emulator %+v)", err, last)
	}
	if v := last.Status.ActivatedVersion(); v != "" {
		t.Errorf("update %s is activated on a node whose update was called off", v)
	}
	if last.VersionLock != "latest" {
		t.Errorf("version lock = %q after the abort, want the user's latest", last.VersionLock)
	}
	if last.RebootRequests != 0 {
		t.Errorf("%d reboot requests for an update called off before its reboot", last.RebootRequests)
	}
}

// TestAFailedRefreshAfterAGoodUpdateStillFreesTheSlot: a node that cannot
// reach its update repository after a good update still reports Idle on the
// new version, so its slot frees and the next node updates — instead of the
// whole rollout freezing behind it.
func TestAFailedRefreshAfterAGoodUpdateStillFreesTheSlot(t *testing.T) {
	install(t)
	startController(t)
	names := nodeNames("repo", 2)
	first := names[0]
	nodes := startNodes(t, nil, names...)
	startOperator(t, 1)
	waitShadows(t, "every agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, names...)

	offer(t, nodes, first)
	waitShadows(t, first+" rebooted into the update", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		st := s.Status.CurrentState
		return st == updatesv1alpha1.StateRebootedIntoUpdate || st == updatesv1alpha1.StateMonitoringUpdate
	}, first)
	nodes[first].Emulator.UpdateFaults(func(f *emulator.Faults) { f.RefreshFails = true })
	offer(t, nodes, names[1:]...)

	waitShadows(t, "both nodes updated and Idle", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == newVersion
	}, names...)
	s, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(testenv.Context(t), first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, failed := s.Annotations[updatesv1alpha1.FailedAnnotation]; failed {
		t.Errorf("%s marked failed: %s", first, s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	}
}
