package shadow

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	updatesinformers "nodehealth.io/client-go/informers/externalversions/updates/v1alpha1"
	updateslisters "nodehealth.io/client-go/listers/updates/v1alpha1"
)

// Controller keeps one BottlerocketShadow per managed node.
type Controller struct {
	client   versioned.Interface
	selector labels.Selector
	recorder record.EventRecorder
	dryRun   bool

	nodeLister    corelisters.NodeLister
	shadowLister  updateslisters.BottlerocketShadowLister
	nodesSynced   cache.InformerSynced
	shadowsSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// Options are the shadow controller's settings.
type Options struct {
	// Selector selects the managed nodes; nil selects none.
	Selector labels.Selector
	// DryRun logs the writes it would make instead of making them.
	DryRun bool
}

// NewController wires the controller to its informers. recorder may be nil.
func NewController(client versioned.Interface, nodeInformer coreinformers.NodeInformer,
	shadowInformer updatesinformers.BottlerocketShadowInformer, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if opts.Selector == nil {
		opts.Selector = labels.Nothing()
	}
	c := &Controller{
		client:   client,
		selector: opts.Selector,
		recorder: recorder,
		dryRun:   opts.DryRun,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "shadow"}),
		nodeLister:   nodeInformer.Lister(),
		shadowLister: shadowInformer.Lister(),
	}
	nodeHandler, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			// Kubelet status heartbeats change neither labels nor identity.
			if !ok1 || !ok2 || o.UID != n.UID || !labels.Equals(o.Labels, n.Labels) ||
				o.ResourceVersion == n.ResourceVersion || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				c.enqueue(newObj)
			}
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, err
	}
	shadowHandler, err := shadowInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, newObj interface{}) { c.enqueue(newObj) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, err
	}
	c.nodesSynced = nodeHandler.HasSynced
	c.shadowsSynced = shadowHandler.HasSynced
	return c, nil
}

func (c *Controller) enqueue(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Run processes the queue with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting shadow controller")
	defer logger.Info("Shutting down shadow controller")
	if !cache.WaitForNamedCacheSync("shadow", ctx.Done(), c.nodesSynced, c.shadowsSynced) {
		return
	}
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing shadow", "node", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// Managed reports whether a node is one whose OS the updater manages.
func Managed(selector labels.Selector, node *v1.Node) bool {
	return node != nil && node.DeletionTimestamp == nil && selector.Matches(labels.Set(node.Labels))
}

// Idle reports whether a shadow is at rest: the operator wants nothing and
// the agent is doing nothing (ErrorReset means it is still aborting).
func Idle(s *updatesv1alpha1.BottlerocketShadow) bool {
	st := s.Status.CurrentState
	return s.Spec.State == updatesv1alpha1.StateIdle && (st == "" || st == updatesv1alpha1.StateIdle)
}

func ownedBy(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "Node" && ref.UID == node.UID {
			return true
		}
	}
	return false
}

func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("node", name)
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		// The garbage collector removes the shadow through its ownerReference.
		return nil
	}
	if err != nil {
		return err
	}
	shadow, err := c.shadowLister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		shadow = nil
	}

	switch {
	case shadow != nil && shadow.DeletionTimestamp != nil:
		return nil // its deletion brings us back here
	case shadow != nil && !ownedBy(shadow, node):
		// The node was re-created under the same name: the shadow describes a
		// machine that no longer exists. Its owner is gone, so the garbage
		// collector would remove it too; do not wait for it.
		logger.Info("Deleting the shadow of an earlier node with this name", "shadowUID", shadow.UID)
		return c.delete(ctx, shadow)
	case Managed(c.selector, node) && shadow == nil:
		logger.V(2).Info("Creating shadow for managed node")
		return c.create(ctx, node)
	case !Managed(c.selector, node) && shadow != nil:
		if !Idle(shadow) {
			logger.V(2).Info("Node no longer managed; keeping its shadow until its update ends",
				"desired", shadow.Spec.State, "current", shadow.Status.CurrentState)
			return nil
		}
		logger.Info("Node no longer managed; deleting its shadow")
		if err := c.delete(ctx, shadow); err != nil {
			return err
		}
		if c.recorder != nil && !c.dryRun {
			c.recorder.Eventf(node, v1.EventTypeNormal, "ShadowDeleted",
				"Node no longer matches the managed-node selector; its BottlerocketShadow was deleted")
		}
	}
	return nil
}

func (c *Controller) create(ctx context.Context, node *v1.Node) error {
	shadow := &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name,
			// No blockOwnerDeletion: it would need the right to update the
			// Node's finalizers, and nothing needs the Node kept for it.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle},
	}
	if c.dryRun {
		klog.FromContext(ctx).Info("Dry run: would create shadow", "node", node.Name)
		return nil
	}
	_, err := c.client.UpdatesV1alpha1().BottlerocketShadows().Create(ctx, shadow, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // our cache is behind; the shadow's event brings us back
	}
	if err != nil {
		return fmt.Errorf("creating shadow %s: %w", node.Name, err)
	}
	return nil
}

// delete removes the shadow only if it is still the object we judged: a
// concurrent spec or status write (the update controller starting the node,
// the agent reporting) fails the precondition and we look again.
func (c *Controller) delete(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) error {
	if c.dryRun {
		klog.FromContext(ctx).Info("Dry run: would delete shadow", "node", shadow.Name)
		return nil
	}
	err := c.client.UpdatesV1alpha1().BottlerocketShadows().Delete(ctx, shadow.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: ptr.To(shadow.UID), ResourceVersion: ptr.To(shadow.ResourceVersion)},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("shadow %s changed while deleting it: %w", shadow.Name, err)
	}
	if err != nil {
		return fmt.Errorf("deleting shadow %s: %w", shadow.Name, err)
	}
	return nil
}
