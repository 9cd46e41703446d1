// Package operator owns how the update operator is wired: its clients, its
// informers, its event recorder and its two controllers (the shadow
// controller, which keeps one BottlerocketShadow per managed node, and the
// update controller, which drives the rollout). cmd/update-operator, the
// tests that run the operator in-process and pkg/updater/operator's
// simulation all build it here. The simulation brings a fake API server, a
// simulated clock, an event recorder and queues of its own (Config.Clock,
// Config.Recorder, Options.Queue and StartQueue, Config.ShadowQueue), tracks
// the informers setup built (Informers), and runs this Run, whose workers
// wait in those queues for its driver.
package operator

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"nodehealth.io/client-go/clientset/versioned"
	nodehealthscheme "nodehealth.io/client-go/clientset/versioned/scheme"
	"nodehealth.io/client-go/informers/externalversions"
	drainclient "nodehealth.io/nodehealth/pkg/drain/clientset"
	"nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// EventSource is the component the operator's Events name.
const EventSource = "update-operator"

// Clients are the operator's connections to the API server.
type Clients struct {
	// Config is Kube's configuration: leader election built from it shares
	// Kube's connection.
	Config *rest.Config
	// Kube reads Nodes, patches their lifecycle conditions and writes
	// Events.
	Kube kubernetes.Interface
	// Updates reads and writes BottlerocketShadows and UpdatePolicies.
	Updates versioned.Interface
	// Starts is Updates with a rate limit of its own, for the start pass
	// and the successes that free its slots (operator.Options.StartClient);
	// nil: Updates.
	Starts versioned.Interface
}

// NewClients opens the operator's clients from config, which it does not
// modify.
func NewClients(config *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return Clients{}, err
	}
	// Custom resources are served as JSON only: clientConnection.contentType
	// (protobuf by default) applies to the core client alone.
	updatesConfig := rest.CopyConfig(config)
	updatesConfig.ContentType, updatesConfig.AcceptContentTypes = "application/json", "application/json"
	updates, err := versioned.NewForConfig(updatesConfig)
	if err != nil {
		return Clients{}, err
	}
	// A second client from the same configuration shares the connection
	// (client-go caches transports by configuration) but gets its own
	// token bucket: at most clientConnection.qps more requests a second,
	// and in practice a few per node handed off (docs/updater.md).
	starts, err := versioned.NewForConfig(updatesConfig)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Config: config, Kube: kube, Updates: updates, Starts: starts}, nil
}

// Config is what a caller chooses; everything else is wired one way.
type Config struct {
	Options operator.Options
	// Metrics are registered by the caller; nil keeps them unregistered.
	Metrics *operator.Metrics
	// Clock is the update controller's clock; nil is the real one.
	Clock clock.WithTicker
	// Recorder receives the Events; nil records them to the API server.
	Recorder record.EventRecorder
	// ShadowQueue is the shadow controller's work queue; nil builds the
	// production one.
	ShadowQueue workqueue.TypedRateLimitingInterface[string]
}

// Operator is the update operator: both controllers with their informers.
type Operator struct {
	nodes   informers.SharedInformerFactory
	updates externalversions.SharedInformerFactory
	// jobs watches the hooks' Jobs: their namespace only, their label
	// only (nil without hooks).
	jobs        informers.SharedInformerFactory
	broadcaster record.EventBroadcaster
	shadows     *shadow.Controller
	controller  *operator.Controller
}

// New wires the operator. Nothing runs until Run: informers start only then
// (after leadership is won, in the binary).
func New(ctx context.Context, clients Clients, cfg Config) (*Operator, error) {
	o := &Operator{
		nodes:   operator.NewNodeInformerFactory(clients.Kube),
		updates: externalversions.NewSharedInformerFactory(clients.Updates, 0),
	}
	recorder := cfg.Recorder
	if recorder == nil {
		var err error
		if recorder, err = o.recordToAPIServer(ctx, clients.Kube); err != nil {
			return nil, err
		}
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	opts := cfg.Options
	if opts.Drain.Client == nil {
		// The drain lists one node's pods at a time (a field selector) and
		// evicts them: no cluster-wide pod cache.
		opts.Drain.Client = drainclient.New(clients.Kube.CoreV1(), clients.Kube.PolicyV1())
	}
	if opts.Nodes == nil {
		opts.Nodes = clients.Kube.CoreV1().Nodes()
	}
	if opts.Pods == nil {
		opts.Pods = clients.Kube.CoreV1()
	}
	if opts.StartClient == nil {
		opts.StartClient = clients.Starts
	}
	if opts.Hooks.Namespace != "" && opts.Hooks.Informer == nil {
		// The operator's RBAC covers Jobs in the hooks' namespace alone.
		o.jobs = operator.NewHookJobInformerFactory(clients.Kube, opts.Hooks.Namespace)
		opts.Hooks.Informer = o.jobs.Batch().V1().Jobs()
	}
	if opts.Hooks.Jobs == nil {
		opts.Hooks.Jobs = clients.Kube.BatchV1()
	}
	nodes := o.nodes.Core().V1().Nodes()
	shadows := o.updates.Updates().V1alpha1().BottlerocketShadows()
	var err error
	o.shadows, err = shadow.NewController(clients.Updates, nodes, shadows, recorder,
		shadow.Options{Selector: cfg.Options.Selector, DryRun: cfg.Options.DryRun, Queue: cfg.ShadowQueue})
	if err == nil {
		o.controller, err = operator.NewController(operator.Config{Client: clients.Updates, Nodes: nodes, Shadows: shadows,
			Policies: o.updates.Updates().V1alpha1().UpdatePolicies(), Recorder: recorder, Clock: clk, Options: opts, Metrics: cfg.Metrics})
	}
	if err != nil {
		o.shutdownBroadcaster()
		return nil, err
	}
	return o, nil
}

// recordToAPIServer starts the broadcaster of the operator's Events, which
// go to shadows and Nodes: its scheme knows both kinds.
func (o *Operator) recordToAPIServer(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, error) {
	eventScheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(eventScheme); err != nil {
		return nil, err
	}
	if err := nodehealthscheme.AddToScheme(eventScheme); err != nil {
		return nil, err
	}
	o.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	o.broadcaster.StartStructuredLogging(3)
	o.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return o.broadcaster.NewRecorder(eventScheme, v1.EventSource{Component: EventSource}), nil
}

func (o *Operator) shutdownBroadcaster() {
	if o.broadcaster != nil {
		o.broadcaster.Shutdown()
	}
}

// Informers are the operator's informers. The Node and the shadow informer
// carry a handler of each controller, the policy and the Job informer one of
// the update controller.
type Informers struct {
	Nodes, Shadows, Policies cache.SharedIndexInformer
	// Jobs watches the hooks' Jobs; nil without hooks.
	Jobs cache.SharedIndexInformer
}

// Informers returns the operator's informers; handlers added before Run see
// what the controllers see.
func (o *Operator) Informers() Informers {
	i := Informers{
		Nodes:    o.nodes.Core().V1().Nodes().Informer(),
		Shadows:  o.updates.Updates().V1alpha1().BottlerocketShadows().Informer(),
		Policies: o.updates.Updates().V1alpha1().UpdatePolicies().Informer(),
	}
	if o.jobs != nil {
		i.Jobs = o.jobs.Batch().V1().Jobs().Informer()
	}
	return i
}

// HandledEvents is how many notifications both controllers' handlers are
// done with.
func (o *Operator) HandledEvents() int64 {
	return o.controller.HandledEvents() + o.shadows.HandledEvents()
}

// Run starts the informers and runs both controllers with workers each
// until ctx ends, and returns once everything it started has stopped. The
// update controller confirms its counts with a consistent LIST before its
// first start, so a cache filled a moment ago cannot overshoot the limits.
func (o *Operator) Run(ctx context.Context, workers int) {
	defer o.shutdownBroadcaster()
	o.nodes.Start(ctx.Done())
	o.updates.Start(ctx.Done())
	defer o.nodes.Shutdown()
	defer o.updates.Shutdown()
	if o.jobs != nil {
		o.jobs.Start(ctx.Done())
		defer o.jobs.Shutdown()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.shadows.Run(ctx, workers)
	}()
	o.controller.Run(ctx, workers)
	<-done
}
