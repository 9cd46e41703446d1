package realnode_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

// TestRealNode starts a real node, runs a pod of the e2e workload image on
// it (a real container with a bridge IP), and reboots the node: the pod's
// container is killed, the boot ID changes, and the kubelet starts the
// container again.
func TestRealNode(t *testing.T) {
	realnode.SkipUnlessEnabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// endpointslice-controller: the Service of the pod gets its endpoints.
	env, err := framework.Start(ctx, framework.WithLogf(t.Logf),
		framework.WithControllers(append(slices.Clone(framework.DefaultControllers), "endpointslice-controller")...))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			env.KeepArtifacts()
		}
		_ = env.Stop()
	}()
	node, err := realnode.Start(ctx, env, realnode.Options{KubeProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName: node.Name(),
			Containers: []corev1.Container{{
				Name: "web", Image: realnode.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFromInt(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := waitPodReady(ctx, t, env, "default", "web", 0)
	if !strings.HasPrefix(ready.Status.PodIP, "10.89.0.") {
		t.Errorf("pod IP %q is not on the node's bridge", ready.Status.PodIP)
	}
	t.Logf("pod web ready with IP %s", ready.Status.PodIP)

	// kube-proxy routes the pod's ClusterIP Service.
	svc, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstrFromInt(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A client pod is ready only while a GET of the Service's ClusterIP
	// succeeds from the pod network.
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: node.Name(),
			Containers: []corev1.Container{{
				Name: "client", Image: realnode.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Args:           []string{"--probe-url=http://" + svc.Spec.ClusterIP + "/"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFromInt(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodReady(ctx, t, env, "default", "client", 0)
	t.Logf("Service web at %s routes from the pod network (kube-proxy)", svc.Spec.ClusterIP)

	oldBoot := node.BootID()
	if err := node.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if node.BootID() == oldBoot {
		t.Fatal("boot ID unchanged")
	}
	after := waitPodReady(ctx, t, env, "default", "web", 1)
	t.Logf("after the reboot: pod web ready, restarts %d", after.Status.ContainerStatuses[0].RestartCount)
}

func waitPodReady(ctx context.Context, t *testing.T, env *framework.Environment, ns, name string, minRestarts int32) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < minRestarts {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not ready: %v; status: %+v", ns, name, err, pod.Status)
	}
	return pod
}

func intstrFromInt(i int) intstr.IntOrString { return intstr.FromInt32(int32(i)) }
