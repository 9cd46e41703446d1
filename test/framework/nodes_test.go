package framework

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func nodeWith(taints []corev1.Taint, status corev1.ConditionStatus, message string) *corev1.Node {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: taints}}
	if status != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: status, Reason: "R", Message: message}}
	}
	return n
}

func TestNodePredicatesReadTheReadinessTaintAndCondition(t *testing.T) {
	noSchedule := corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule}
	noExecute := corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}

	gated := nodeWith([]corev1.Taint{noSchedule, noExecute, other}, corev1.ConditionFalse, "kube-proxy (LeaseExpired)")
	if !NodeGated(gated) || NodeServing(gated) {
		t.Error("a tainted node with the condition False is gated, not serving")
	}
	if got := ReadinessTaints(gated, ""); got != 2 {
		t.Errorf("ReadinessTaints(any effect) = %d, want 2", got)
	}
	if got := ReadinessTaints(gated, corev1.TaintEffectNoExecute); got != 1 {
		t.Errorf("ReadinessTaints(NoExecute) = %d, want 1", got)
	}
	if !ExtensionsConditionIs(corev1.ConditionFalse, "", "kube-proxy", "!cni")(gated) {
		t.Error("the condition names kube-proxy and not cni")
	}
	if ExtensionsConditionIs(corev1.ConditionFalse, "R", "!kube-proxy")(gated) {
		t.Error(`"!kube-proxy" matched a message naming kube-proxy`)
	}

	serving := nodeWith([]corev1.Taint{other}, corev1.ConditionTrue, "")
	if NodeGated(serving) || !NodeServing(serving) {
		t.Error("an untainted node with the condition True is serving, not gated")
	}
	if fresh := nodeWith(nil, "", ""); NodeServing(fresh) || ExtensionsCondition(fresh) != nil || ExtensionsReady(fresh) != "" {
		t.Error("a node the controller never wrote is neither serving nor has a condition")
	}
	if !AllOf()(serving) || AllOf(NodeServing, NodeGated)(serving) {
		t.Error("AllOf is the conjunction of its conditions")
	}
}
