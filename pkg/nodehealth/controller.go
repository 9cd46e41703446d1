package nodehealth

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/queue"
)

// leaseNodeIndex indexes extension Leases by the node their name belongs to.
const leaseNodeIndex = "nodehealth.io/node"

// Writes that only record dead marks in a boot record (nodes held by a
// guard) go out at deadMarksPerSecond with bursts of deadMarksBurst; a node
// over the limit tries again after deadMarkRetry. Marks that come with a
// taint change ride on that write and are not limited.
const (
	deadMarksPerSecond = 10
	deadMarksBurst     = 50
	deadMarkRetry      = time.Second
)

// safetyResync re-evaluates every node this often even without events. Timers
// drive every expiry; the resync only bounds the damage of a lost timer.
const safetyResync = 10 * time.Minute

// Controller is the node-health controller.
type Controller struct {
	// logger is for the informer handlers, which get no context.
	logger   klog.Logger
	client   kubernetes.Interface
	opts     Options
	clock    clock.WithTicker
	recorder record.EventRecorder
	metrics  *Metrics

	nodeLister   corelisters.NodeLister
	nodesSynced  cache.InformerSynced
	leaseLister  coordinationlisters.LeaseLister
	leaseIndexer cache.Indexer
	leasesSynced cache.InformerSynced

	queue     workqueue.TypedRateLimitingInterface[string]
	evictions workqueue.TypedRateLimitingInterface[string]
	// evictionTurns spaces the escalations cluster-wide.
	evictionTurns *escalationTurns
	// deadMarks limits the Node writes that only record dead marks
	// (deadMarksPerSecond).
	deadMarks flowcontrol.RateLimiter

	tracker *leaseTracker
	blast   *blastRadius
	rules   map[string]*Rule
	canary  *canary
	drains  drainers

	// awaitingView holds the nodes whose last evaluation found a Lease
	// past its expiry by the clock but not yet by the view's horizon
	// (decision.awaitsView): each is queued when the horizon moves. Its
	// own lock: the Lease handler takes it, and must not wait for an
	// evaluation.
	awaitMu      sync.Mutex
	awaitingView sets.Set[string]

	mu    sync.Mutex
	nodes map[string]*nodeState
	// viewStale is the one record of whether the own-view guard holds,
	// from the moment the canary reported the view stale until its
	// recovery has refreshed the Leases and restarted the gates:
	// evaluations hold mu, so none sees the recovery half done. Between
	// the canary's checks, an overdue canary holds additions too
	// (ownViewStaleLocked).
	viewStale bool
	// droppedRegistrations is how many self-registrations each node's list
	// could not hold, for nodes where some did not fit.
	droppedRegistrations map[string]int
	// live holds nodes added after the initial list: they are new.
	live sets.Set[string]
	// leaseRefs maps Leases referenced under a non-default name to the nodes
	// that reference them, so their events reach those nodes; nodeLeaseRefs
	// is the reverse, so a sync updates only its own node's entries.
	leaseRefs     map[string]sets.Set[string]
	nodeLeaseRefs map[string][]string
	// contributions remember each node's share of the gauges.
	contributions map[string]contribution

	// dirty holds the nodes queued by anything but their own expiry timer
	// since they were last taken from the queue: only those need a full
	// evaluation (see recheckTimer).
	dirtyMu sync.Mutex
	dirty   sets.Set[string]

	// handled counts the informer notifications the controller's handlers
	// finished: a shared informer runs each handler on a goroutine of its
	// own, and a deterministic simulation must know that they all ran
	// before it lets the workers look.
	handled atomic.Int64
}

type contribution struct {
	reason gateCause
	// gatedSince is when the node became gated (for any reason, without
	// interruption since): nodehealth_longest_gate_seconds.
	gatedSince time.Time
	notReady   []string
	invalid    bool
	tracked    bool
	// leaving: the node is leaving (nodehealth_leaving_nodes).
	leaving bool
}

// Config is what a controller is built from. internal/setup/controller fills
// it the way the binary runs; tests fill it with fakes.
type Config struct {
	// Client carries every write of the controller and its canary.
	Client kubernetes.Interface
	// Nodes and Leases should drop managedFields and node images (see
	// nodeutil.TransformNode, TransformLease) to keep memory small; the
	// controller never writes an object it read from them.
	Nodes  coreinformers.NodeInformer
	Leases LeaseInformer
	// Recorder records the controller's Events.
	Recorder record.EventRecorder
	// Clock is the controller's clock, its queues' and its canary's.
	Clock   clock.WithTicker
	Options Options
	// Metrics nil keeps the metrics unregistered.
	Metrics *Metrics
	// Queues builds the controller's two work queues; nil builds the
	// production ones (ProductionQueues).
	Queues QueueFactory
}

// Names of the controller's work queues, as their metrics label them.
const (
	NodeQueueName     = "nodehealth"
	EvictionQueueName = "nodehealth_evictions"
)

// QueueFactory builds the work queue named name (NodeQueueName or
// EvictionQueueName); limiter is the rate limiter that queue retries with in
// production. A simulation passes one whose delays it releases at its own
// simulated instants: the queue's goroutine would release them at a moment
// of real time it cannot see.
type QueueFactory func(name string, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string]

// ProductionQueues builds the queues the binary runs: on clk, their metrics
// in metrics.
func ProductionQueues(clk clock.WithTicker, metrics *Metrics) QueueFactory {
	return func(name string, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk, MetricsProvider: metrics.queues})
	}
}

// NewController wires the controller to its informers. ctx carries the
// logger of the informer handlers.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	opts, clk, metrics := cfg.Options, cfg.Clock, cfg.Metrics
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = defaultOptions(opts)
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	queues := cfg.Queues
	if queues == nil {
		queues = ProductionQueues(clk, metrics)
	}
	c := &Controller{
		logger:   klog.FromContext(ctx),
		client:   cfg.Client,
		opts:     opts,
		clock:    clk,
		recorder: cfg.Recorder,
		metrics:  metrics,
		queue:    queues(NodeQueueName, workqueue.DefaultTypedControllerRateLimiter[string]()),
		// A blocked eviction is retried on its own scale, 5 s up to 5
		// min (docs/controller.md), not the node queue's.
		evictions:     queues(EvictionQueueName, workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute)),
		evictionTurns: newEscalationTurns(evictionRate(opts.Eviction)),
		deadMarks:     flowcontrol.NewTokenBucketRateLimiterWithClock(deadMarksPerSecond, deadMarksBurst, clk),
		tracker:       newLeaseTracker(clk, opts.MinimumLeaseDuration),
		blast:         newBlastRadius(opts.BlastRadius),
		rules:         map[string]*Rule{},
		nodes:         map[string]*nodeState{},
		live:          sets.New[string](),
		awaitingView:  sets.New[string](),
		leaseRefs:     map[string]sets.Set[string]{},
		nodeLeaseRefs: map[string][]string{},
		contributions: map[string]contribution{},
		dirty:         sets.New[string](),

		droppedRegistrations: map[string]int{},
	}
	for i := range opts.Rules {
		c.rules[opts.Rules[i].Name] = &c.opts.Rules[i]
	}
	longestGate := c.longestGates
	metrics.LongestGate.source.Store(&longestGate)
	turnWaiting := c.nodesWaitingForTurn
	metrics.EvictionTurnWaiting.source.Store(&turnWaiting)
	if opts.CanaryInterval > 0 && !opts.DryRun {
		c.canary = newCanary(canaryConfig{client: cfg.Client, namespace: opts.LeaseNamespace, identity: opts.Identity,
			clock: clk, interval: opts.CanaryInterval, onChange: c.ownViewChanged})
	}

	if err := c.registerHandlers(cfg.Nodes, cfg.Leases); err != nil {
		return nil, err
	}
	return c, nil
}

// defaultOptions fills what a caller may leave unset.
func defaultOptions(opts Options) Options {
	if opts.MaintenanceReasons == nil {
		opts.MaintenanceReasons = sets.New[string]()
	}
	return opts
}

// evictionRate is the escalations per second, 0.1 when unset; the options
// keep what the caller gave.
func evictionRate(e EvictionOptions) float64 {
	if e.NodesPerSecond <= 0 {
		return 0.1
	}
	return e.NodesPerSecond
}

// nodeChanged reports whether an update touches anything evaluation reads;
// status heartbeats of the kubelet do not. The leaving signals are among
// what it reads: a node that starts or stops leaving is evaluated at once.
func nodeChanged(a, b *v1.Node, opts *Options) bool {
	taintKey := opts.TaintKey
	if !leavingFactsOf(a, opts).Equal(leavingFactsOf(b, opts)) {
		return true
	}
	if a.UID != b.UID || a.Status.NodeInfo.BootID != b.Status.NodeInfo.BootID ||
		!labels.Equals(a.Labels, b.Labels) ||
		a.Annotations[nodev1alpha1.SystemExtensionsAnnotation] != b.Annotations[nodev1alpha1.SystemExtensionsAnnotation] ||
		a.Annotations[nodev1alpha1.BootAnnotation] != b.Annotations[nodev1alpha1.BootAnnotation] {
		return true
	}
	return nodeutil.HasTaint(a, taintKey, v1.TaintEffectNoExecute) != nodeutil.HasTaint(b, taintKey, v1.TaintEffectNoExecute) ||
		nodeutil.CountTaints(a, taintKey) != nodeutil.CountTaints(b, taintKey) || nodeutil.ConditionChanged(a, b, nodev1alpha1.SystemExtensionsReadyCondition)
}

func indexLeaseByNode(obj interface{}) ([]string, error) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, nil
	}
	if _, node, err := nodev1alpha1.ParseLeaseName(lease.Name); err == nil {
		return []string{node}, nil
	}
	return nil, nil
}

func (c *Controller) leaseChanged(oldObj, newObj interface{}) {
	logger := c.logger
	lease, ok := newObj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	if lease.Name == nodev1alpha1.ControllerCanaryLease {
		if c.canary != nil && c.canary.observed(lease) {
			c.requeueAwaitingView()
		}
		return
	}
	prev, next, known, changed := c.tracker.observe(lease)
	if !known {
		if _, _, err := nodev1alpha1.ParseLeaseName(lease.Name); err != nil {
			// Said once per Lease: such a Lease belongs to no node by its
			// name, and counts only where a node's list names it.
			logger.Info("Lease name is not <extension>.<node>: it gates no node unless a node's extension list references it by name",
				"lease", klog.KObj(lease), "err", err)
		}
	}
	if old, ok := oldObj.(*coordinationv1.Lease); ok && changed && known && c.onlyMovesExpiry(prev, next, old, lease) {
		return
	}
	if old, ok := oldObj.(*coordinationv1.Lease); ok && !changed {
		// Self-registration labels change the node's list, not readiness.
		if old.Labels[nodev1alpha1.RegisterLabel] == lease.Labels[nodev1alpha1.RegisterLabel] &&
			old.Labels[nodev1alpha1.AffectsReadinessLabel] == lease.Labels[nodev1alpha1.AffectsReadinessLabel] {
			return
		}
	}
	logger.V(5).Info("Lease changed", "lease", klog.KObj(lease))
	c.enqueueLeaseNodes(lease)
}

// onlyMovesExpiry reports whether an update only renewed a Lease that was
// ready and stays ready, and the last evaluation of every node it belongs to
// found that node steady (evaluation.steadiness): then the evaluation would
// decide the same, and the expiry timer each node already holds (scheduled
// for an expiry no later than the new one) re-evaluates it in time. Whether
// a renewal can change a node is the evaluation's answer, not this
// function's. Skipping these syncs makes steady-state cost follow the rate
// of change, not the rate of renewals.
func (c *Controller) onlyMovesExpiry(prev, next leaseObservation, old, lease *coordinationv1.Lease) bool {
	if prev.released() || next.released() || prev.holder != next.holder || prev.duration != next.duration ||
		prev.reason != next.reason || prev.message != next.message || prev.observedAt.IsZero() ||
		!c.clock.Now().Before(prev.expiresAt(c.opts.RenewalGrace)) ||
		old.Labels[nodev1alpha1.RegisterLabel] != lease.Labels[nodev1alpha1.RegisterLabel] ||
		old.Labels[nodev1alpha1.AffectsReadinessLabel] != lease.Labels[nodev1alpha1.AffectsReadinessLabel] {
		return false
	}
	_, node, err := nodev1alpha1.ParseLeaseName(lease.Name)
	c.mu.Lock()
	defer c.mu.Unlock()
	// A node whose condition, adopted after a start, names an expiry the
	// start's grace hides (graceNamed) is not quiet: the renewal that ends
	// the grace changes what the condition must say (simulation seed
	// 15660107569789160911: the adopted condition named the updater
	// expired after it had renewed).
	quiet := func(n string) bool {
		st := c.nodes[n]
		return st != nil && st.steadyLeases != nil && len(st.last.graceNamed) == 0 && !c.live.Has(n)
	}
	// The nodes the Lease belongs to (leaseNodes), without building the list:
	// this runs for every renewal received.
	var refs sets.Set[string]
	if len(c.leaseRefs) > 0 {
		refs = c.leaseRefs[lease.Namespace+"/"+lease.Name]
	}
	if err != nil && len(refs) == 0 {
		return false
	}
	if err == nil && !quiet(node) {
		return false
	}
	for n := range refs {
		if !quiet(n) {
			return false
		}
	}
	return true
}

// leaseNodes returns the nodes a Lease belongs to: the node its name names,
// and the nodes that reference it under another name. Callers hold c.mu.
func (c *Controller) leaseNodes(lease *coordinationv1.Lease) []string {
	nodes := c.leaseRefs[lease.Namespace+"/"+lease.Name].UnsortedList()
	if _, node, err := nodev1alpha1.ParseLeaseName(lease.Name); err == nil {
		nodes = append(nodes, node)
	}
	return nodes
}

func (c *Controller) enqueueLeaseNodes(lease *coordinationv1.Lease) {
	c.mu.Lock()
	nodes := c.leaseNodes(lease)
	c.mu.Unlock()
	for _, n := range nodes {
		c.enqueue(n)
	}
}

// HandledEvents is how many informer notifications (Node and Lease adds,
// updates and deletes) the controller's handlers have finished. A driver that
// feeds events faster than a fake clientset's watch buffers them paces itself
// by it (test/bench).
func (c *Controller) HandledEvents() int64 { return c.handled.Load() }

// Run waits for the caches, then syncs nodes with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	logger.Info("Starting node-health controller", "leaseNamespace", c.opts.LeaseNamespace,
		"taint", c.opts.TaintKey+":"+string(c.opts.TaintEffect), "rules", len(c.opts.Rules), "dryRun", c.opts.DryRun)

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down node-health controller")
		c.queue.ShutDown()
		c.evictions.ShutDown()
		wg.Wait()
	}()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.nodesSynced, c.leasesSynced) {
		return
	}
	c.begin(ctx)
	if c.canary != nil {
		wg.Go(func() { c.canary.run(ctx) })
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	wg.Go(func() { wait.UntilWithContext(ctx, c.evictionWorker, time.Second) })
	wg.Go(func() { c.resync(ctx) })
	<-ctx.Done()
}

// resync queues every node every safetyResync (10 % jitter), on the
// controller's clock. The first comes a period after the start: the
// informers' initial lists queued every node then.
func (c *Controller) resync(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(wait.Jitter(safetyResync, 0.1)):
		}
		c.enqueueAll()
	}
}

// begin is what the controller does between its caches' sync and its first
// worker: its own view starts trusted, a full set of canary intervals from
// now, and the blast radius counts every node listed.
func (c *Controller) begin(ctx context.Context) {
	if c.canary != nil {
		c.canary.begin(c.clock.Now())
	}
	c.primeBlastRadius(ctx)
}

// vouchedUntil is the canary's horizon (canary.vouchedUntil), zero without
// a canary: Lease expiries are then judged by the clock alone.
func (c *Controller) vouchedUntil() time.Time {
	if c.canary == nil {
		return time.Time{}
	}
	return c.canary.vouchedUntil()
}

// requeueAwaitingView queues, in name order, every node waiting for the
// view's horizon to pass one of its Leases' expiries: the canary observed a
// new renewal, or the view went stale (its expiries are judged by the clock
// from then on, and held).
func (c *Controller) requeueAwaitingView() {
	c.awaitMu.Lock()
	names := sets.List(c.awaitingView)
	c.awaitingView = sets.New[string]()
	c.awaitMu.Unlock()
	for _, name := range names {
		c.queue.Add(name)
	}
}

// awaitView has the node judged again once the view's horizon passes need,
// the latest Lease expiry its evaluation could not count yet, and asks the
// canary for a renewal that vouches for it: the expiry then counts a round
// trip after it came due, not up to a canary interval later.
func (c *Controller) awaitView(ctx context.Context, name string, need time.Time) {
	c.awaitMu.Lock()
	c.awaitingView.Insert(name)
	c.awaitMu.Unlock()
	if c.canary.confirm(ctx, need) {
		// Needs that came due while this worker's renewal was in
		// flight: the first of their nodes to be judged again sends
		// the next renewal.
		c.requeueAwaitingView()
	}
	// A horizon that moved between the evaluation and the insertion
	// queued the others without this node (requeueAwaitingView).
	if !c.canary.vouchedUntil().Before(need) {
		c.queue.Add(name)
	}
}

// ownViewChanged is the canary's callback. Going stale pauses every eviction
// clock. Recovering resumes them and gives a full duration of grace to every
// Lease that was ready when the view went stale (recoverView).
func (c *Controller) ownViewChanged(ctx context.Context, stale bool, at time.Time) {
	if stale {
		c.mu.Lock()
		c.viewStale = true
		// Readiness as the evaluations before the guard judged it, on a
		// current view: a Lease past its expiry by the clock but not by the
		// horizon was ready.
		c.tracker.snapshot(expiryInstant(at, c.vouchedUntil(), false), c.opts.RenewalGrace)
		c.unsnapshotDeadMarked()
		c.mu.Unlock()
		c.metrics.OwnViewStale.Set(1)
		c.metrics.Suspensions.WithLabelValues("own-view").Inc()
		c.updateEscalationClocks(at)
		c.requeueAwaitingView()
		return
	}
	c.recoverView(at)
	c.metrics.OwnViewStale.Set(0)
	c.updateEscalationClocks(at)
	c.enqueueAll()
}

// unsnapshotDeadMarked takes out of the own view's snapshot every Lease a
// node's boot record marks dead on the renewal it still shows: the start
// grace makes such a Lease look observed at the start, but it counts as
// expired (markedDead), so it was not ready when the view went stale and
// gets no grace at the recovery (simulation seed 12555028893769159383: a
// controller that started in an outage of its writes gave the recovery's
// grace to a Lease its predecessor had judged expired, and a node whose
// extension had died in the stall stayed untainted past its expiry).
// Callers hold c.mu.
func (c *Controller) unsnapshotDeadMarked() {
	for _, st := range c.nodes {
		for _, ext := range st.exts {
			if obs, ok := c.tracker.get(ext.lease.Namespace, ext.lease.Name); ok && st.markedDead(ext.name, obs) {
				c.tracker.notReadyWhenStale(ext.lease.Namespace, ext.lease.Name)
			}
		}
	}
}

// recoverView ends the own-view guard in one step under c.mu, which every
// evaluation holds: a worker evaluating between the Lease refresh and the
// gate restart would see refreshed Leases against the old gateStart and end
// a reboot's gate without any renewal after the reboot.
//
// Leases ready when the view went stale count as observed at now. Gates
// whose taint is on the Node restart at now, keeping their scope; so does a
// bootstrap, reboot or re-creation seen during the stall and held back (it
// gates now). A node held for a failure is judged afresh by its next
// evaluation: no failure taint is ever owed.
func (c *Controller) recoverView(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.viewStale {
		c.tracker.refresh(at)
	}
	for _, st := range c.nodes {
		if !st.gated {
			continue
		}
		// The controller's own record of the gates it decided, not the
		// informer's cache: a gate decided just before the stall whose
		// taint has not reached the cache restarts too, or the grace on
		// the Leases of a previous boot would end a reboot's gate.
		decidedTaint := !st.last.suppressed
		pendingBootstrap := st.last.suppressed && st.gate.full
		if decidedTaint || pendingBootstrap {
			// The gate begins again, and so do its startup timeouts: one
			// that passed during the stall was judged on a view that may
			// have hidden the renewal.
			// A restart is no hold: a renewal in its instant may be
			// one the stalled watch held back.
			st.gate.start, st.gate.heldFromStart = at, false
			st.startupExpired = nil
			if st.gate.cause == causeStartupExpiry {
				st.gate.cause = st.gate.causeBeforeExpiry
			}
			// A gate found at start is the restart's again, whatever
			// failure the stale view showed it: the Leases are judged as
			// they were when the guard fired, and a failure that stands
			// names it again at its next evaluation (seed
			// 3916660364228779899).
			if st.gate.foundGatedInStall {
				st.gate.cause, st.gate.foundGatedInStall = causeFoundGated, false
			}
		}
	}
	c.viewStale = false
}

// ownViewStaleLocked reports whether taint additions and evictions are held
// by the own-view guard. Callers hold c.mu.
func (c *Controller) ownViewStaleLocked() bool {
	return c.canary != nil && (c.viewStale || c.canary.overdue())
}

// enqueueAll queues every node in name order: after the own-view guard
// lifts, the nodes it held past their eviction timeout come due together and
// take their turns of the eviction rate in the order they are evaluated (the
// lister's order is its map's, which differs from run to run).
func (c *Controller) enqueueAll() {
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	for _, name := range names {
		c.enqueue(name)
	}
}

// enqueue queues a node for a full evaluation. Everything but a node's own
// expiry timer queues through here.
func (c *Controller) enqueue(name string) {
	c.markDirty(name)
	c.queue.Add(name)
}

func (c *Controller) markDirty(name string) {
	c.dirtyMu.Lock()
	c.dirty.Insert(name)
	c.dirtyMu.Unlock()
}

// recheckTimer handles a node taken from the queue that nothing but its own
// expiry timer queued, and whose last evaluation found it steady: ungated,
// every extension ready, and nothing due but the expiry of its Leases. Quiet
// renewals (onlyMovesExpiry) only push those expiries later, so if every Lease
// the evaluation read is still held and unexpired, the evaluation would
// decide the same again: the timer is moved to the new earliest expiry
// instead, and nothing else runs. At steady state that turns the one
// evaluation per node per Lease duration into a few map reads. It reports
// whether the node was handled.
func (c *Controller) recheckTimer(name string) bool {
	c.dirtyMu.Lock()
	dirty := c.dirty.Has(name)
	c.dirty.Delete(name)
	c.dirtyMu.Unlock()
	if dirty {
		return false
	}
	c.mu.Lock()
	st := c.nodes[name]
	var leases []types.NamespacedName
	if st != nil {
		leases = st.steadyLeases
	}
	c.mu.Unlock()
	if len(leases) == 0 {
		return false
	}
	now := c.clock.Now()
	var next time.Time
	for _, l := range leases {
		obs, ok := c.tracker.get(l.Namespace, l.Name)
		if !ok || obs.released() || obs.observedAt.IsZero() {
			return false
		}
		exp := obs.expiresAt(c.opts.RenewalGrace)
		if !now.Before(exp) {
			return false
		}
		if next.IsZero() || exp.Before(next) {
			next = exp
		}
	}
	c.metrics.TimerRechecks.Inc()
	c.queue.AddAfter(name, next.Sub(now))
	return true
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	return queue.ProcessNext(ctx, c.queue, c.syncOrRecheck, "Syncing node failed, will retry", "node")
}

// syncOrRecheck syncs the node named key unless only its timer came due with
// nothing to recheck. A node whose sync failed is marked dirty before the
// queue retries it: its retry must be a full evaluation.
func (c *Controller) syncOrRecheck(ctx context.Context, key string) error {
	if c.recheckTimer(key) {
		return nil
	}
	start := c.clock.Now()
	err := c.syncNode(ctx, key)
	c.metrics.EvaluationsTotal.Inc()
	c.metrics.EvaluationDurations.Observe(c.clock.Since(start).Seconds())
	if err != nil {
		c.markDirty(key)
	}
	return err
}
