// Package queue owns how nodehealth's controllers settle one key of a
// rate-limited workqueue: the update operator, the shadow controller and the
// node-health controller's node queue take a key, sync it, and either retry
// it with the queue's back-off or forget its retries, in one place.
package queue

import (
	"context"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
)

// ProcessNext takes the next key from q and syncs it. A sync that fails is
// reported through utilruntime.HandleErrorWithContext with msg and the key
// under keyName, and the key is added back rate limited; a sync that succeeds
// forgets the key's retries, so its next failure starts the back-off afresh.
// It returns false once q is shut down, which ends a worker's loop.
func ProcessNext[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T],
	sync func(context.Context, T) error, msg, keyName string) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, msg, keyName, key)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}
