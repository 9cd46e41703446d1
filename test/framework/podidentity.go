package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// kubeletTokenExpirationSeconds is what the kubelet asks for a projected
// service-account token. The API server recognises the value and extends such
// a pod-bound token to a year (it only warns on use after the hour), so a
// process that runs longer than an hour, as the sandbox's do, keeps working
// as it would in a pod.
const kubeletTokenExpirationSeconds = 3607

// PodIdentity names the DaemonSet whose pod on a node a process runs as: the
// process authenticates with a token bound to that pod, as the kubelet's
// projected volume gives one to the pod's containers. The API server then
// puts the pod's and the node's name and UID into the requests' user extras,
// which the admission policies of deploy/extensions and deploy/update-agent
// check against the object's node.
type PodIdentity struct {
	// Namespace and Selector find the pod (its DaemonSet's namespace and a
	// label selector of its pods).
	Namespace, Selector string
}

// DaemonSetPod waits (up to two minutes) for the pod of id's DaemonSet on
// node and returns it. The pod must be DaemonSet-owned: a drain skips those,
// so an eviction never invalidates the token of the process that runs as it.
func (e *Environment) DaemonSetPod(ctx context.Context, id PodIdentity, node string) (*corev1.Pod, error) {
	sel, err := labels.Parse(id.Selector)
	if err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(id.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: sel.String(), FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && ownedByDaemonSet(p) {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no DaemonSet pod %s in %s on node %s: %w", id.Selector, id.Namespace, node, err)
	}
	return pod, nil
}

// WritePodKubeconfig writes to path a kubeconfig that authenticates as pod's
// ServiceAccount with a token bound to pod, and the cluster's CA beside it.
func (e *Environment) WritePodKubeconfig(ctx context.Context, pod *corev1.Pod, path string) error {
	tr, err := e.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](kubeletTokenExpirationSeconds),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return e.WriteTokenKubeconfig(path, pod.Spec.ServiceAccountName, tr.Status.Token)
}

// WriteTokenKubeconfig writes to path a kubeconfig that authenticates with
// token alone (as user), no client certificate: what a pod's projected
// service-account token gives its containers.
func (e *Environment) WriteTokenKubeconfig(path, user, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: token
  context: {cluster: cluster, user: %s}
current-context: token
`, e.APIServerURL, e.CAFile, user, token, user)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// PodEnv is a process's downward-API environment for pod: its name (a
// Lease's holder) and namespace (where its Events go).
func PodEnv(pod *corev1.Pod) []string {
	return []string{"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace}
}
