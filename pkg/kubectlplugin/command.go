// Package kubectlplugin implements kubectl-nodehealth, the kubectl plugin that shows
// and changes which system extensions each node requires (docs/system-extensions.md):
//
//	kubectl nodehealth status [NODE...]   extensions, Leases and the gate of each node
//	kubectl nodehealth explain NODE       why a node is (not) gated, in sentences
//	kubectl nodehealth register NODE EXT  add a manual entry to the node's list
//	kubectl nodehealth unregister NODE EXT
//	kubectl nodehealth update status      each UpdatePolicy, the nodes in flight, what halts the rollout
//	kubectl nodehealth update pause|unpause POLICY  set the policy's spec.paused
//	kubectl nodehealth update resume NODE lift the halt a node's failed update caused
//	kubectl nodehealth uninstall         remove what the controller put on the nodes (the hook's work)
//
// The logic lives here, out of cmd/, so that it is tested with a fake
// clientset; cmd/kubectl-nodehealth only wires standard streams.
package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/pkg/version"
)

// ReportAPIVersion is the apiVersion of the objects -o json and -o yaml
// print (kinds NodeStatusReport and UpdateStatusReport): the plugin's own
// output, not a resource of the cluster.
const ReportAPIVersion = "plugin.nodehealth.io/v1alpha1"

// Options are the settings every subcommand shares.
type Options struct {
	// ConfigFlags are kubectl's own connection flags (--kubeconfig,
	// --context, --namespace/-n, --as, --server, ...), so they behave
	// exactly as in kubectl.
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// LeaseNamespace is the controller's extension Lease namespace.
	LeaseNamespace string
	// TaintKey is the controller's readiness taint key.
	TaintKey string
	// RenewalGrace is the controller's renewalGrace, used to estimate
	// whether a Lease has expired.
	RenewalGrace time.Duration

	// NewClient builds the clientset; tests replace it with a fake.
	NewClient func() (kubernetes.Interface, error)
	// NewShadowClient builds the BottlerocketShadow clientset; tests
	// replace it with a fake.
	NewShadowClient func() (versioned.Interface, error)
	// Clock is the clock ages are measured with.
	Clock clock.PassiveClock
}

// NewOptions returns Options with the defaults of a default controller
// installation.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	o := &Options{
		ConfigFlags:    genericclioptions.NewConfigFlags(true),
		IOStreams:      streams,
		LeaseNamespace: nodev1alpha1.DefaultLeaseNamespace,
		TaintKey:       nodev1alpha1.DefaultReadinessTaintKey,
		RenewalGrace:   10 * time.Second,
		Clock:          clock.RealClock{},
	}
	o.NewClient = func() (kubernetes.Interface, error) {
		cfg, err := o.ConfigFlags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(cfg)
	}
	o.NewShadowClient = func() (versioned.Interface, error) {
		cfg, err := o.ConfigFlags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		return versioned.NewForConfig(cfg)
	}
	return o
}

func (o *Options) settings() evalSettings {
	return evalSettings{leaseNamespace: o.LeaseNamespace, taintKey: o.TaintKey, renewalGrace: o.RenewalGrace, now: o.Clock.Now()}
}

// NewCommand returns the kubectl-nodehealth command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return NewCommandWithOptions(NewOptions(streams))
}

// NewCommandWithOptions returns the command for prepared Options (tests).
func NewCommandWithOptions(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-nodehealth",
		Short: "Show and change the system extensions nodes require (nodehealth)",
		Long: `kubectl nodehealth shows which system extensions (kube-proxy, CNI and CSI
node plugins, device plugins, agents...) each node requires before it is ready
for workloads, whether their Leases are renewed, and whether the node-health
controller gates the node with its readiness taint. It also adds and removes
manual entries of a node's list (annotation ` + nodev1alpha1.SystemExtensionsAnnotation + `).

Extension states are estimated from each Lease's renewTime and this machine's
clock. The controller judges by when it observed each renewal, so its
SystemExtensionsReady condition, shown with every node, is authoritative.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodehealth"},
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(o.In)
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	cmd.SetVersionTemplate("kubectl-nodehealth {{.Version}}\n")
	flags := cmd.PersistentFlags()
	o.ConfigFlags.AddFlags(flags)
	flags.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace,
		"The namespace of extension Leases: the controller's leaseNamespace. (-n/--namespace is kubectl's and does not apply: nodes are cluster-scoped.)")
	flags.StringVar(&o.TaintKey, "taint-key", o.TaintKey, "The key of the controller's readiness taint.")
	flags.DurationVar(&o.RenewalGrace, "renewal-grace", o.RenewalGrace,
		"The controller's renewalGrace, added to a Lease's duration before it is shown as expired.")

	cmd.AddCommand(newStatusCommand(o), newExplainCommand(o), newRegisterCommand(o), newUnregisterCommand(o), newUpdateCommand(o), newUninstallCommand(o))
	return cmd
}

func newStatusCommand(o *Options) *cobra.Command {
	var output string
	var startup bool
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show each node's gate and the state of its system extensions",
		Long: `Show, per node, whether it is gated (carries the readiness taint), the
controller's SystemExtensionsReady condition, and every extension of its list:
whether it affects readiness, who added it (manual, lease, rule/<rule>), its
Lease, the Lease's holder, the age of its last renewal, its state and reason.
Without NODE, every node.

With --startup, the last start-up of each node as the controller recorded it
when it ungated the node: the time from the cause (new node, reboot,
re-creation) to the ungate, the slowest extension and the next one, the time
since the Node's creation; slowest first. Only Nodes are read.`,
		Example: `  kubectl nodehealth status
  kubectl nodehealth status node-1 node-2 -o wide
  kubectl nodehealth status node-1 -o json
  kubectl nodehealth status --startup
  kubectl nodehealth status --startup -o json`,
		ValidArgsFunction: completeNodes(o, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !validOutput(output) {
				return fmt.Errorf("--output %q is not supported: use wide, json or yaml", output)
			}
			client, err := o.NewClient()
			if err != nil {
				return err
			}
			s := o.settings()
			if startup {
				report, err := startupReport(cmd.Context(), client, args, s.now)
				if err != nil {
					return err
				}
				return printStartup(o.Out, output, report)
			}
			nodes, err := statusOf(cmd.Context(), client, args, s)
			if err != nil {
				return err
			}
			report := StatusReport{TypeMeta: metav1.TypeMeta{APIVersion: ReportAPIVersion, Kind: "NodeStatusReport"}, Time: metav1.NewTime(s.now), Note: Estimated, Nodes: nodes}
			return printStatus(o.Out, output, report, o.TaintKey)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml.")
	cmd.Flags().BoolVar(&startup, "startup", false, "Show each node's last recorded start-up (time to ready, slowest extensions), slowest first.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputWide, OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newExplainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain NODE",
		Short: "Explain in sentences why a node is gated or not",
		Long: `Explain why a node is or is not gated, from the readiness taint, the
controller's SystemExtensionsReady condition, the node's extension list and the
extensions' Leases; and how its last start-up went, as a timeline from the
cause (new node, reboot, re-creation) to each extension's first ready renewal
and to the ungate, as the controller recorded it.`,
		Example:           `  kubectl nodehealth explain node-1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNodes(o, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.NewClient()
			if err != nil {
				return err
			}
			s := o.settings()
			nodes, err := statusOf(cmd.Context(), client, args, s)
			if err != nil {
				return err
			}
			for _, line := range explain(nodes[0], s) {
				fmt.Fprintln(o.Out, line)
			}
			return nil
		},
	}
}

func newRegisterCommand(o *Options) *cobra.Command {
	r := RegisterOptions{AffectsReadiness: true}
	cmd := &cobra.Command{
		Use:   "register NODE EXTENSION",
		Short: "Require an extension on a node (a manual entry of its list)",
		Long: `Add EXTENSION to the node's list of system extensions as a manual entry, or
update the manual entry of that name. The node is then gated until the
extension's Lease (default <extension>.<node> in the Lease namespace) is
renewed, unless --affects-readiness=false.

The write is a resourceVersion-guarded read-modify-write: when another writer
changes the node at the same time, it reads the node again and retries, so no
entry is lost. Entries added by the controller (source rule/<rule> or lease) are
left alone unless --force replaces them with a manual entry. A list that cannot
be parsed is never rewritten.`,
		Example: `  kubectl nodehealth register node-1 kube-proxy
  kubectl nodehealth register node-1 gpu-monitor --affects-readiness=false
  kubectl nodehealth register node-1 cni --lease node-extension-lease/cilium.node-1`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeNodes(o, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r.Extension = args[1]
			if err := o.validateEdit(args[0], r.Extension); err != nil {
				return err
			}
			if ref := parseLease(r.Lease, o.LeaseNamespace); ref != nil && ref.Namespace != o.LeaseNamespace {
				return fmt.Errorf("--lease %s: the Lease must be in the extension namespace %s, the only one the controller watches and the admission policy guards (see --lease-namespace)", r.Lease, o.LeaseNamespace)
			}
			return o.runEdit(cmd.Context(), args[0], registerEdit(r, o.LeaseNamespace))
		},
	}
	cmd.Flags().StringVar(&r.Lease, "lease", "", "The extension's Lease as NAMESPACE/NAME (or NAME in --lease-namespace); default <extension>.<node>.")
	cmd.Flags().BoolVar(&r.AffectsReadiness, "affects-readiness", true, "Whether the extension gates the node; false tracks and reports it only.")
	cmd.Flags().BoolVar(&r.Force, "force", false, "Replace an entry the controller manages (source rule/<rule> or lease) with a manual one.")
	return cmd
}

func newUnregisterCommand(o *Options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "unregister NODE EXTENSION",
		Short: "Stop requiring an extension on a node",
		Long: `Remove EXTENSION from the node's list of system extensions, with the same
resourceVersion-guarded read-modify-write as register. Entries the controller
manages (source rule/<rule> or lease) are refused without --force, because the
controller adds them back while their rule matches or their Lease exists.`,
		Example:           `  kubectl nodehealth unregister node-1 gpu-monitor`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeNodes(o, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateEdit(args[0], args[1]); err != nil {
				return err
			}
			return o.runEdit(cmd.Context(), args[0], unregisterEdit(args[1], force, o.LeaseNamespace))
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "Remove an entry the controller manages (source rule/<rule> or lease).")
	return cmd
}

func (o *Options) validateEdit(node, extension string) error {
	if node == "" {
		return errors.New("a node name is required")
	}
	if msgs := nodev1alpha1.ValidateExtensionName(extension); len(msgs) > 0 {
		return fmt.Errorf("invalid extension name %q: %s (extension names are DNS labels, without dots, because the Lease is named <extension>.<node>)",
			extension, strings.Join(msgs, "; "))
	}
	return nil
}

func (o *Options) runEdit(ctx context.Context, node string, edit editFunc) error {
	client, err := o.NewClient()
	if err != nil {
		return err
	}
	msg, err := editList(ctx, client, node, o.LeaseNamespace, edit)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, msg)
	return nil
}
