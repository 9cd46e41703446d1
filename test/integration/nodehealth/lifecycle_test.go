package nodehealth_test

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// lifecycleIs holds when the node's lifecycle condition kind has status and
// reason (status "" : the node has no such condition).
func lifecycleIs(kind string, status v1.ConditionStatus, reason string) func(*v1.Node) bool {
	return func(n *v1.Node) bool {
		c := nodeutil.Condition(n, v1.NodeConditionType(kind))
		if status == "" {
			return c == nil
		}
		return c != nil && c.Status == status && c.Reason == reason
	}
}

func allOf(conds ...func(*v1.Node) bool) func(*v1.Node) bool {
	return func(n *v1.Node) bool {
		for _, c := range conds {
			if !c(n) {
				return false
			}
		}
		return true
	}
}

// The escalation of a node whose extension failed says so in KEP-5683
// lifecycle conditions on the real API server: DrainInProgress while a
// budget holds its pod, Drained once it is evicted, both False once the
// extension is back; an admin's DrainInProgress on another node is left
// exactly as it was.
func TestTheEscalationPublishesLifecycleConditionsAndLeavesAnAdminsAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "lifecycle")
	opts := h.options(h.rule("agent", nil))
	// Force: the pod declares no controller.
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 2 * time.Second, NodesPerSecond: 10, Force: true}
	opts.LifecycleConditionMaxAge = time.Hour
	h.startController(t, opts)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "lifecycle")
	node := h.createNode(t, "lifecycle-n1")
	admins := h.createNode(t, "lifecycle-n2")
	r := h.startRenewer(t, "agent", node)
	r2 := h.startRenewer(t, "agent", admins)
	h.nodes.wait(t, node, "ready", readyNode)
	h.nodes.wait(t, admins, "ready", readyNode)

	// An admin drains the second node by hand.
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"AdminRequested","message":"kubectl drain by an admin","lastTransitionTime":%q}]}}`,
		nodev1alpha1.LifecycleConditionDrainInProgress, time.Now().UTC().Format(time.RFC3339))
	if _, err := h.env.Client.CoreV1().Nodes().PatchStatus(ctx, admins, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	before := nodeutil.Condition(h.nodes.wait(t, admins, "the admin's condition",
		lifecycleIs(nodev1alpha1.LifecycleConditionDrainInProgress, v1.ConditionTrue, "AdminRequested")),
		nodev1alpha1.LifecycleConditionDrainInProgress).DeepCopy()

	guarded := map[string]string{"app": "guarded"}
	h.createRunningPod(t, ns, newPod("web", node, guarded))
	// Never observed by a disruption controller: the budget refuses every
	// eviction until it is deleted.
	if _, err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: guarded},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r.stop()
	r2.stop()
	h.nodes.wait(t, node, "DrainInProgress=True (ours) while the budget holds the pod", allOf(gated,
		lifecycleIs(nodev1alpha1.LifecycleConditionDrainInProgress, v1.ConditionTrue, nodev1alpha1.LifecycleReasonExtensionFailed),
		lifecycleIs(nodev1alpha1.LifecycleConditionDrained, "", "")))
	h.nodes.wait(t, admins, "gated as leaving", allOf(gated, func(n *v1.Node) bool {
		c := nodeutil.Condition(n, nodev1alpha1.SystemExtensionsReadyCondition)
		return c != nil && c.Reason == nodev1alpha1.ReasonNodeLeaving
	}))

	if err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.nodes.wait(t, node, "Drained=True and DrainInProgress=False (ours) once the pod is evicted", allOf(
		lifecycleIs(nodev1alpha1.LifecycleConditionDrainInProgress, v1.ConditionFalse, nodev1alpha1.LifecycleReasonExtensionFailed),
		lifecycleIs(nodev1alpha1.LifecycleConditionDrained, v1.ConditionTrue, nodev1alpha1.LifecycleReasonExtensionFailed)))

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "both False (ours) once the extension is back", allOf(ungated,
		lifecycleIs(nodev1alpha1.LifecycleConditionDrainInProgress, v1.ConditionFalse, nodev1alpha1.LifecycleReasonExtensionFailed),
		lifecycleIs(nodev1alpha1.LifecycleConditionDrained, v1.ConditionFalse, nodev1alpha1.LifecycleReasonExtensionFailed)))

	n, err := h.env.Client.CoreV1().Nodes().Get(ctx, admins, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := nodeutil.Condition(n, nodev1alpha1.LifecycleConditionDrainInProgress)
	if after == nil || after.Status != before.Status || after.Reason != before.Reason || after.Message != before.Message ||
		!after.LastTransitionTime.Equal(&before.LastTransitionTime) || !after.LastHeartbeatTime.Equal(&before.LastHeartbeatTime) {
		t.Errorf("the admin's DrainInProgress changed: %+v, was %+v", after, before)
	}
	if c := nodeutil.Condition(n, nodev1alpha1.LifecycleConditionDrained); c != nil {
		t.Errorf("the leaving node got %+v", c)
	}
}
