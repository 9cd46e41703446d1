package uninstall

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func nologf(string, ...interface{}) {}

func TestStopDeploymentScalesToZeroAndWaitsForPods(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/name": "nodehealth-controller"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nodehealth-controller", Namespace: "nodehealth-system"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nodehealth-controller-1", Namespace: "nodehealth-system", Labels: labels}}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "nodehealth-system"}}
	client := fake.NewClientset(d, pod, other)
	var scaled bool
	client.PrependReactor("patch", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			t.Errorf("patched deployments/%s, want the scale subresource", a.GetSubresource())
		}
		if got := string(a.(core.PatchAction).GetPatch()); got != `{"spec":{"replicas":0}}` {
			t.Errorf("patch %s", got)
		}
		scaled = true
		// The ReplicaSet controller deletes the pod.
		go func() {
			time.Sleep(50 * time.Millisecond)
			_ = client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "nodehealth-system", pod.Name)
		}()
		return true, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := StopDeployment(ctx, client, "nodehealth-system", "nodehealth-controller", 10*time.Millisecond, nologf); err != nil {
		t.Fatal(err)
	}
	if !scaled {
		t.Error("the deployment was not scaled to 0")
	}
	if _, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "nodehealth-system", "other"); err != nil {
		t.Errorf("a pod the deployment does not select: %v", err)
	}
}

func TestStopDeploymentTimesOutWhilePodsRun(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/name": "nodehealth-controller"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nodehealth-controller", Namespace: "nodehealth-system"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "nodehealth-system", Labels: labels}}
	client := fake.NewClientset(d, pod)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := StopDeployment(ctx, client, "nodehealth-system", "nodehealth-controller", 10*time.Millisecond, nologf); err == nil {
		t.Fatal("returned while a pod of the deployment runs")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("patched a deployment already at 0 replicas: %v", a)
		}
	}
}

func TestStopAndDeleteTolerateMissingObjects(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	if err := StopDeployment(ctx, client, "nodehealth-system", "nodehealth-controller", time.Millisecond, nologf); err != nil {
		t.Errorf("missing deployment: %v", err)
	}
	if err := DeleteMutatingAdmissionPolicyBinding(ctx, client, "nodehealth-readiness-taint-on-create", nologf); err != nil {
		t.Errorf("missing binding: %v", err)
	}
	client = fake.NewClientset(&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodehealth-readiness-taint-on-create"}})
	if err := DeleteMutatingAdmissionPolicyBinding(ctx, client, "nodehealth-readiness-taint-on-create", nologf); err != nil {
		t.Fatal(err)
	}
	if list, _ := client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("binding not deleted")
	}
}
