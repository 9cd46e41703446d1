package drain

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// Client is what a drain needs from the API server. Package
// pkg/drain/clientset adapts client-go's typed clients; a per-node binary
// implements it on a lean REST client instead, since linking client-go's
// typed clients links every API group's types.
type Client interface {
	// ListPods returns the pods bound to a node.
	ListPods(ctx context.Context, node string) ([]v1.Pod, error)
	// Evict asks the Eviction API to evict the pod, which must still be the
	// same object (UID) the caller decided about. gracePeriodSeconds, when
	// set, goes into the eviction's DeleteOptions instead of the pod's own
	// terminationGracePeriodSeconds (kubectl drain --grace-period).
	Evict(ctx context.Context, pod *v1.Pod, gracePeriodSeconds *int64) error
}
