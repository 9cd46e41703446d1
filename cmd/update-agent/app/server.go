// Package app builds the update-agent command: it wires the
// UpdateAgentConfiguration into the agent (package pkg/updater/agent), its
// Bottlerocket API client, its lean API clients and its Lease renewer, serves
// /healthz and /metrics, and on SIGTERM during an update releases the Lease
// with reason Updating.
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
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/prommetrics"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/validation"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/process"
	"nodehealth.io/nodehealth/pkg/updater/agent"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

// NodeNameEnv is the environment variable --node-name falls back to; the
// DaemonSet fills it from the downward API (spec.nodeName).
const NodeNameEnv = "NODE_NAME"

// Instance holds the values that differ per node and therefore stay flags.
type Instance struct {
	NodeName string
}

// NewCommand returns the update-agent command.
func NewCommand() *cobra.Command {
	instance := &Instance{}
	o, err := options.NewWithInstanceFlags(options.UpdateAgent(), func(fs *pflag.FlagSet) {
		fs.StringVar(&instance.NodeName, "node-name", os.Getenv(NodeNameEnv),
			"The name of the node this agent runs on (its BottlerocketShadow has that name). Defaults to the "+NodeNameEnv+" environment variable.")
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	return options.NewCommand(o, options.CommandInfo{
		Use:   "update-agent",
		Short: "Updates one Bottlerocket node as its BottlerocketShadow asks",
		Long: `update-agent runs on every Bottlerocket node the update operator manages (a
DaemonSet). It reports the node's running and offered OS versions in the
status of the node's BottlerocketShadow and carries out the step the
operator asks for in its spec: stage and activate the update while the node
serves; release its Lease (bottlerocket-updater.<node>, reason Updating) so
the node-health controller taints the node, wait for the operator to drain it
(the shadow's updates.nodehealth.io/drained annotation carrying the node's
bootID) and reboot; report the new version after the boot. It holds no pod
permissions.

It talks to Bottlerocket's API over its Unix socket (apiSocketPath, default
/run/api.sock). It never cordons and never writes anything of another node.
It may be killed at any step: the state lives in the shadow and in
Bottlerocket, and a node never boots twice into one update.

Configuration comes from --config (an UpdateAgentConfiguration of
config.nodehealth.io/v1alpha1); the node name from --node-name or NODE_NAME,
the Lease holder from POD_NAME (default: the host name). With POD_NAME and
POD_NAMESPACE set its Events are about its own Pod, in its namespace;
otherwise about the shadow, in namespace default.`,
	}, func(ctx context.Context, rt *process.Runtime[*config.UpdateAgentConfiguration]) error {
		return run(ctx, rt, instance)
	})
}

func run(ctx context.Context, rt *process.Runtime[*config.UpdateAgentConfiguration], instance *Instance) error {
	cfg := rt.Config
	if err := validation.ValidateNodeName(instance.NodeName, updatesv1alpha1.UpdaterExtension); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("node", instance.NodeName)
	ctx = klog.NewContext(ctx, logger)
	w, err := wire(rt, instance.NodeName)
	if err != nil {
		return err
	}
	namespace, lease := w.renewer.LeaseName()
	logger.Info("Starting with effective configuration",
		"configFile", rt.ConfigFile,
		"apiSocket", cfg.APISocketPath,
		"lease", namespace+"/"+lease,
		"updateCheckInterval", cfg.UpdateCheckInterval.Duration,
		"rebootGrace", cfg.RebootGrace.Duration,
		"readinessTaintKey", cfg.ReadinessTaintKey,
	)
	serveErrs, err := process.Serve(ctx, cfg.Serving, cfg.Debugging.EnableProfiling, rt.Registry, w.renewer.Healthz)
	if err != nil {
		return err
	}

	workers := process.NewWorkers(ctx)
	defer workers.Stop()
	// Before the renewer runs: a process restarted between the release and
	// the reboot must not renew the Lease.
	if err := retry(workers.Context(), func() error { return w.agent.InitLease(workers.Context()) }); err != nil {
		return shutdown(ctx, w.agent, err)
	}
	workers.Go(func(ctx context.Context) { _ = w.renewer.Run(ctx) })
	if err := w.kube.Start(workers.Context(), w.agent.Wake); err != nil {
		workers.Stop()
		return shutdown(ctx, w.agent, err)
	}
	workers.Go(w.agent.Run)
	if serveErr := workers.RunUntilStopped(ctx, serveErrs); serveErr != nil {
		return serveErr
	}
	return shutdown(ctx, w.agent, nil)
}

// wiring is the agent with the connections and the Lease renewer it runs on.
type wiring struct {
	agent   *agent.Agent
	kube    *agent.KubeClient
	renewer *heartbeat.Renewer
}

// wire builds the agent from its configuration: its lean Lease client and
// renewer, its client for its shadow, its Node and its Events, and the
// Bottlerocket API on the host's socket.
func wire(rt *process.Runtime[*config.UpdateAgentConfiguration], nodeName string) (wiring, error) {
	cfg := rt.Config
	restConfig, err := options.RESTConfig(cfg.ClientConnection, "update-agent")
	if err != nil {
		return wiring{}, err
	}
	leaseClient, err := heartbeat.NewClient(restConfig)
	if err != nil {
		return wiring{}, err
	}
	// Its Events are about its own Pod, in its own namespace: the only
	// one its Role lets it create Events in.
	kube, err := agent.NewKubeClient(restConfig, nodeName, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"))
	if err != nil {
		return wiring{}, err
	}
	heartbeatMetrics, err := prommetrics.New(rt.Registry, updatesv1alpha1.UpdaterExtension)
	if err != nil {
		return wiring{}, fmt.Errorf("registering the heartbeat metrics: %w", err)
	}
	renewer, err := heartbeat.New(leaseClient, heartbeatOptions(cfg, nodeName, heartbeatMetrics))
	if err != nil {
		return wiring{}, err
	}
	api := brapi.New(brapi.Options{SocketPath: cfg.APISocketPath})
	a, err := agent.New(agent.Clients{
		Shadows: kube, Nodes: kube, API: api, Lease: renewer, Events: kube,
	}, agentOptions(cfg, nodeName))
	if err != nil {
		return wiring{}, err
	}
	return wiring{agent: a, kube: kube, renewer: renewer}, nil
}

// agentOptions are the agent's settings from its configuration.
func agentOptions(cfg *config.UpdateAgentConfiguration, nodeName string) agent.Options {
	return agent.Options{
		NodeName:            nodeName,
		ReadinessTaintKey:   cfg.ReadinessTaintKey,
		UpdateCheckInterval: cfg.UpdateCheckInterval.Duration,
		RebootGrace:         cfg.RebootGrace.Duration,
		Clock:               clock.RealClock{},
	}
}

// heartbeatOptions are the agent's Lease: bottlerocket-updater.<node>.
func heartbeatOptions(cfg *config.UpdateAgentConfiguration, nodeName string, metrics heartbeat.Metrics) heartbeat.Options {
	return heartbeat.Options{
		Namespace:     cfg.Lease.Namespace,
		NodeName:      nodeName,
		Extension:     updatesv1alpha1.UpdaterExtension,
		Holder:        process.PodHolderIdentity("update-agent"),
		LeaseDuration: cfg.Lease.Duration.Duration,
		RenewInterval: cfg.Lease.RenewInterval.Duration,
		// The updater registers itself as one more system extension, but
		// one whose outages never gate the node: a bad agent image must not
		// gate and evict a slice of the fleet. Its planned releases (reason
		// Updating) still gate — the node-health controller gates a planned
		// release whatever the extension's affectsReadiness (docs/controller.md).
		Register:         true,
		AffectsReadiness: ptr.To(false),
		Metrics:          metrics,
	}
}

// shutdown releases the Lease when the process was told to stop (SIGTERM)
// during an update, with reason Updating; while Idle it leaves the Lease to
// expire (agent.Agent.Shutdown). A restart for a changed configuration file
// leaves it held.
func shutdown(ctx context.Context, a *agent.Agent, err error) error {
	if !errors.Is(context.Cause(ctx), process.ErrTerminated) {
		return err
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := a.Shutdown(releaseCtx); rerr != nil {
		klog.FromContext(ctx).Error(rerr, "Releasing the Lease on shutdown failed; it will expire instead")
	}
	return nil
}

// retry calls f until it succeeds or ctx ends, backing off up to 30s.
func retry(ctx context.Context, f func() error) error {
	delay := time.Second
	for {
		err := f()
		if err == nil {
			return nil
		}
		klog.FromContext(ctx).Error(err, "Retrying", "in", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}
