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
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	versioned "nodehealth.io/client-go/clientset/versioned"
	nodehealthscheme "nodehealth.io/client-go/clientset/versioned/scheme"
	"nodehealth.io/client-go/informers/externalversions"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/componentconfig/server"
	drainclient "nodehealth.io/nodehealth/pkg/drain/clientset"
	"nodehealth.io/nodehealth/pkg/leaderelection"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
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
	}, func(ctx context.Context, rt *server.Runtime[*config.UpdateOperatorConfiguration]) error {
		return run(ctx, rt, nodeName)
	})
}

func run(ctx context.Context, rt *server.Runtime[*config.UpdateOperatorConfiguration], nodeName string) error {
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
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	// Custom resources are served as JSON only: clientConnection.contentType
	// (protobuf by default) applies to the core client alone.
	shadowConfig := *restConfig
	shadowConfig.ContentType, shadowConfig.AcceptContentTypes = "application/json", "application/json"
	shadows, err := versioned.NewForConfig(&shadowConfig)
	if err != nil {
		return err
	}
	metrics := updater.NewMetrics(rt.Registry)
	return leaderelection.Process{
		Name: "update-operator", Identity: identity, Election: cfg.LeaderElection,
		RESTConfig: restConfig, Client: kube,
		Serving: cfg.Serving, EnableProfiling: cfg.Debugging.EnableProfiling, Registry: rt.Registry,
		OnConfigChange: rt.OnConfigChange,
		Work: func(ctx context.Context) error {
			return startControllers(ctx, kube, shadows, opts, metrics)
		},
		WorkFailed: "Update operator failed",
	}.Run(ctx)
}

// startControllers builds the informers once leadership is won and runs both
// controllers until ctx ends. The update controller confirms its counts with
// a consistent LIST before its first start, so a cache filled a moment ago
// cannot overshoot the limits.
func startControllers(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, opts updater.Options, metrics *updater.Metrics) error {
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(nodeutil.TransformNode))
	shadowFactory := externalversions.NewSharedInformerFactory(client, 0)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	// Events go to shadows and Nodes: the recorder needs both kinds.
	eventScheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(eventScheme); err != nil {
		return err
	}
	if err := nodehealthscheme.AddToScheme(eventScheme); err != nil {
		return err
	}
	recorder := broadcaster.NewRecorder(eventScheme, v1.EventSource{Component: "update-operator"})

	shadows, err := shadow.NewController(client, nodeFactory.Core().V1().Nodes(), shadowFactory.Updates().V1alpha1().BottlerocketShadows(),
		recorder, shadow.Options{Selector: opts.Selector, DryRun: opts.DryRun})
	if err != nil {
		return err
	}
	// The drain lists one node's pods at a time (a field selector) and
	// evicts them: no cluster-wide pod cache.
	opts.Drain.Client = drainclient.New(kube.CoreV1(), kube.PolicyV1())
	updates, err := updater.NewController(client, nodeFactory.Core().V1().Nodes(), shadowFactory.Updates().V1alpha1().BottlerocketShadows(),
		shadowFactory.Updates().V1alpha1().UpdatePolicies(), recorder, clock.RealClock{}, opts, metrics)
	if err != nil {
		return err
	}
	nodeFactory.Start(ctx.Done())
	shadowFactory.Start(ctx.Done())
	defer nodeFactory.Shutdown()
	defer shadowFactory.Shutdown()
	done := make(chan struct{})
	go func() {
		defer close(done)
		shadows.Run(ctx, workers)
	}()
	updates.Run(ctx, workers)
	<-done
	return nil
}
