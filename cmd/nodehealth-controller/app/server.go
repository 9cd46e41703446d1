// Package app builds the nodehealth-controller command: it turns the
// NodeHealthControllerConfiguration into the plain values of package
// nodehealth, and runs the controller behind leader election.
package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"nodehealth.io/nodehealth/pkg/coalesce"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/componentconfig/server"
	"nodehealth.io/nodehealth/pkg/leaderelection"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// NewCommand returns the nodehealth-controller command.
func NewCommand() *cobra.Command {
	o, err := options.New(options.NodeHealthController())
	if err != nil {
		// Defaulting an empty object cannot fail unless the scheme is
		// broken, which no user input can cause.
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	cmd := options.NewCommand(o, options.CommandInfo{
		Use:   "nodehealth-controller",
		Short: "Gates nodes on the Leases of their system extensions",
		Long: `nodehealth-controller keeps one aggregated readiness taint on every node
current from the Leases its system extensions renew: it gates new and rebooted
nodes until every required extension has renewed, re-taints a node when a
required Lease expires, and escalates to eviction, rate limited and with
blast-radius protection.

Configuration comes from --config (a NodeHealthControllerConfiguration of
config.nodehealth.io/v1alpha1); see docs/config.

"nodehealth-controller uninstall" removes every taint, annotation and condition
the controller owns from every node (see "nodehealth-controller uninstall --help").`,
	}, run)
	cmd.AddCommand(newUninstallCommand())
	return cmd
}

func run(ctx context.Context, rt *server.Runtime[*config.NodeHealthControllerConfiguration]) error {
	cfg := rt.Config
	opts, err := controllerOptions(cfg)
	if err != nil {
		return err
	}
	opts.Identity = leaderelection.NewIdentity()
	klog.FromContext(ctx).Info("Starting with effective configuration",
		"configFile", rt.ConfigFile, "identity", opts.Identity,
		"leaseNamespace", opts.LeaseNamespace, "taint", opts.TaintKey+":"+string(opts.TaintEffect),
		"extensionRules", len(opts.Rules), "renewalGrace", opts.RenewalGrace, "registrationGrace", opts.RegistrationGrace,
		"evictionMode", opts.Eviction.Mode, "evictionTimeout", opts.Eviction.Timeout,
		"dryRun", opts.DryRun, "workers", cfg.Workers, "leaderElect", cfg.LeaderElection.LeaderElect)

	restConfig, err := options.RESTConfig(cfg.ClientConnection, "nodehealth-controller")
	if err != nil {
		return err
	}
	// The Lease watch carries every renewal of every extension (500 events/s
	// at 1,000 nodes × 5): gzip on that stream costs the API server and the
	// controller CPU per event (12 % of the controller's CPU in the scale
	// benchmark's profile) to save bandwidth that in-cluster traffic does not
	// need (docs/benchmarks.md, "CPU").
	restConfig.DisableCompression = true
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	// The Lease watch gets a connection of its own whose reads are coalesced
	// (pkg/coalesce): its events then arrive in batches, which costs a
	// fraction of waking for each of them, and its delay is far inside the
	// renewal grace. Everything else, leader election and writes included,
	// keeps the shared connection without that delay.
	leaseConfig := rest.CopyConfig(restConfig)
	leaseConfig.Dial = coalesce.Dialer(leaseReadInterval)
	leaseClient, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return err
	}
	metrics := nodehealth.NewMetrics(rt.Registry)
	return leaderelection.Process{
		Name: "nodehealth-controller", Identity: opts.Identity, Election: cfg.LeaderElection,
		RESTConfig: restConfig, Client: client,
		Serving: cfg.Serving, EnableProfiling: cfg.Debugging.EnableProfiling, Registry: rt.Registry,
		OnConfigChange: rt.OnConfigChange,
		Work: func(ctx context.Context) error {
			return startController(ctx, client, leaseClient, opts, int(cfg.Workers), metrics)
		},
		WorkFailed: "Controller failed",
	}.Run(ctx)
}

// startController builds the informers and runs the controller until ctx ends.
// Informers start only after leadership is won, so that after a failover every
// Lease counts as observed at that moment (a full duration of grace).
func startController(ctx context.Context, client, leaseClient kubernetes.Interface, opts nodehealth.Options, workers int, metrics *nodehealth.Metrics) error {
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(nodeutil.TransformNode))
	// Leases have one handler, the controller's: the direct informer calls it
	// without the shared informer's two goroutine hand-offs and buffer per
	// event (less memory at 5,000 Lease events/s; docs/benchmarks.md, "The
	// direct Lease informer against a shared one").
	leases := nodehealth.NewDirectLeaseInformer(leaseClient, opts.LeaseNamespace, nodehealth.TransformLease)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "nodehealth-controller"})

	c, err := nodehealth.NewController(ctx, client, nodeFactory.Core().V1().Nodes(), leases,
		recorder, clock.RealClock{}, opts, metrics)
	if err != nil {
		return err
	}
	nodeFactory.Start(ctx.Done())
	defer nodeFactory.Shutdown()
	leasesDone := make(chan struct{})
	go func() { defer close(leasesDone); leases.Run(ctx) }()
	defer func() { <-leasesDone }()
	c.Run(ctx, workers)
	return nil
}

// leaseReadInterval is how long the Lease watch's events may wait to be read
// together: at 500 renewals/s (1,000 nodes × 5 extensions) about 50 per read.
// It delays detecting a renewal, never an expiry (expiries are timers), and
// is far inside the default 10 s renewal grace and the canary's 15 s.
const leaseReadInterval = 100 * time.Millisecond
