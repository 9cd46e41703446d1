// Package app builds the nodehealth-controller command: it turns the
// NodeHealthControllerConfiguration into the plain values of package
// nodehealth, and runs the controller behind leader election.
package app

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/nodehealth"
)

// leaderElectionQPS is the leader-election client's own budget, so that
// renewals never wait behind the controller's work traffic.
const leaderElectionQPS = 5

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

func run(ctx context.Context, rt *options.Runtime[*config.NodeHealthControllerConfiguration]) error {
	logger := klog.FromContext(ctx)
	cfg := rt.Config
	opts, err := controllerOptions(cfg)
	if err != nil {
		return err
	}
	hostname, _ := os.Hostname()
	opts.Identity = hostname + "_" + string(uuid.NewUUID())
	logger.Info("Starting with effective configuration",
		"configFile", rt.ConfigFile, "identity", opts.Identity,
		"leaseNamespace", opts.LeaseNamespace, "taint", opts.TaintKey+":"+string(opts.TaintEffect),
		"extensionRules", len(opts.Rules), "renewalGrace", opts.RenewalGrace, "registrationGrace", opts.RegistrationGrace,
		"evictionMode", opts.Eviction.Mode, "evictionTimeout", opts.Eviction.Timeout,
		"dryRun", opts.DryRun, "workers", cfg.Workers, "leaderElect", cfg.LeaderElection.LeaderElect)

	restConfig, err := options.RESTConfig(cfg.ClientConnection, "nodehealth-controller")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	metrics := nodehealth.NewMetrics(rt.Registry)

	var electionChecker *leaderelection.HealthzAdaptor
	var elector *leaderelection.LeaderElector
	if cfg.LeaderElection.LeaderElect {
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	health := func() error {
		if electionChecker != nil {
			return electionChecker.Check(nil)
		}
		return nil
	}
	serveErrs, err := options.Serve(ctx, cfg.Serving, cfg.Debugging.EnableProfiling, rt.Registry, health)
	if err != nil {
		return err
	}

	// controllers counts running controllers, so that run returns only once
	// their workers have drained: a sync cut off mid-write by the process
	// exiting is what graceful shutdown is for.
	var controllers sync.WaitGroup
	defer controllers.Wait()
	runController := func(ctx context.Context) {
		defer controllers.Done()
		if err := startController(ctx, client, opts, int(cfg.Workers), metrics); err != nil {
			logger.Error(err, "Controller failed")
		}
	}
	if !cfg.LeaderElection.LeaderElect {
		controllers.Add(1)
		go runController(ctx)
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveErrs:
			return err
		}
	}

	electionConfig := *restConfig
	electionConfig.QPS, electionConfig.Burst = leaderElectionQPS, 2*leaderElectionQPS
	electionClient, err := kubernetes.NewForConfig(&electionConfig)
	if err != nil {
		return err
	}
	le := cfg.LeaderElection
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		electionClient.CoreV1(), electionClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: opts.Identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	// The elector's own context ends on SIGTERM and on a configuration
	// change, so that leadership is released at once (ReleaseOnCancel) and the
	// other replica takes over without waiting out the lease.
	electionCtx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	released := make(chan struct{})
	rt.OnConfigChange(func(hookCtx context.Context) {
		logger.Info("Configuration changed: releasing leadership before restarting")
		stopElection()
		select {
		case <-released:
		case <-hookCtx.Done():
		}
	})
	elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            "nodehealth-controller",
		WatchDog:        electionChecker,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became the leader; starting the controller")
				controllers.Add(1)
				runController(ctx)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading")
			},
			OnNewLeader: func(identity string) {
				if identity != opts.Identity {
					logger.Info("Another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	go func() {
		defer close(released)
		elector.Run(electionCtx)
	}()
	select {
	case <-released:
		if ctx.Err() == nil && electionCtx.Err() == nil {
			// Lost leadership without being asked to stop: exit so that the
			// pod restarts with a clean state rather than running a second,
			// possibly divergent controller.
			return fmt.Errorf("lost leadership")
		}
		return nil
	case err := <-serveErrs:
		return err
	}
}

// startController builds the informers and runs the controller until ctx ends.
// Informers start only after leadership is won, so that after a failover every
// Lease counts as observed at that moment (a full duration of grace).
func startController(ctx context.Context, client kubernetes.Interface, opts nodehealth.Options, workers int, metrics *nodehealth.Metrics) error {
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(nodehealth.TransformNode))
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(opts.LeaseNamespace), informers.WithTransform(nodehealth.TransformLease))

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "nodehealth-controller"})

	c, err := nodehealth.NewController(ctx, client, nodeFactory.Core().V1().Nodes(), leaseFactory.Coordination().V1().Leases(),
		recorder, clock.RealClock{}, opts, metrics)
	if err != nil {
		return err
	}
	nodeFactory.Start(ctx.Done())
	leaseFactory.Start(ctx.Done())
	defer nodeFactory.Shutdown()
	defer leaseFactory.Shutdown()
	c.Run(ctx, workers)
	return nil
}
