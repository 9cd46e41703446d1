package nodehealth

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// simLeaseInformer is the Lease informer the binary runs (the
// DirectLeaseInformer, with TransformLease) under the simulation's other
// handlers: the direct informer takes one handler, so this one calls, on the
// direct informer's goroutine and in the order they were added, the
// controller's handler, then the model's, then the fake API's tracking
// handler. The API counts an event processed only once every handler before
// it ran.
type simLeaseInformer struct {
	*DirectLeaseInformer
	handlers []cache.ResourceEventHandler
	// reg is the direct informer's registration, which the controller
	// waits on (HasSynced).
	reg     cache.ResourceEventHandlerRegistration
	stopped atomic.Bool
}

func newSimLeaseInformer(i *DirectLeaseInformer) (*simLeaseInformer, error) {
	s := &simLeaseInformer{DirectLeaseInformer: i}
	reg, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			for _, h := range s.handlers {
				h.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			for _, h := range s.handlers {
				h.OnUpdate(oldObj, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range s.handlers {
				h.OnDelete(obj)
			}
		},
	})
	s.reg = reg
	return s, err
}

// AddEventHandler adds a handler; every one is added before Run.
func (s *simLeaseInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if s.stopped.Load() {
		return nil, errors.New("the simulation's Lease informer was stopped")
	}
	s.handlers = append(s.handlers, h)
	return s.reg, nil
}

// Run runs the direct informer until ctx ends.
func (s *simLeaseInformer) Run(ctx context.Context) {
	defer s.stopped.Store(true)
	s.DirectLeaseInformer.Run(ctx)
}

// IsStopped reports whether Run returned: the fake API then stops waiting
// for what it delivered to this informer.
func (s *simLeaseInformer) IsStopped() bool { return s.stopped.Load() }
