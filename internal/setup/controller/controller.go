// Package controller owns how the node-health controller is wired: its two
// connections to the API server, its informers, its event recorder and the
// controller itself. cmd/nodehealth-controller, the in-process test starter,
// the per-event benchmark (test/bench) and pkg/nodehealth's simulation all
// build the controller here, so that what the tests run and measure is what
// users run. The simulation brings a fake API server, a simulated clock, an
// event recorder and queues of its own (Config.Clock, Config.Queues,
// Config.Recorder), adds its reference model's handlers to the informers
// (NodeInformer, LeaseInformer), and runs this Run, whose workers wait in
// those queues for its driver.
package controller

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"nodehealth.io/nodehealth/pkg/coalesce"
	"nodehealth.io/nodehealth/pkg/nodehealth"
)

// EventSource is the component the controller's Events name.
const EventSource = "nodehealth-controller"

// LeaseReadInterval is how long the Lease watch's events may wait to be read
// together: at 500 renewals/s (1,000 nodes × 5 extensions) about 50 per read.
// It delays detecting a renewal, never an expiry (expiries are timers), and
// is far inside the default 10 s renewal grace and the canary's 15 s.
const LeaseReadInterval = 100 * time.Millisecond

// Clients are the controller's connections to the API server.
type Clients struct {
	// Config is Client's configuration: leader election built from it
	// shares Client's connection.
	Config *rest.Config
	// Client carries everything but the Lease watch: the Node informer,
	// every write, Events and leader election.
	Client kubernetes.Interface
	// Leases carries the Lease watch alone.
	Leases kubernetes.Interface
	// NodeWatch, when set, carries the Node informer instead of Client.
	// The binary leaves it nil; the simulation holds the controller's
	// requests at a gate that its informers' lists and watches must not
	// wait at.
	NodeWatch kubernetes.Interface
}

// NewClients opens the controller's two connections from config, which it
// does not modify.
func NewClients(config *rest.Config) (Clients, error) {
	config = rest.CopyConfig(config)
	// The Lease watch carries every renewal of every extension (500 events/s
	// at 1,000 nodes × 5): gzip on that stream costs the API server and the
	// controller CPU per event (12 % of the controller's CPU in the scale
	// benchmark's profile) to save bandwidth that in-cluster traffic does not
	// need (docs/benchmarks.md, "CPU").
	config.DisableCompression = true
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return Clients{}, err
	}
	// The Lease watch gets a connection of its own whose reads are coalesced
	// (pkg/coalesce): its events then arrive in batches, which costs a
	// fraction of waking for each of them, and its delay is far inside the
	// renewal grace. Everything else, leader election and writes included,
	// keeps the shared connection without that delay.
	leaseConfig := rest.CopyConfig(config)
	leaseConfig.Dial = coalesce.Dialer(LeaseReadInterval)
	leases, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Config: config, Client: client, Leases: leases}, nil
}

// Config is what a caller chooses; everything else is wired one way.
type Config struct {
	Options nodehealth.Options
	// Metrics are registered by the caller; nil keeps them unregistered.
	Metrics *nodehealth.Metrics
	// Clock is the controller's clock; nil is the real one.
	Clock clock.WithTicker
	// NodeSelector, a label selector, limits the nodes the controller sees
	// (tests sharing a control plane); empty is every node.
	NodeSelector string
	// Queues builds the controller's work queues; nil builds the
	// production ones.
	Queues nodehealth.QueueFactory
	// Recorder records the controller's Events; nil records them to the
	// API server through Clients.Client.
	Recorder record.EventRecorder
}

// Controller is the node-health controller with its informers and event
// broadcaster.
type Controller struct {
	nodes       informers.SharedInformerFactory
	nodesSynced func() bool
	leases      *nodehealth.DirectLeaseInformer
	broadcaster record.EventBroadcaster
	controller  *nodehealth.Controller
}

// New wires the controller. Nothing runs until Run: informers start only
// then (after leadership is won, in the binary), so that after a failover
// every Lease counts as observed at that moment (a full duration of grace).
// ctx carries the logger of the controller and of its Events.
func New(ctx context.Context, clients Clients, cfg Config) (*Controller, error) {
	nodeWatch := clients.NodeWatch
	if nodeWatch == nil {
		nodeWatch = clients.Client
	}
	nodes := nodehealth.NewNodeInformerFactory(nodeWatch, cfg.NodeSelector)
	// The direct informer calls the controller's Lease handler without the
	// shared informer's two goroutine hand-offs and buffer per event (less
	// memory at 5,000 Lease events/s; docs/benchmarks.md, "The direct Lease
	// informer against a shared one").
	leases := nodehealth.NewDirectLeaseInformer(clients.Leases, cfg.Options.LeaseNamespace, nodehealth.TransformLease)

	recorder, broadcaster := cfg.Recorder, record.EventBroadcaster(nil)
	if recorder == nil {
		broadcaster = record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartStructuredLogging(3)
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Client.CoreV1().Events("")})
		recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventSource})
	}

	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	nodeInformer := nodes.Core().V1().Nodes()
	c, err := nodehealth.NewController(ctx, nodehealth.Config{Client: clients.Client, Nodes: nodeInformer, Leases: leases,
		Recorder: recorder, Clock: clk, Options: cfg.Options, Metrics: cfg.Metrics, Queues: cfg.Queues})
	if err != nil {
		if broadcaster != nil {
			broadcaster.Shutdown()
		}
		return nil, err
	}
	return &Controller{nodes: nodes, nodesSynced: nodeInformer.Informer().HasSynced, leases: leases,
		broadcaster: broadcaster, controller: c}, nil
}

// Run starts the informers and runs the controller with workers until ctx
// ends, and returns once everything it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	if c.broadcaster != nil {
		defer c.broadcaster.Shutdown()
	}
	c.nodes.Start(ctx.Done())
	defer c.nodes.Shutdown()
	leasesDone := make(chan struct{})
	go func() { defer close(leasesDone); c.leases.Run(ctx) }()
	defer func() { <-leasesDone }()
	c.controller.Run(ctx, workers)
}

// HandledEvents is how many Node and Lease notifications the controller has
// handled (nodehealth.Controller.HandledEvents).
func (c *Controller) HandledEvents() int64 { return c.controller.HandledEvents() }

// NodeInformer is the controller's Node informer; handlers added before Run
// see what the controller sees.
func (c *Controller) NodeInformer() cache.SharedIndexInformer {
	return c.nodes.Core().V1().Nodes().Informer()
}

// LeaseInformer is the controller's Lease informer; handlers added before
// Run are called after the controller's, on the same goroutine.
func (c *Controller) LeaseInformer() *nodehealth.DirectLeaseInformer { return c.leases }

// HasSynced reports whether both informers have listed everything.
func (c *Controller) HasSynced() bool { return c.nodesSynced() && c.leases.HasSynced() }
