// Package app builds the extension-heartbeat command: it turns the
// ExtensionHeartbeatConfiguration into a probe (package probe) and a Lease
// renewer (library nodehealth.io/heartbeat), serves /healthz and /metrics, and
// decides on exit whether to release the Lease.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/prommetrics"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/validation"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/probe"
	"nodehealth.io/nodehealth/pkg/process"
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

When the probe fails failureThreshold times in a row, and on SIGTERM, it
releases the Lease (empty holderIdentity, nodehealth.io/reason and
nodehealth.io/message) so the node is gated at once; it re-acquires the Lease
once the probe succeeds again. A restart to apply a changed configuration file
leaves the Lease held.

Configuration comes from --config (an ExtensionHeartbeatConfiguration of
config.nodehealth.io/v1alpha1); the node name from --node-name or NODE_NAME,
the holder identity from POD_NAME (default: the host name).`,
	}, func(ctx context.Context, rt *process.Runtime[*config.ExtensionHeartbeatConfiguration]) error {
		return run(ctx, rt, instance)
	})
}

func run(ctx context.Context, rt *process.Runtime[*config.ExtensionHeartbeatConfiguration], instance *Instance) error {
	cfg := rt.Config
	if err := validation.ValidateNodeName(instance.NodeName, cfg.ExtensionName); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	probeSpec := ProbeSpec(cfg.Probe)
	if what := fullBuildNeeded(probeSpec.GRPC != nil, cfg.Debugging.EnableProfiling); what != "" {
		return execFullBuild(logger, what)
	}
	holder := process.PodHolderIdentity("extension-heartbeat")
	renewer, err := newRenewer(rt, instance.NodeName, holder, probeSpec)
	if err != nil {
		return err
	}
	logEffectiveConfiguration(logger, rt, instance.NodeName, holder, probeSpec, renewer)
	serveErrs, err := process.Serve(ctx, cfg.Serving, cfg.Debugging.EnableProfiling, rt.Registry, renewer.Healthz)
	if err != nil {
		return err
	}

	// No OnConfigChange hook: a restart for a changed configuration file
	// leaves the Lease held (docs/heartbeat.md). The new process renews it well
	// within its duration, whereas releasing would gate every node at once
	// when one ConfigMap edit reaches them all.
	workers := process.NewWorkers(ctx)
	workers.Go(func(ctx context.Context) { _ = renewer.Run(ctx) })
	if serveErr := workers.RunUntilStopped(ctx, serveErrs); serveErr != nil {
		// Failing to serve is a crash, not a shutdown: the pod restarts and
		// renews the Lease before it expires.
		return serveErr
	}
	releaseOnExit(ctx, renewer)
	return nil
}

// newRenewer builds the Lease renewer the configuration describes: its probe,
// its lean client and its metrics.
func newRenewer(rt *process.Runtime[*config.ExtensionHeartbeatConfiguration], nodeName, holder string, probeSpec probe.Spec) (*heartbeat.Renewer, error) {
	cfg := rt.Config
	probeFunc, err := probe.New(probeSpec)
	if err != nil {
		return nil, err
	}
	restConfig, err := options.RESTConfig(cfg.ClientConnection, "extension-heartbeat")
	if err != nil {
		return nil, err
	}
	// The lean client: only the Lease and SelfSubjectReview types are
	// linked, not client-go's clientset of every API group (issue 12).
	client, err := heartbeat.NewClient(restConfig)
	if err != nil {
		return nil, err
	}
	metrics, err := prommetrics.New(rt.Registry, cfg.ExtensionName)
	if err != nil {
		return nil, fmt.Errorf("registering the heartbeat metrics: %w", err)
	}
	return heartbeat.New(client, heartbeat.Options{
		Namespace:        cfg.Lease.Namespace,
		NodeName:         nodeName,
		Extension:        cfg.ExtensionName,
		Holder:           holder,
		LeaseDuration:    cfg.Lease.Duration.Duration,
		RenewInterval:    cfg.Lease.RenewInterval.Duration,
		Probe:            heartbeat.Probe(probeFunc),
		ProbePeriod:      cfg.Probe.Period.Duration,
		ProbeTimeout:     cfg.Probe.Timeout.Duration,
		FailureThreshold: int(cfg.Probe.FailureThreshold),
		SuccessThreshold: int(cfg.Probe.SuccessThreshold),
		Register:         cfg.Register,
		AffectsReadiness: &cfg.AffectsReadiness,
		Metrics:          metrics,
	})
}

func logEffectiveConfiguration(logger klog.Logger, rt *process.Runtime[*config.ExtensionHeartbeatConfiguration], nodeName, holder string, probeSpec probe.Spec, renewer *heartbeat.Renewer) {
	cfg := rt.Config
	namespace, lease := renewer.LeaseName()
	logger.Info("Starting with effective configuration",
		"configFile", rt.ConfigFile,
		"node", nodeName,
		"holder", holder,
		"lease", namespace+"/"+lease,
		"leaseDuration", cfg.Lease.Duration.Duration,
		"renewInterval", cfg.Lease.RenewInterval.Duration,
		"probe", probeSpec.String(),
		"probePeriod", cfg.Probe.Period.Duration,
		"probeTimeout", cfg.Probe.Timeout.Duration,
		"failureThreshold", cfg.Probe.FailureThreshold,
		"successThreshold", cfg.Probe.SuccessThreshold,
		"register", cfg.Register,
		"affectsReadiness", cfg.AffectsReadiness,
	)
}

// releaseOnExit releases the Lease when the run ended for a reason that
// should gate the node at once (ReleaseOnExit), bounded by ReleaseTimeout.
// A failed release still exits 0: the shutdown itself was requested, and the
// Lease expires after its duration instead.
func releaseOnExit(ctx context.Context, renewer *heartbeat.Renewer) {
	logger := klog.FromContext(ctx)
	cause := context.Cause(ctx)
	release, reason, message := ReleaseOnExit(cause)
	if !release {
		logger.Info("Leaving the Lease held for the next process", "cause", cause)
		return
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if err := renewer.Release(releaseCtx, reason, message); err != nil {
		logger.Error(err, "Releasing the Lease on shutdown failed; it will expire instead")
		return
	}
	logger.Info("Released the Lease", "reason", reason)
}

// ProbeSpec converts the configuration's probe into the probe package's plain
// options; package probe does not import the configuration API.
func ProbeSpec(c config.ProbeConfiguration) probe.Spec {
	var s probe.Spec
	switch {
	case c.HTTP != nil:
		s.HTTP = &probe.HTTPOptions{URL: c.HTTP.URL, CAFile: c.HTTP.CAFile, InsecureSkipTLSVerify: c.HTTP.InsecureSkipTLSVerify}
	case c.TCP != nil:
		s.TCP = &probe.TCPOptions{Address: c.TCP.Address}
	case c.GRPC != nil:
		s.GRPC = &probe.GRPCOptions{Address: c.GRPC.Address, Service: c.GRPC.Service}
	case c.File != nil:
		s.File = &probe.FileOptions{Path: c.File.Path, MaxAge: c.File.MaxAge.Duration}
	}
	return s
}

// ReleaseTimeout bounds the release on shutdown; it must fit well within the
// pod's terminationGracePeriodSeconds (30 s by default).
const ReleaseTimeout = 10 * time.Second

// ReleaseOnExit decides what the end of the run context means for the Lease:
// SIGTERM (a pod deletion, a node drain) releases it with reason Terminating,
// so the node is gated at once instead of after the Lease expires; a restart
// for a changed configuration file does not release it (docs/heartbeat.md).
func ReleaseOnExit(cause error) (release bool, reason, message string) {
	if errors.Is(cause, process.ErrTerminated) {
		return true, heartbeat.ReasonTerminating, "extension-heartbeat received SIGTERM and stopped renewing"
	}
	return false, "", ""
}
