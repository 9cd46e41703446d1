// Package elected runs a leader-elected component's process (the node-health
// controller, the update operator): serving, the election and the work, in
// the order a graceful shutdown needs. It sits above package leaderelection
// (the election alone) and package process (the runtime every binary shares),
// so that neither depends on the other.
package elected

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/leaderelection"
	"nodehealth.io/nodehealth/pkg/process"
	"nodehealth.io/nodehealth/pkg/process/delegated"
)

// Process is the process of a leader-elected component (the node-health
// controller, the update operator): everything around its work that the two
// would otherwise each wire themselves.
type Process struct {
	// Name names the component: the election, the leading gauge.
	Name string
	// Identity is this replica's holder identity (leaderelection.NewIdentity).
	Identity string
	// Election is the component's leaderElection configuration: without
	// leaderElect the work runs as the only replica, as long as the process.
	Election componentbaseconfig.LeaderElectionConfiguration
	// RESTConfig is what the election's own client is made from.
	RESTConfig *rest.Config
	// Client asks the API server about scrapers when metrics are Delegated.
	Client kubernetes.Interface
	// Serving, EnableProfiling and Registry are what process.Serve serves.
	Serving         config.ServingConfiguration
	EnableProfiling bool
	Registry        *prometheus.Registry
	// OnConfigChange registers a hook to run before a restart for a changed
	// configuration (process.Runtime.OnConfigChange).
	OnConfigChange func(hook func(ctx context.Context))
	// Work runs the component until its context ends; an error it returns
	// is logged with WorkFailed and ends the process.
	Work       func(ctx context.Context) error
	WorkFailed string
}

// Run serves health and metrics and runs the work, behind the election when
// it is enabled, until ctx ends (SIGTERM, a changed configuration), the work
// returns, serving fails or the lease is lost (leaderelection.ErrLostLeadership). A changed
// configuration first releases the leadership, so that the other replica
// takes over without waiting out the lease. Run returns only once the work
// has returned: a sync cut off mid-write by the process exiting is what
// graceful shutdown is for.
func (p Process) Run(ctx context.Context) error {
	leading := leaderelection.NewLeadingGauge(p.Registry, p.Name)
	elector, err := p.newElector(ctx, leading)
	if err != nil {
		return err
	}
	health := func() error { return nil }
	if elector != nil {
		health = elector.Check
	}
	serveOpts, err := delegated.ServeOptions(p.Serving, p.Client)
	if err != nil {
		return err
	}
	serveErrs, err := process.Serve(ctx, p.Serving, p.EnableProfiling, p.Registry, health, serveOpts...)
	if err != nil {
		return err
	}
	workCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := p.startWork(workCtx, elector, leading)
	select {
	case err := <-done:
		return err
	case err := <-serveErrs:
		stop()
		<-done
		return err
	}
}

// newElector builds the elector when the election is enabled (nil when it is
// not), and has a changed configuration release the leadership first.
func (p Process) newElector(ctx context.Context, leading prometheus.Gauge) (*leaderelection.Elector, error) {
	le := p.Election
	if !le.LeaderElect {
		return nil, nil
	}
	elector, err := leaderelection.New(p.RESTConfig, leaderelection.Config{
		Name:          p.Name,
		Identity:      p.Identity,
		ResourceLock:  le.ResourceLock,
		Namespace:     le.ResourceNamespace,
		LockName:      le.ResourceName,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		Leading:       leading,
	})
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	p.OnConfigChange(func(hookCtx context.Context) {
		logger.Info("Configuration changed: releasing leadership before restarting")
		elector.Release(hookCtx)
	})
	return elector, nil
}

// startWork runs the work in the background, behind the elector if there is
// one, and returns the channel its end is sent on.
func (p Process) startWork(ctx context.Context, elector *leaderelection.Elector, leading prometheus.Gauge) <-chan error {
	logger := klog.FromContext(ctx)
	work := func(ctx context.Context) {
		if err := p.Work(ctx); err != nil {
			logger.Error(err, p.WorkFailed)
		}
	}
	done := make(chan error, 1)
	if elector == nil {
		// The only replica: it runs the work as long as it runs.
		go func() {
			leading.Set(1)
			work(ctx)
			leading.Set(0)
			done <- nil
		}()
		return done
	}
	// The end of ctx makes the elector stop the work, wait for it, then
	// release the lease.
	go func() { done <- elector.Run(ctx, work) }()
	return done
}
