package nodehealth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// LeaseInformer is what the controller needs of its Lease informer. A
// cache.SharedIndexInformer (from an informer factory) satisfies it, and so
// does the DirectLeaseInformer the binary runs.
type LeaseInformer interface {
	AddIndexers(indexers cache.Indexers) error
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	GetIndexer() cache.Indexer
}

// DirectLeaseInformer is a Lease informer that calls its event handlers on
// its own processing goroutine, one after the other in the order they were
// added. A shared informer hands every event to each handler through two more
// goroutines (a buffering one and a delivering one); at steady state nearly
// every event the controller receives is a Lease renewal that only updates
// the tracker, and those hand-offs wake parked goroutines for nothing else,
// and the shared informer's per-handler buffer holds events the handler has
// not taken yet. Measured against a shared informer (docs/benchmarks.md, "The
// direct Lease informer against a shared one"), it keeps the controller's
// memory lower in every run; its CPU saving is within the variation between
// runs. Its handlers must be quick and must not block, which the
// controller's are: they update the tracker and queue work. The binary adds
// only the controller's; the simulation adds the reference model's and its
// fake API's after it, and so sees every event in the order the controller
// did.
type DirectLeaseInformer struct {
	indexer    cache.Indexer
	controller cache.Controller

	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
	started  bool
	stopped  atomic.Bool
}

// NewDirectLeaseInformer lists and watches the Leases of namespace (with
// watch-list streams where the server supports them, as informer factories
// do) and applies transform to every object before it is stored.
func NewDirectLeaseInformer(client kubernetes.Interface, namespace string, transform cache.TransformFunc) *DirectLeaseInformer {
	leases := client.CoordinationV1().Leases(namespace)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return leases.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return leases.Watch(ctx, opts)
		},
	}, client)
	i := &DirectLeaseInformer{}
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &coordinationv1.Lease{},
		Handler:       directHandlers{i},
		Indexers:      cache.Indexers{},
		Transform:     transform,
	})
	i.indexer = store.(cache.Indexer)
	i.controller = controller
	return i
}

// AddIndexers adds indexers to the store; call it before Run.
func (i *DirectLeaseInformer) AddIndexers(indexers cache.Indexers) error {
	return i.indexer.AddIndexers(indexers)
}

// AddEventHandler adds a handler, called after those added before it; add
// every handler before Run. Every registration reports synced once the
// initial list reached all the handlers.
func (i *DirectLeaseInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return nil, errors.New("the direct Lease informer is running: add its handlers before Run")
	}
	i.handlers = append(i.handlers, handler)
	return i.controller, nil
}

// GetIndexer returns the store, for listers.
func (i *DirectLeaseInformer) GetIndexer() cache.Indexer { return i.indexer }

// HasSynced reports whether the initial list was stored and handled.
func (i *DirectLeaseInformer) HasSynced() bool { return i.controller.HasSynced() }

// Run lists, watches and delivers events until ctx ends.
func (i *DirectLeaseInformer) Run(ctx context.Context) {
	i.mu.Lock()
	i.started = true
	i.mu.Unlock()
	defer i.stopped.Store(true)
	i.controller.RunWithContext(ctx)
}

// IsStopped reports whether Run has returned, as a shared informer's does.
func (i *DirectLeaseInformer) IsStopped() bool { return i.stopped.Load() }

// directHandlers forwards to the handlers added by AddEventHandler; none is
// added only in a misuse (Run without a handler), which keeps the store.
// The handlers are read without the lock: AddEventHandler refuses once Run
// took the lock, and events are delivered only by goroutines Run starts after
// that.
type directHandlers struct{ i *DirectLeaseInformer }

func (d directHandlers) OnAdd(obj interface{}, isInInitialList bool) {
	for _, h := range d.i.handlers {
		h.OnAdd(obj, isInInitialList)
	}
}

func (d directHandlers) OnUpdate(oldObj, newObj interface{}) {
	for _, h := range d.i.handlers {
		h.OnUpdate(oldObj, newObj)
	}
}

func (d directHandlers) OnDelete(obj interface{}) {
	for _, h := range d.i.handlers {
		h.OnDelete(obj)
	}
}
