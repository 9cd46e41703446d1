package drain

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
)

// Client is what a drain needs from the API server.
type Client interface {
	// ListPods returns the pods bound to a node.
	ListPods(ctx context.Context, node string) ([]v1.Pod, error)
	// Evict asks the Eviction API to evict the pod, which must still be the
	// same object (UID) the caller decided about.
	Evict(ctx context.Context, pod *v1.Pod) error
}

// NewClient adapts the typed core and policy clients (a clientset's CoreV1()
// and PolicyV1()). RBAC: list pods, create pods/eviction.
func NewClient(pods corev1client.PodsGetter, evictions policyv1client.EvictionsGetter) Client {
	return &typedClient{pods: pods, evictions: evictions}
}

type typedClient struct {
	pods      corev1client.PodsGetter
	evictions policyv1client.EvictionsGetter
}

func (c *typedClient) ListPods(ctx context.Context, node string) ([]v1.Pod, error) {
	list, err := c.pods.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (c *typedClient) Evict(ctx context.Context, pod *v1.Pod) error {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	if pod.UID != "" {
		// A pod re-created under the same name (a StatefulSet's) is a new
		// decision for the filter, not this one.
		eviction.DeleteOptions = &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	}
	return c.evictions.Evictions(pod.Namespace).Evict(ctx, eviction)
}
