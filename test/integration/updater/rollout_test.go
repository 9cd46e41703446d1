package updater_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func ctxFor(t *testing.T, d time.Duration) context.Context { return testenv.ContextWithTimeout(t, d) }

// A 5-node rollout with maxConcurrentUpdates 2: every node ends on the new
// version, each started exactly once, and a watch over the whole run never
// saw more than 2 nodes counting as updating.
func TestRolloutHoldsTheLimit(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"limit-1", "limit-2", "limit-3", "limit-4", "limit-5"}
	h := watchHistory(t, ctx, nodes...)
	createNodes(t, nodes...)
	startAgent(t, ctx, nodes...)
	createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromInt32(2) })
	startOperator(t, baseOptions(t))
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated", updated)
	}
	most, starts := h.snapshot()
	if most > 2 {
		t.Errorf("%d nodes counted as updating at once, limit 2", most)
	}
	if most < 2 {
		t.Errorf("never more than %d node updating: the limit of 2 was not used", most)
	}
	for _, n := range nodes {
		if starts[n] != 1 {
			t.Errorf("%s started %d times, want 1", n, starts[n])
		}
	}
}

// A node whose extensions never all come back after its reboot fails its
// MonitoringUpdate deadline and halts the rollout — also across an operator
// restart — until it is resumed.
func TestHealthGateHaltsUntilResume(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"gate-a", "gate-b", "gate-c"}
	h := watchHistory(t, ctx, nodes...)
	// Only gate-b may start at first; the others become eligible once it
	// failed, and must then wait for the resume.
	createNodesReady(t, false, "gate-a", "gate-c")
	createNodes(t, "gate-b")
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.unhealthy["gate-b"] = true
	a.mu.Unlock()
	pol := createPolicy(t)
	opts := baseOptions(t)
	opts.Deadlines.MonitoringUpdate = 5 * time.Second
	op := startOperator(t, opts)

	s := waitShadow(t, ctx, "gate-b", "failed", failed)
	if r := s.Annotations[updatesv1alpha1.FailureReasonAnnotation]; !strings.Contains(r, "DeadlineExceeded") || !strings.Contains(r, "MonitoringUpdate") {
		t.Errorf("failure reason %q", r)
	}
	// kubectl describe upol explains the halt and names the node.
	waitPolicy(t, ctx, pol.Name, "halted by gate-b", func(p *updatesv1alpha1.UpdatePolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyHalted)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "UpdateFailed" && strings.Contains(c.Message, "gate-b (DeadlineExceeded") &&
			len(p.Status.HaltedBy) == 1 && p.Status.HaltedBy[0] == "gate-b" && p.Status.Failed == 1
	})
	setReady(t, ctx, "gate-a", true)
	setReady(t, ctx, "gate-c", true)
	never(t, ctx, 4*time.Second, "halted rollout", "gate-a", "gate-c")

	// The halt is recorded in the shadow, not in the operator's memory.
	op.stop()
	startOperator(t, opts)
	never(t, ctx, 4*time.Second, "halted rollout after a restart", "gate-a", "gate-c")

	resume(t, ctx, "gate-b")
	waitShadow(t, ctx, "gate-a", "updated after resume", updated)
	waitShadow(t, ctx, "gate-c", "updated after resume", updated)
	if _, starts := h.snapshot(); starts["gate-b"] != 1 {
		t.Errorf("gate-b started %d times, want 1 (a failed node is not retried by itself)", starts["gate-b"])
	}
}

// A node whose agent hangs in its drain fails the RebootedIntoUpdate
// deadline; it no longer counts, so after a resume the next node takes its
// slot although the hung agent still reports an update state.
func TestStuckNodeFailsAndFreesItsSlot(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"stuck-a", "stuck-b"}
	createNodes(t, "stuck-a")
	createNodesReady(t, false, "stuck-b")
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["stuck-a"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	createPolicy(t)
	opts := baseOptions(t)
	opts.Deadlines.RebootedIntoUpdate = 4 * time.Second
	startOperator(t, opts)

	s := waitShadow(t, ctx, "stuck-a", "failed", failed)
	if r := s.Annotations[updatesv1alpha1.FailureReasonAnnotation]; !strings.Contains(r, "RebootedIntoUpdate") {
		t.Errorf("failure reason %q", r)
	}
	if s.Status.CurrentState != updatesv1alpha1.StateStagedAndPerformedUpdate {
		t.Fatalf("the hung agent reports %q", s.Status.CurrentState)
	}
	setReady(t, ctx, "stuck-b", true)
	never(t, ctx, 3*time.Second, "halted rollout", "stuck-b")
	resume(t, ctx, "stuck-a")
	waitShadow(t, ctx, "stuck-b", "updated in the freed slot", updated)
}

// The operator killed mid-rollout: a new one resumes from the shadows, no
// node is updated twice and the limit holds across the restart.
func TestRestartMidRollout(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"restart-1", "restart-2", "restart-3", "restart-4"}
	h := watchHistory(t, ctx, nodes...)
	createNodes(t, nodes...)
	a := startAgent(t, ctx, nodes...)
	// Hold the first node in its drain until the operator was replaced.
	a.mu.Lock()
	a.stuckIn["restart-1"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromInt32(2) })
	opts := baseOptions(t)
	op := startOperator(t, opts)
	waitShadow(t, ctx, "restart-1", "draining", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate
	})
	op.stop()
	startOperator(t, opts)
	a.mu.Lock()
	delete(a.stuckIn, "restart-1")
	a.mu.Unlock()
	// Nudge the agent: it acts on shadow events.
	resumeAgent(t, ctx, "restart-1")
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated", updated)
	}
	most, starts := h.snapshot()
	if most > 2 {
		t.Errorf("%d nodes counted as updating at once, limit 2", most)
	}
	for _, n := range nodes {
		if starts[n] != 1 {
			t.Errorf("%s started %d times, want 1", n, starts[n])
		}
	}
}

// resumeAgent touches a shadow's metadata so the test agent sees an event.
func resumeAgent(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	patch := `{"metadata":{"labels":{"updater-it/nudge":"` + time.Now().Format("150405.000") + `"}}}`
	if _, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Pausing lets the nodes in flight finish and starts no other. The pause is
// an edit of the UpdatePolicy: the running operator takes it, no restart.
func TestPauseLetsInFlightFinish(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"pause-a", "pause-b", "pause-c"}
	createNodes(t, "pause-a")
	createNodesReady(t, false, "pause-b", "pause-c")
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["pause-a"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	pol := createPolicy(t)
	startOperator(t, baseOptions(t))
	waitShadow(t, ctx, "pause-a", "in flight", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate
	})
	paused := editPolicy(t, ctx, pol.Name, func(s *updatesv1alpha1.UpdatePolicySpec) { s.Paused = true })
	waitPolicy(t, ctx, pol.Name, "observed the pause", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return p.Status.ObservedGeneration == paused.Generation
	})
	a.mu.Lock()
	delete(a.stuckIn, "pause-a")
	a.mu.Unlock()
	setReady(t, ctx, "pause-b", true)
	setReady(t, ctx, "pause-c", true)
	resumeAgent(t, ctx, "pause-a")
	waitShadow(t, ctx, "pause-a", "finished while paused", updated)
	never(t, ctx, 4*time.Second, "paused rollout", "pause-b", "pause-c")
}
