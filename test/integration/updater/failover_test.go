package updater_test

import (
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Two real update-operator processes behind leader election: the leader is
// SIGKILLed mid-rollout (no release), the other takes over from the shadows
// once the Lease expires, no node is started twice, and the limit holds over
// the whole run.
func TestANewLeaderTakesOverMidRolloutAndStartsNoNodeTwice(t *testing.T) {
	env := testenv.Env(t)
	ctx := ctxFor(t, 4*time.Minute)
	nodes := []string{"failover-1", "failover-2", "failover-3", "failover-4"}
	h := watchHistory(t, ctx, nodes...)
	createNodes(t, nodes...)
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["failover-1"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()

	createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromInt32(2) })
	const leaseName = "update-operator-failover-test"
	first, firstLeader := startOperatorReplicas(t, ctx, leaseName, "update-operator-failover-a", "update-operator-failover-b")
	// failover-1 hangs in its drain; kill the leader while it does.
	waitShadow(t, ctx, "failover-1", "draining", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate
	})
	if err := syscall.Kill(first.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if _, err := env.WaitForLease(ctx, "default", leaseName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != firstLeader
	}); err != nil {
		t.Fatalf("the second replica did not take over: %v", err)
	}
	a.mu.Lock()
	delete(a.stuckIn, "failover-1")
	a.mu.Unlock()
	resumeAgent(t, ctx, "failover-1")
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated after the failover", updated)
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
