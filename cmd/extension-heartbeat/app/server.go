// Package app builds the extension-heartbeat command: options, validation
// and the serving shell. The Lease renewal itself is wired in by the
// extensions issue (library nodehealth.io/heartbeat).
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/validation"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
)

// NodeNameEnv is the environment variable --node-name falls back to; the
// DaemonSet fills it from the downward API (spec.nodeName).
const NodeNameEnv = "NODE_NAME"

// Instance holds the values that differ per node and therefore stay flags
// (one ConfigMap serves every node).
type Instance struct {
	NodeName string
}

// NewCommand returns the extension-heartbeat command.
func NewCommand() *cobra.Command {
	instance := &Instance{}
	o, err := options.NewWithInstanceFlags(options.ExtensionHeartbeat(), func(fs *pflag.FlagSet) {
		fs.StringVar(&instance.NodeName, "node-name", os.Getenv(NodeNameEnv),
			"The name of the node this instance runs on. Defaults to the "+NodeNameEnv+" environment variable.")
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	return options.NewCommand(o, options.CommandInfo{
		Use:   "extension-heartbeat",
		Short: "Renews a system extension's Lease while a local health probe succeeds",
		Long: `extension-heartbeat runs next to a system extension (kube-proxy, a CNI or CSI
node plugin, a device plugin...) and renews the Lease <extension>.<node> while
the extension's local health probe (http, https, tcp, grpc or file) succeeds,
so that the node-health controller keeps the node ungated.

Configuration comes from --config (an ExtensionHeartbeatConfiguration of
config.nodehealth.io/v1alpha1); the node name from --node-name or NODE_NAME.`,
	}, func(ctx context.Context, rt *options.Runtime[*config.ExtensionHeartbeatConfiguration]) error {
		return run(ctx, rt, instance)
	})
}

func run(ctx context.Context, rt *options.Runtime[*config.ExtensionHeartbeatConfiguration], instance *Instance) error {
	cfg := rt.Config
	if err := validation.ValidateNodeName(instance.NodeName, cfg.ExtensionName); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting with effective configuration",
		"configFile", rt.ConfigFile,
		"node", instance.NodeName,
		"extension", cfg.ExtensionName,
		"lease", cfg.Lease.Namespace+"/"+cfg.ExtensionName+"."+instance.NodeName,
		"leaseDuration", cfg.Lease.Duration.Duration,
		"renewInterval", cfg.Lease.RenewInterval.Duration,
		"probe", probeKind(&cfg.Probe),
		"register", cfg.Register,
	)
	errs, err := options.Serve(ctx, cfg.Serving, cfg.Debugging.EnableProfiling, rt.Registry, nil)
	if err != nil {
		return err
	}
	// No shutdown hook for configuration changes: a restart must not
	// release the Lease, or one ConfigMap edit would gate every node at
	// once (DESIGN §6). On SIGTERM, context.Cause(ctx) is
	// options.ErrTerminated and the renewer will release the Lease.
	logger.Info("Lease renewal is not wired in yet; serving health and metrics only")
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

func probeKind(p *config.ProbeConfiguration) string {
	switch {
	case p.HTTP != nil:
		return "http " + p.HTTP.URL
	case p.TCP != nil:
		return "tcp " + p.TCP.Address
	case p.GRPC != nil:
		return "grpc " + p.GRPC.Address
	case p.File != nil:
		return "file " + p.File.Path
	}
	return "none"
}
