// Package app builds the update-operator command: it turns the
// UpdateOperatorConfiguration into the plain values of packages shadow and
// updater, and runs both controllers behind leader election.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	operatorsetup "nodehealth.io/nodehealth/internal/setup/operator"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/leaderelection"
	"nodehealth.io/nodehealth/pkg/process"
	"nodehealth.io/nodehealth/pkg/process/elected"
	"nodehealth.io/nodehealth/pkg/updater/operator"
)

// NodeNameEnv is the environment variable --node-name falls back to; the
// Deployment fills it from the downward API (spec.nodeName).
const NodeNameEnv = "NODE_NAME"

// workers per controller: every start is serialized through one queue key
// anyway; two workers let deadlines and soaks of other nodes proceed while
// one write is slow.
const workers = 2

// NewCommand returns the update-operator command.
func NewCommand() *cobra.Command {
	var nodeName string
	o, err := options.NewWithInstanceFlags(options.UpdateOperator(), func(fs *pflag.FlagSet) {
		fs.StringVar(&nodeName, "node-name", os.Getenv(NodeNameEnv),
			"The node this replica runs on; the leader updates that node last. Defaults to the "+NodeNameEnv+" environment variable; may be empty.")
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	return options.NewCommand(o, options.CommandInfo{
		Use:   "update-operator",
		Short: "Rolls Bottlerocket OS updates across nodes, gated on node readiness",
		Long: `update-operator keeps a BottlerocketShadow (updates.nodehealth.io/v1alpha1) for
every node matching managedNodeSelector and drives each node's update agent
through Idle → StagedAndPerformedUpdate → RebootedIntoUpdate →
MonitoringUpdate → Idle as the UpdatePolicy that selects the node says
(updates.nodehealth.io/v1alpha1, "kubectl get upol": target version, pause,
concurrency, windows, soak), with a deadline per state and node readiness
(SystemExtensionsReady) as the health gate after each reboot. A node no
policy selects is never started. A failure after a reboot halts its policy
until "kubectl nodehealth update resume NODE".

Configuration comes from --config (an UpdateOperatorConfiguration of
config.nodehealth.io/v1alpha1); see docs/config and docs/updater.md.`,
	}, func(ctx context.Context, rt *process.Runtime[*config.UpdateOperatorConfiguration]) error {
		return run(ctx, rt, nodeName)
	})
}

func run(ctx context.Context, rt *process.Runtime[*config.UpdateOperatorConfiguration], nodeName string) error {
	cfg := rt.Config
	opts, err := updaterOptions(cfg, nodeName)
	if err != nil {
		return err
	}
	identity := leaderelection.NewIdentity()
	klog.FromContext(ctx).Info("Starting with effective configuration", "configFile", rt.ConfigFile, "identity", identity,
		"managedNodeSelector", opts.Selector.String(), "ownNode", opts.OwnNode, "dryRun", opts.DryRun,
		"leaderElect", cfg.LeaderElection.LeaderElect)

	restConfig, err := options.RESTConfig(cfg.ClientConnection, "update-operator")
	if err != nil {
		return err
	}
	clients, err := operatorsetup.NewClients(restConfig)
	if err != nil {
		return err
	}
	metrics := operator.NewMetrics(rt.Registry)
	return elected.Process{
		Name: "update-operator", Identity: identity, Election: cfg.LeaderElection,
		RESTConfig: clients.Config, Client: clients.Kube,
		Serving: cfg.Serving, EnableProfiling: cfg.Debugging.EnableProfiling, Registry: rt.Registry,
		OnConfigChange: rt.OnConfigChange,
		Work: func(ctx context.Context) error {
			// Informers start only after leadership is won (operatorsetup.New).
			op, err := operatorsetup.New(ctx, clients, operatorsetup.Config{Options: opts, Metrics: metrics})
			if err != nil {
				return err
			}
			op.Run(ctx, workers)
			return nil
		},
		WorkFailed: "Update operator failed",
	}.Run(ctx)
}
