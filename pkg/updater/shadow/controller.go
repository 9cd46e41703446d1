package shadow

import (
	"context"
	"fmt"
	"sync/atomic"
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
	"nodehealth.io/nodehealth/pkg/queue"
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
	// handled counts the informer notifications the handlers are done with
	// (HandledEvents).
	handled atomic.Int64
}

// Options are the shadow controller's settings.
type Options struct {
	// Selector selects the managed nodes; nil selects none.
	Selector labels.Selector
	// DryRun logs the writes it would make instead of making them.
	DryRun bool
	// Queue holds the names of the nodes to sync; nil makes one with
	// client-go's default controller rate limiter. A deterministic driver
	// (the update simulation in pkg/updater) passes its own: it works the
	// queue itself, one item at a time with Sync, so that every run of a
	// seed interleaves the shadow and update controllers alike, and its
	// rate limiter retries at once, so that no retry lands at a wall-clock
	// instant the driver cannot see.
	Queue workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to its informers. recorder may be nil.
func NewController(client versioned.Interface, nodeInformer coreinformers.NodeInformer,
	shadowInformer updatesinformers.BottlerocketShadowInformer, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if opts.Selector == nil {
		opts.Selector = labels.Nothing()
	}
	if opts.Queue == nil {
		opts.Queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "shadow"})
	}
	c := &Controller{
		client:       client,
		selector:     opts.Selector,
		recorder:     recorder,
		dryRun:       opts.DryRun,
		queue:        opts.Queue,
		nodeLister:   nodeInformer.Lister(),
		shadowLister: shadowInformer.Lister(),
	}
	nodeHandler, err := nodeInformer.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
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
	}, &c.handled))
	if err != nil {
		return nil, err
	}
	shadowHandler, err := shadowInformer.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, newObj interface{}) { c.enqueue(newObj) },
		DeleteFunc: c.enqueue,
	}, &c.handled))
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

// HandledEvents is how many Node and shadow notifications the controller's
// handlers are done with.
func (c *Controller) HandledEvents() int64 { return c.handled.Load() }

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
	return queue.ProcessNext(ctx, c.queue, c.Sync, "Syncing shadow", "node")
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

// AtRest reports whether a shadow may go when its node leaves the managed
// set: Idle, no version lock of its agent's still to restore
// (status.previousVersionLock: an abort the agent has not finished), and no
// failure that halts its policy (the record that stops the rollout). It is
// the rule a person's deletion must meet too (deploy/update-agent/policy.yaml):
// deleted earlier, the shadow would take the user's lock with it and leave
// the host pinned to the update's version, or let the rollout go on past a
// bad release.
func AtRest(s *updatesv1alpha1.BottlerocketShadow) bool {
	return Idle(s) && s.Status.PreviousVersionLock == "" && !updatesv1alpha1.Halting(s.Annotations)
}

// Sync brings the shadow of the node named name to what the node asks:
// created for a managed node, deleted (once idle) for one no longer managed,
// kept as the record of a failed update for a node deleted past its drain.
// It is the queue's sync handler: Run's workers call it, and so does a
// driver that passed its own Options.Queue, retrying a key on an error.
func (c *Controller) Sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("node", name)
	node, err := c.nodeLister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		node = nil
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
	case shadow != nil && !Describes(shadow, node):
		// Its Node was deleted, or deleted and re-created under the same
		// name: the shadow describes a machine that no longer exists.
		return c.syncOrphan(ctx, shadow, node)
	case node == nil:
		return nil
	case shadow != nil && (NodeUID(shadow) == "" || len(nodeOwnerReferences(shadow)) > 0):
		// Created by an earlier operator, owned by its Node: the garbage
		// collector would delete it with the Node, and with it the record
		// of a failed update.
		logger.Info("Recording the node's UID on its shadow instead of an ownerReference")
		return c.adopt(ctx, shadow, node)
	case Managed(c.selector, node) && shadow == nil:
		logger.V(2).Info("Creating shadow for managed node")
		return c.create(ctx, node)
	case !Managed(c.selector, node) && shadow != nil:
		if !AtRest(shadow) {
			logger.V(2).Info("Node no longer managed; keeping its shadow until its update ends",
				"desired", shadow.Spec.State, "current", shadow.Status.CurrentState,
				"previousVersionLock", shadow.Status.PreviousVersionLock, "failed", shadow.Annotations[updatesv1alpha1.FailedAnnotation])
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

// syncOrphan handles the shadow of a Node that no longer exists (node is nil,
// or a new Node with the same name). A node deleted past its drain is a
// failed update (docs/updater.md): the update controller marks the shadow failed,
// and the shadow stays, halting the rollout, until that failure is resumed.
// Any other orphan is deleted at once, which frees its slot; a re-created
// Node then gets a shadow of its own.
func (c *Controller) syncOrphan(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) error {
	logger := klog.FromContext(ctx).WithValues("node", shadow.Name, "shadowNodeUID", NodeUID(shadow))
	if PastDrain(shadow) || updatesv1alpha1.Halting(shadow.Annotations) {
		logger.V(2).Info("Node deleted during its update; keeping its shadow as the failure's record until it is resumed",
			"desired", shadow.Spec.State, "current", shadow.Status.CurrentState, "failed", shadow.Annotations[updatesv1alpha1.FailedAnnotation])
		if node != nil && c.recorder != nil {
			c.recorder.Eventf(node, v1.EventTypeWarning, "UpdateWaitsForResume",
				"A node named %s (UID %s) was deleted during its update, which halts the rollout; this node gets a BottlerocketShadow, and updates, once that failure is resumed: kubectl nodehealth update resume %s",
				shadow.Name, NodeUID(shadow), shadow.Name)
		}
		return nil
	}
	logger.Info("Deleting the shadow of a node that no longer exists")
	return c.delete(ctx, shadow)
}

func nodeOwnerReferences(s *updatesv1alpha1.BottlerocketShadow) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "Node" && ref.APIVersion == "v1" {
			out = append(out, ref)
		}
	}
	return out
}

// adopt records the Node's UID in the node-uid annotation and removes the
// Node ownerReference, guarded by the resourceVersion it was judged on.
func (c *Controller) adopt(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) error {
	if c.dryRun {
		klog.FromContext(ctx).Info("Dry run: would replace the shadow's Node ownerReference by the node-uid annotation", "node", node.Name)
		return nil
	}
	n := shadow.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[updatesv1alpha1.NodeUIDAnnotation] = string(node.UID)
	var refs []metav1.OwnerReference
	for _, ref := range n.OwnerReferences {
		if ref.Kind != "Node" || ref.APIVersion != "v1" {
			refs = append(refs, ref)
		}
	}
	n.OwnerReferences = refs
	if _, err := c.client.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"}); err != nil {
		return fmt.Errorf("recording the node UID on shadow %s: %w", shadow.Name, err)
	}
	return nil
}

func (c *Controller) create(ctx context.Context, node *v1.Node) error {
	shadow := &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name,
			// No ownerReference: see the package documentation.
			Annotations: map[string]string{updatesv1alpha1.NodeUIDAnnotation: string(node.UID)},
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
