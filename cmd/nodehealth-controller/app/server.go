// Package app builds the nodehealth-controller command: options, validation
// and the serving shell. The controller itself is wired in by the controller
// issue; until then the binary validates its configuration, serves /healthz
// and /metrics, and waits for SIGTERM.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
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
	return options.NewCommand(o, options.CommandInfo{
		Use:   "nodehealth-controller",
		Short: "Gates nodes on the Leases of their system extensions",
		Long: `nodehealth-controller keeps one aggregated readiness taint on every node
current from the Leases its system extensions renew: it gates new and rebooted
nodes until every required extension has renewed, re-taints a node when a
required Lease expires, and escalates to eviction, rate limited and with
blast-radius protection.

Configuration comes from --config (a NodeHealthControllerConfiguration of
config.nodehealth.io/v1alpha1); see docs/config.`,
	}, run)
}

func run(ctx context.Context, rt *options.Runtime[*config.NodeHealthControllerConfiguration]) error {
	logger := klog.FromContext(ctx)
	cfg := rt.Config
	logger.Info("Starting with effective configuration",
		"configFile", rt.ConfigFile,
		"leaseNamespace", cfg.LeaseNamespace,
		"taint", cfg.Taint.Key+":"+string(cfg.Taint.Effect),
		"extensionRules", len(cfg.ExtensionRules),
		"renewalGrace", cfg.RenewalGrace.Duration,
		"registrationGrace", cfg.RegistrationGrace.Duration,
		"evictionMode", cfg.Eviction.Mode,
		"evictionTimeout", cfg.Eviction.Timeout.Duration,
		"dryRun", cfg.DryRun,
		"workers", cfg.Workers,
		"leaderElect", cfg.LeaderElection.LeaderElect,
	)
	if logger.V(2).Enabled() {
		if data, err := options.WriteConfig(cfg); err == nil {
			logger.V(2).Info("Effective configuration", "config", string(data))
		}
	}
	errs, err := options.Serve(ctx, cfg.Serving, cfg.Debugging.EnableProfiling, rt.Registry, nil)
	if err != nil {
		return err
	}
	// The controller itself (informers, leader election, taints) arrives
	// with the controller issue; it will register its leadership release
	// with rt.OnConfigChange.
	logger.Info("Node-health controller logic is not wired in yet; serving health and metrics only")
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
