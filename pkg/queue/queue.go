// Package queue owns how nodehealth's controllers feed and settle a
// rate-limited workqueue: the update operator, the shadow controller and the
// node-health controller's node queue take a key, sync it, and either retry
// it with the queue's back-off or forget its retries, in one place; and the
// update operator's and the shadow controller's informer handlers, which
// feed their queues, count what they handled in one way (Counted).
package queue

import (
	"context"
	"sync/atomic"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Counted returns h counting in n each notification it has handled, once h
// is done with it. A shared informer runs each handler on a goroutine of its
// own: what a handler queued is in the queue only once its count says so,
// which a test that steps the controller waits for.
func Counted(h cache.ResourceEventHandler, n *atomic.Int64) cache.ResourceEventHandler {
	return countedHandler{h: h, n: n}
}

type countedHandler struct {
	h cache.ResourceEventHandler
	n *atomic.Int64
}

func (c countedHandler) OnAdd(obj interface{}, isInInitialList bool) {
	defer c.n.Add(1)
	c.h.OnAdd(obj, isInInitialList)
}

func (c countedHandler) OnUpdate(oldObj, newObj interface{}) {
	defer c.n.Add(1)
	c.h.OnUpdate(oldObj, newObj)
}

func (c countedHandler) OnDelete(obj interface{}) {
	defer c.n.Add(1)
	c.h.OnDelete(obj)
}

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
