package realnode_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

// A real node runs a pod of the e2e workload image (a real container with a
// bridge IP) behind a Service that kube-proxy routes, and is rebooted: the
// pod's container is killed, the boot ID changes, and the kubelet starts the
// container again.
func TestARealNodeRoutesAServiceToItsPodAndRestartsThePodAfterAReboot(t *testing.T) {
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

	// What the kube-proxy example's heartbeat probes (deploy/examples/kube-proxy):
	// on a node the cluster autoscaler is removing, kube-proxy's /healthz
	// answers 503 while /livez, which says only whether its rules are
	// synced, stays 200, so a heartbeat probing /livez does not release the
	// Lease of every node a scale-down removes.
	setTaint := func(on bool) {
		t.Helper()
		// The kubelet writes the Node too: a conflict is read again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node.Name(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "ToBeDeletedByClusterAutoscaler" })
			if on {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule})
			}
			_, err = env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitHealth := func(what string, healthz, livez int) {
		t.Helper()
		var got [2]int
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			for i, path := range []string{"/healthz", "/livez"} {
				got[i] = httpStatus(ctx, node.KubeProxyHealthURL(path))
			}
			return got == [2]int{healthz, livez}, nil
		})
		if err != nil {
			t.Fatalf("%s: kube-proxy /healthz %d, /livez %d, want %d and %d", what, got[0], got[1], healthz, livez)
		}
	}
	setTaint(true)
	waitHealth("node tainted ToBeDeletedByClusterAutoscaler", http.StatusServiceUnavailable, http.StatusOK)
	setTaint(false)
	waitHealth("taint removed", http.StatusOK, http.StatusOK)
	t.Log("kube-proxy: /healthz 503 and /livez 200 while the node carries ToBeDeletedByClusterAutoscaler")

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

// httpStatus is the status code of a GET of url, or 0 when it fails.
func httpStatus(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
