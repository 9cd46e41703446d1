package updater_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// administrator is a Kubernetes client acting as a person, not as any
// nodehealth component.
func administrator(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Env(t).Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice@example.com", Groups: []string{"system:masters"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drainByHand cordons the node and writes DrainInProgress as an
// administrator's drain tool would (status "True", reason AdminRequested), or
// clears both.
func drainByHand(t *testing.T, ctx context.Context, node string, on bool) {
	t.Helper()
	c := administrator(t)
	status := "False"
	if on {
		status = "True"
	}
	cond, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": nodev1alpha1.LifecycleConditionDrainInProgress, "status": status, "reason": "AdminRequested",
		"message": "kubectl drain by alice", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}})
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, cond, metav1.PatchOptions{FieldManager: "alice-drain"}, "status"); err != nil {
		t.Fatal(err)
	}
	cordon, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, cordon, metav1.PatchOptions{FieldManager: "alice-drain"}); err != nil {
		t.Fatal(err)
	}
}

// A node an administrator drains by hand takes a slot of the policy that
// selects it: with maxConcurrentUpdates 1 no update starts while the drain
// is on, the policy's status names the node under others and the waiting
// node is told why; once the drain is cleared, the rollout goes on.
func TestANodeDrainedByHandTakesTheOnlySlotUntilItIsCleared(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"budget-a", "budget-b"}
	h := watchHistory(t, ctx, nodes...)
	createNodes(t, nodes...)
	startAgent(t, ctx, nodes...)
	drainByHand(t, ctx, "budget-a", true)
	pol := createPolicy(t)
	op := startOperator(t, baseOptions(t))

	waitPolicy(t, ctx, pol.Name, "counted budget-a under others", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return p.Status.Others == 1 && len(p.Status.OtherNodes) == 1 && p.Status.OtherNodes[0].Name == "budget-a" &&
			strings.Contains(p.Status.OtherNodes[0].Reason, "DrainInProgress=True, reason AdminRequested")
	})
	// The pass that wrote the status decided on the same snapshot: nothing
	// started, and the waiting node is told which node holds the slot.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, e := range op.events() {
			if strings.Contains(e, "UpdateWaiting") && strings.Contains(e, "such as budget-a") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no UpdateWaiting Event naming budget-a: %q", op.events())
	}
	if _, starts := h.snapshot(); starts["budget-a"]+starts["budget-b"] != 0 {
		t.Fatalf("starts %v while budget-a was drained by hand and the limit is 1", starts)
	}

	drainByHand(t, ctx, "budget-a", false)
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated once the drain was cleared", updated)
	}
	waitPolicy(t, ctx, pol.Name, "counted no others", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return p.Status.Others == 0 && len(p.Status.OtherNodes) == 0
	})
	if most, _ := h.snapshot(); most > 1 {
		t.Errorf("%d nodes updating at once, limit 1", most)
	}
}
