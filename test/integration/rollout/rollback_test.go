package rollout_test

import (
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// TestARollbackAfterAFailedHealthGateEndsIdleOnTheOldVersionWithTheRolloutHalted:
// with onHealthGateFailure: Rollback, a node whose extension fails after
// the reboot into the new version fails its health gate (the rollout
// halts), and the operator, agent and emulated host take it back to the
// version it ran: the agent locks the older version, the host boots it (two
// reboots in all, never a second one into the failed version), the node
// passes its health gate on it and ends Idle there, while the failure still
// halts the rollout and no other node starts.
func TestARollbackAfterAFailedHealthGateEndsIdleOnTheOldVersionWithTheRolloutHalted(t *testing.T) {
	install(t)
	startController(t)
	names := nodeNames("rollback", 2)
	bad, next := names[0], names[1]
	nodes := startNodes(t, nil, names...)
	// The failed version's health gate fails at its deadline: short, yet
	// long enough for the rolled-back version's soak to pass within it.
	startOperatorWithDeadlines(t, 1, 60*time.Second, 10*time.Second)
	ctx := testenv.Context(t)
	policies := shadowClient(t).UpdatesV1alpha1().UpdatePolicies()
	if _, err := policies.Patch(ctx, "rollout", types.MergePatchType, []byte(`{"spec":{"onHealthGateFailure":"Rollback"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitShadows(t, "every agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, names...)
	shadowLog := watchShadows(t)

	offer(t, nodes, bad)
	waitShadows(t, bad+" asked to reboot", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate && s.Spec.Version == newVersion
	}, bad)
	breakExtension(t, bad) // the new release never becomes healthy
	offer(t, nodes, next)

	waitShadows(t, bad+" failed its health gate and is rolled back", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Annotations[updatesv1alpha1.RollbackAnnotation] == newVersion && s.Spec.Version == oldVersion && s.Spec.State != updatesv1alpha1.StateIdle
	}, bad)
	// The rollback takes the slot: its spec transition is after the failure
	// (whole seconds), or the attempt would still be marked failed and count
	// toward no limit (docs/updater.md's counting table).
	rb, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failedAt, err := time.Parse(time.RFC3339, rb.Annotations[updatesv1alpha1.FailedAnnotation])
	if err != nil || rb.Spec.StateTransitionTimestamp == nil || !failedAt.Before(rb.Spec.StateTransitionTimestamp.Time) {
		t.Errorf("the rollback's transition %v is not after the failure %q: it does not count as in flight", rb.Spec.StateTransitionTimestamp, rb.Annotations[updatesv1alpha1.FailedAnnotation])
	}
	// The old version's extension is healthy again.
	p, _ := probes.Load(bad)
	if err := os.WriteFile(p.(string), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitShadows(t, bad+" Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, bad)

	s, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s failed: %s", bad, s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	if !updatesv1alpha1.Halting(s.Annotations) || s.Annotations[updatesv1alpha1.RollbackAnnotation] != newVersion {
		t.Errorf("annotations %v: want the failure kept and the rollback naming %s", s.Annotations, newVersion)
	}
	if st := nodes[bad].Emulator.State(); st.Running != oldVersion || st.Reboots != 2 || st.RebootRequests != 2 || st.VersionLock != "latest" {
		t.Errorf("bad node: running %s after %d reboots (%d requested), lock %q; want %s after 2, latest", st.Running, st.Reboots, st.RebootRequests, st.VersionLock, oldVersion)
	}
	pol, err := policies.Get(ctx, "rollout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(pol.Status.Conditions, updatesv1alpha1.PolicyHalted); c == nil || c.Status != metav1.ConditionTrue || len(pol.Status.HaltedBy) != 1 || pol.Status.HaltedBy[0] != bad {
		t.Errorf("policy status %+v: want Halted True by %s", pol.Status, bad)
	}

	// Event-driven: had the halt not held, the next node would have left
	// Idle within a second, and the bad one would have been started again.
	time.Sleep(3 * time.Second)
	_, _, started, err := shadowLog.result()
	if err != nil {
		t.Error(err)
	}
	if started[next] {
		t.Errorf("%s started while the rollout was halted", next)
	}
	if st := nodes[bad].Emulator.State(); st.Reboots != 2 {
		t.Errorf("bad node rebooted %d times, want 2", st.Reboots)
	}
}
