package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	updatesinformers "nodehealth.io/client-go/informers/externalversions/updates/v1alpha1"
	updateslisters "nodehealth.io/client-go/listers/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/queue"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// startKey is the queue key of the start pass, which decides which Idle
// nodes may start. It is never a node name, and a workqueue never hands one
// key to two workers at once, so starts are serialized and the concurrency
// limits cannot be overshot by parallel workers.
const startKey = ""

// ZoneLabel is the well-known label the per-zone limit groups nodes by.
const ZoneLabel = v1.LabelTopologyZone

// Controller is the update controller.
type Controller struct {
	client versioned.Interface
	// startClient is Options.StartClient, else client.
	startClient versioned.Interface
	opts        Options
	clock       clock.PassiveClock
	recorder    record.EventRecorder
	metrics     *Metrics

	nodeLister     corelisters.NodeLister
	shadowLister   updateslisters.BottlerocketShadowLister
	policyLister   updateslisters.UpdatePolicyLister
	nodesSynced    cache.InformerSynced
	shadowsSynced  cache.InformerSynced
	policiesSynced cache.InformerSynced
	// jobLister and jobsSynced are the hooks' Jobs (nil without hooks).
	jobLister  batchlisters.JobLister
	jobsSynced cache.InformerSynced
	// handled counts the informer notifications the handlers are done with
	// (HandledEvents).
	handled atomic.Int64

	queue workqueue.TypedRateLimitingInterface[string]
	// startQueue holds startKey alone, with a worker of its own: behind the
	// node keys of a rollout at its limit (each waiting for the client's
	// rate limit) a start would wait for all of them.
	startQueue workqueue.TypedRateLimitingInterface[string]
	// after schedules a key; tests replace it to see every timer.
	after func(key string, d time.Duration)

	// countMu serializes everything that changes how many nodes count
	// toward the limits: the start pass, which also records every due
	// failure before it starts a node, and the failures the per-node syncs
	// record. Without it a start could race a failure with two workers.
	countMu sync.Mutex

	mu sync.Mutex
	// soakSince is when each node in MonitoringUpdate was last seen become
	// fully ready, in a dry run only (which writes nothing); otherwise the
	// soak's start lives in the shadow's healthy-since annotation.
	soakSince map[string]time.Time
	// halted is the reason each policy was last found halted ("" when
	// not) and haltedBy the nodes whose failures held one, so halts and
	// resumes are announced once.
	halted   map[string]string
	haltedBy map[string]bool
	// lastHealthyEnd is when the last node passed its health gate, for the
	// delay until the next node starts.
	lastHealthyEnd time.Time
	// told remembers the Events already sent about a node not being
	// startable, by node, so a blocked node is reported once per cause.
	told map[string]string
	// drains are the drains this process runs, by node (drain.go).
	drains     map[string]*nodeDrain
	drainClock clock.Clock
	// lastPassTold is the last NotEvictedBeforeReboot message sent per
	// node, so the repeated last passes announce each refusal once.
	lastPassTold map[string]string
	// alertAnswers shares the alert sources' answers (alertanswers.go).
	alertAnswers alertAnswers
	// lifecycleDone is the lifecycle conditions last brought onto each
	// node (lifecycle.go): the informer's copy of the Node lags behind
	// the operator's own writes.
	lifecycleDone map[string]lifecycleRecord
	// hooksTold is the hook Job whose success was last announced per
	// node (hooks.go).
	hooksTold map[string]string
}

// Config is what NewController wires the controller to.
type Config struct {
	// Client carries the controller's shadow and policy writes.
	Client versioned.Interface
	// Nodes, Shadows and Policies are the informers the controller's
	// listers and handlers use; their factories are started by the caller.
	Nodes    coreinformers.NodeInformer
	Shadows  updatesinformers.BottlerocketShadowInformer
	Policies updatesinformers.UpdatePolicyInformer
	// Recorder records the controller's Events; nil records none.
	Recorder record.EventRecorder
	// Clock is the controller's clock and its queues'.
	Clock   clock.WithTicker
	Options Options
	// Metrics nil keeps the metrics unregistered.
	Metrics *Metrics
}

// NewController wires the controller to its informers.
func NewController(cfg Config) (*Controller, error) {
	opts, err := defaulted(cfg.Options)
	if err != nil {
		return nil, err
	}
	metrics, recorder, clk := cfg.Metrics, cfg.Recorder, cfg.Clock
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	c := &Controller{
		client:       cfg.Client,
		opts:         opts,
		clock:        clk,
		recorder:     recorder,
		metrics:      metrics,
		queue:        opts.Queue,
		startQueue:   opts.StartQueue,
		nodeLister:   cfg.Nodes.Lister(),
		shadowLister: cfg.Shadows.Lister(),
		policyLister: cfg.Policies.Lister(),
		soakSince:    map[string]time.Time{},
		told:         map[string]string{},
		drains:       map[string]*nodeDrain{},
		lastPassTold: map[string]string{},
		drainClock:   clk,

		lifecycleDone: map[string]lifecycleRecord{},
		hooksTold:     map[string]string{},
	}
	if c.queue == nil {
		c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "updater", Clock: clk})
	}
	if c.startQueue == nil {
		c.startQueue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "updater-start", Clock: clk})
	}
	c.startClient = opts.StartClient
	if c.startClient == nil {
		c.startClient = cfg.Client
	}
	c.after = func(key string, d time.Duration) { c.queueOf(key).AddAfter(key, d) }
	if err := c.addHandlers(cfg.Nodes, cfg.Shadows, cfg.Policies); err != nil {
		return nil, err
	}
	if err := c.addHookHandlers(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaulted validates opts and fills in the defaults of what a caller may
// leave unset.
func defaulted(opts Options) (Options, error) {
	if err := opts.Validate(); err != nil {
		return opts, err
	}
	if opts.Drain.Client == nil {
		return opts, errors.New("a drain client is required: the operator evicts the pods of every node it reboots")
	}
	if opts.Nodes == nil {
		return opts, errors.New("a Node status client is required: the operator publishes the lifecycle conditions of every node it updates")
	}
	if opts.Pods == nil {
		return opts, errors.New("a pod client is required: the operator lists the pods of the policies' blockingPods gates")
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = nodev1alpha1.DefaultLeaseNamespace
	}
	if opts.Drain.Timeout == 0 {
		opts.Drain.Timeout = DefaultDrainTimeout
	}
	if opts.GateRecheck == 0 {
		opts.GateRecheck = DefaultGateRecheck
	}
	if opts.Drain.ReadinessTaintKey == "" {
		opts.Drain.ReadinessTaintKey = nodev1alpha1.DefaultReadinessTaintKey
	}
	return opts, nil
}

// addHandlers registers the controller's event handlers and keeps what says
// they have seen each informer's first list.
func (c *Controller) addHandlers(nodeInformer coreinformers.NodeInformer,
	shadowInformer updatesinformers.BottlerocketShadowInformer, policyInformer updatesinformers.UpdatePolicyInformer) error {
	nodeHandler, err := nodeInformer.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueNode,
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: c.enqueueNode,
	}, &c.handled))
	if err != nil {
		return err
	}
	shadowHandler, err := shadowInformer.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueShadow,
		UpdateFunc: func(_, newObj interface{}) { c.enqueueShadow(newObj) },
		DeleteFunc: c.enqueueShadow,
	}, &c.handled))
	if err != nil {
		return err
	}
	policyHandler, err := policyInformer.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.startQueue.Add(startKey) },
		UpdateFunc: c.onPolicyUpdate,
		DeleteFunc: func(interface{}) { c.startQueue.Add(startKey) },
	}, &c.handled))
	if err != nil {
		return err
	}
	c.nodesSynced = nodeHandler.HasSynced
	c.shadowsSynced = shadowHandler.HasSynced
	c.policiesSynced = policyHandler.HasSynced
	return nil
}

// onNodeUpdate syncs a Node's shadow and the start pass only for the updates
// that matter to them (nodeUpdateMatters): not for kubelet heartbeats.
func (c *Controller) onNodeUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 || nodeUpdateMatters(o, n, &c.opts) {
		c.enqueueNode(newObj)
	}
}

// onPolicyUpdate brings the start pass back for a change of a policy's spec
// (its generation), which takes effect at once: no restart, no re-election.
// The operator's own status writes do not bring the pass back.
func (c *Controller) onPolicyUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(*updatesv1alpha1.UpdatePolicy)
	n, ok2 := newObj.(*updatesv1alpha1.UpdatePolicy)
	if !ok1 || !ok2 || o.Generation != n.Generation || o.ResourceVersion == n.ResourceVersion ||
		n.Status.ObservedGeneration != n.Generation {
		c.startQueue.Add(startKey)
	}
}

// nodeUpdateMatters reports whether a Node's update must bring its sync and
// the start pass back: nodeChanged, the readiness taint, or its leaving
// signals — a node leaving or back in service takes or frees a slot of the
// policies that select it.
func nodeUpdateMatters(o, n *v1.Node, opts *Options) bool {
	return nodeChanged(o, n) ||
		nodeutil.HasTaint(o, opts.Drain.ReadinessTaintKey, "") != nodeutil.HasTaint(n, opts.Drain.ReadinessTaintKey, "") ||
		!nodeutil.LeavingFactsOf(o, opts.LeavingNodeTaints).Equal(nodeutil.LeavingFactsOf(n, opts.LeavingNodeTaints))
}

// nodeChanged reports whether an update touches what the controller reads:
// labels (selector, zone, exclusion), the extension list, and the status of
// the SystemExtensionsReady and Ready conditions; kubelet heartbeats do not.
func nodeChanged(a, b *v1.Node) bool {
	if a.ResourceVersion == b.ResourceVersion { // a resync
		return true
	}
	ra, rb := nodeutil.Condition(a, v1.NodeReady), nodeutil.Condition(b, v1.NodeReady)
	return !labels.Equals(a.Labels, b.Labels) || a.UID != b.UID ||
		a.Annotations[nodev1alpha1.SystemExtensionsAnnotation] != b.Annotations[nodev1alpha1.SystemExtensionsAnnotation] ||
		nodeutil.ConditionChanged(a, b, nodev1alpha1.SystemExtensionsReadyCondition) ||
		(ra == nil) != (rb == nil) || (ra != nil && ra.Status != rb.Status)
}

func (c *Controller) enqueueNode(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		c.queue.Add(n.Name)
		c.startQueue.Add(startKey)
	}
}

func (c *Controller) enqueueShadow(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if s, ok := obj.(*updatesv1alpha1.BottlerocketShadow); ok {
		c.queue.Add(s.Name)
		c.startQueue.Add(startKey)
	}
}

// HandledEvents is how many Node, shadow, policy and Job notifications the
// controller's handlers are done with.
func (c *Controller) HandledEvents() int64 { return c.handled.Load() }

// Run processes the queues until ctx ends: workers for the nodes, one for
// the start pass. Call it only while leading: the first start pass confirms
// the counts with a consistent LIST.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	defer c.startQueue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting update controller", "dryRun", c.opts.DryRun)
	defer logger.Info("Shutting down update controller")
	synced := []cache.InformerSynced{c.nodesSynced, c.shadowsSynced, c.policiesSynced}
	if c.jobsSynced != nil {
		synced = append(synced, c.jobsSynced)
	}
	if !cache.WaitForNamedCacheSync("updater", ctx.Done(), synced...) {
		return
	}
	c.startQueue.Add(startKey)
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNextIn(ctx, c.startQueue) {
		}
	}, time.Second)
	<-ctx.Done()
}

// queueOf is the queue a key belongs in.
func (c *Controller) queueOf(key string) workqueue.TypedRateLimitingInterface[string] {
	if key == startKey {
		return c.startQueue
	}
	return c.queue
}

// processNext processes the next node key.
func (c *Controller) processNext(ctx context.Context) bool {
	return c.processNextIn(ctx, c.queue)
}

// processNextIn processes the next key of q, whichever it is: a test may
// hold every key in one queue.
func (c *Controller) processNextIn(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	return queue.ProcessNext(ctx, q, c.sync, "Syncing update state", "key")
}

// sync runs the start pass for startKey and a node's update otherwise.
func (c *Controller) sync(ctx context.Context, key string) error {
	if key == startKey {
		return c.syncStart(ctx)
	}
	// The lifecycle conditions say what the sync is about to do; a failed
	// write of them does not hold the update up. Both act on one read of
	// the shadow and of its node: read twice, an update landing in between
	// made the shadow sync drain a node (done in its first pass) whose
	// conditions had been written for the state before (DrainInProgress
	// never said; the rolling update's integration test caught it about
	// one run in four for the shadow, and on 2026-11-30 once for the node,
	// whose readiness taint reached the cache between the two reads).
	s, node, err := c.lifecycleSubjects(key)
	if err != nil {
		return err
	}
	lerr := c.syncLifecycleOf(ctx, key, s, node)
	if s == nil {
		c.forgetShadow(key)
		return lerr
	}
	return errors.Join(c.syncShadowOf(ctx, key, s, node), lerr)
}

// event records an Event on the shadow and on its Node, so `kubectl describe
// node` tells the update story too.
func (c *Controller) event(s *updatesv1alpha1.BottlerocketShadow, eventType, reason, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	c.recorder.Event(s, eventType, reason, msg)
	ref := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: s.Name, UID: shadow.NodeUID(s)}
	c.recorder.Event(ref, eventType, reason, msg)
}
