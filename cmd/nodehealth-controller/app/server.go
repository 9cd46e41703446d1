// Package app builds the nodehealth-controller command: it turns the
// NodeHealthControllerConfiguration into the plain values of package
// nodehealth, and runs the controller behind leader election.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	controllersetup "nodehealth.io/nodehealth/internal/setup/controller"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/leaderelection"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/process"
	"nodehealth.io/nodehealth/pkg/process/elected"
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

func run(ctx context.Context, rt *process.Runtime[*config.NodeHealthControllerConfiguration]) error {
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
	clients, err := controllersetup.NewClients(restConfig)
	if err != nil {
		return err
	}
	metrics := nodehealth.NewMetrics(rt.Registry)
	return elected.Process{
		Name: "nodehealth-controller", Identity: opts.Identity, Election: cfg.LeaderElection,
		RESTConfig: clients.Config, Client: clients.Client,
		Serving: cfg.Serving, EnableProfiling: cfg.Debugging.EnableProfiling, Registry: rt.Registry,
		OnConfigChange: rt.OnConfigChange,
		Work: func(ctx context.Context) error {
			// Informers start only after leadership is won (controllersetup.New).
			c, err := controllersetup.New(ctx, clients, controllersetup.Config{Options: opts, Metrics: metrics})
			if err != nil {
				return err
			}
			c.Run(ctx, int(cfg.Workers))
			return nil
		},
		WorkFailed: "Controller failed",
	}.Run(ctx)
}
