package kubectlplugin

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func TestUninstallStopsTheControllerThenUngatesEveryNodeFromAWorkstation(t *testing.T) {
	gatedNode := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{nodev1alpha1.BootAnnotation: `{"bootID":"b1"}`}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	controller := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "nodehealth-system", Name: "nodehealth-controller"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nodehealth-controller"}}},
	}
	client := fake.NewClientset(gatedNode, controller)

	out, err := run(t, client, "uninstall")
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	var scaled, patchedNode bool
	for _, a := range client.Actions() {
		scaled = scaled || (a.GetVerb() == "patch" && a.GetResource().Resource == "deployments" && a.GetSubresource() == "scale")
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			if !scaled {
				t.Errorf("node patched before the controller was scaled to 0: it would put the taint back")
			}
			patchedNode = true
		}
	}
	if !scaled || !patchedNode {
		t.Errorf("scaled the controller: %v, patched the node: %v; actions %v", scaled, patchedNode, client.Actions())
	}
	n, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "example.com/other" {
		t.Errorf("taints after uninstall %v, want only example.com/other", n.Spec.Taints)
	}
	if _, ok := n.Annotations[nodev1alpha1.BootAnnotation]; ok {
		t.Error("the boot record is still there")
	}
	for _, want := range []string{"mutatingadmissionpolicybinding nodehealth-readiness-taint-on-create: not found",
		"deployment nodehealth-system/nodehealth-controller: scaled to 0", "changed 1 nodes: removed 1 taints"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestUninstallAfterHelmUninstallNoHooksOnlyCleansTheNodes(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/not-ready", Effect: corev1.TaintEffectNoSchedule}}}})
	out, err := run(t, client, "uninstall", "--taint-key=example.com/not-ready", "--stop-deployment=")
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if strings.Contains(out, "deployment") {
		t.Errorf("--stop-deployment= still looked for a Deployment:\n%s", out)
	}
	n, _ := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if len(n.Spec.Taints) != 0 {
		t.Errorf("taints after uninstall %v, want none", n.Spec.Taints)
	}
	if _, err := run(t, client, "uninstall", "--stop-deployment=nodehealth-controller"); err == nil || !strings.Contains(err.Error(), "namespace/name") {
		t.Errorf("a Deployment without its namespace: %v, want an error asking for namespace/name", err)
	}
}
