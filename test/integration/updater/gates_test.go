package updater_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// A policy's spec.gates.blockingPods on the real API server
// (docs/updater.md, "Blocking pods"): a pod anywhere that the anywhere
// selector matches holds every start and the Blocked condition names it;
// once it is deleted the rollout goes on by itself, except on the node
// where a pod the onNode selector matches runs, which starts once that pod
// is deleted too. No watch on pods: the operator lists them again while a
// start is held.
func TestABlockingPodHoldsTheNextStartUntilItIsDeleted(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	env := testenv.Env(t)
	nodes := []string{"gate-1", "gate-2"}
	createNodes(t, nodes...)
	startAgent(t, ctx, nodes...)
	const ns = "gates-it"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// Labels of this test only: the API server is shared with the others.
	mkPod := func(name, node, role string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gates-it/role": role}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No kubelet confirms a deletion here: delete at once.
	deletePod := func(name string) {
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod("backup", "", "backup")
	mkPod("migrate", "gate-1", "migrate")
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: &updatesv1alpha1.BlockingPods{
			Anywhere: &metav1.LabelSelector{MatchLabels: map[string]string{"gates-it/role": "backup"}},
			OnNode:   &metav1.LabelSelector{MatchLabels: map[string]string{"gates-it/role": "migrate"}},
		}}
	})
	blocked := func(status metav1.ConditionStatus, mentions string) func(*updatesv1alpha1.UpdatePolicy) bool {
		return func(p *updatesv1alpha1.UpdatePolicy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyBlocked)
			return c != nil && c.Status == status && strings.Contains(c.Message, mentions)
		}
	}
	idle := func(name string) {
		t.Helper()
		s, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.State != updatesv1alpha1.StateIdle {
			t.Fatalf("%s started while a blocking pod holds it: spec %s", name, s.Spec.State)
		}
	}

	startOperator(t, baseOptions(t))
	waitPolicy(t, ctx, pol.Name, "Blocked by the pod anywhere", blocked(metav1.ConditionTrue, ns+"/backup"))
	idle("gate-1")
	idle("gate-2")

	deletePod("backup")
	waitShadow(t, ctx, "gate-2", "updated", updated)
	p := waitPolicy(t, ctx, pol.Name, "Blocked by the pod on gate-1", blocked(metav1.ConditionTrue, "gate-1 ("+ns+"/migrate)"))
	idle("gate-1")
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyBlocked); c.Reason != "BlockingPods" {
		t.Errorf("Blocked reason %q, want BlockingPods", c.Reason)
	}

	deletePod("migrate")
	waitShadow(t, ctx, "gate-1", "updated", updated)
	waitPolicy(t, ctx, pol.Name, "no longer Blocked", blocked(metav1.ConditionFalse, ""))
}
