// Package clientset adapts client-go's typed core and policy clients to
// drain.Client, for processes that already link a clientset (the node-health
// controller). It lives apart from package drain so that a per-node binary
// using the drain does not link client-go's typed clients.
package clientset

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
)

// New adapts the typed core and policy clients (a clientset's CoreV1()
// and PolicyV1()). RBAC: list pods, create pods/eviction.
func New(pods corev1client.PodsGetter, evictions policyv1client.EvictionsGetter) *Client {
	return &Client{pods: pods, evictions: evictions}
}

// Client implements drain.Client with typed clients.
type Client struct {
	pods      corev1client.PodsGetter
	evictions policyv1client.EvictionsGetter
}

func (c *Client) ListPods(ctx context.Context, node string) ([]v1.Pod, error) {
	list, err := c.pods.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (c *Client) Evict(ctx context.Context, pod *v1.Pod, gracePeriodSeconds *int64) error {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	if pod.UID != "" || gracePeriodSeconds != nil {
		eviction.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: gracePeriodSeconds}
	}
	if pod.UID != "" {
		// A pod re-created under the same name (a StatefulSet's) is a new
		// decision for the filter, not this one.
		eviction.DeleteOptions.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	}
	return c.evictions.Evictions(pod.Namespace).Evict(ctx, eviction)
}
