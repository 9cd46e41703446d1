package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth/uninstall"
)

func newUninstallCommand() *cobra.Command {
	var (
		kubeconfig, taintKey, leaseNamespace string
		stopDeployments, deleteBindings      []string
		stopTimeout                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove every taint, annotation and condition the controller owns from every node",
		Long: `uninstall removes from every node what nodehealth-controller owns: the
readiness taint (both effects), the nodehealth.io/boot record, the
SystemExtensionsReady condition, and the extension-list entries added by rules
and self-registration. Entries added by hand stay.

Stop the controller first, or it puts everything back: scale its Deployment to
0, or name it with --stop-deployment, which scales it to 0 and waits until none
of its pods is left. --delete-mutating-admission-policy-binding first stops new
Nodes from being tainted at creation. The chart's pre-delete hook runs
  uninstall --delete-mutating-admission-policy-binding=nodehealth-readiness-taint-on-create \
    --stop-deployment=nodehealth-system/nodehealth-controller
in the cluster, so that helm uninstall leaves no node gated.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			deployments, err := uninstall.ParseDeployments(stopDeployments)
			if err != nil {
				return fmt.Errorf("--stop-deployment: %w", err)
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(restConfig)
			if err != nil {
				return err
			}
			plan := uninstall.Plan{DeleteBindings: deleteBindings, StopDeployments: deployments, StopTimeout: stopTimeout,
				TaintKey: taintKey, LeaseNamespace: leaseNamespace}
			return plan.Run(cmd.Context(), client, cmd.OutOrStdout())
		},
	}
	// The root command's help lists the controller's own flag sections;
	// this command has its own few flags.
	usage := func(c *cobra.Command) error {
		fmt.Fprintf(c.OutOrStdout(), "Usage:\n  %s\n\nFlags:\n%s", c.UseLine(), c.LocalFlags().FlagUsages())
		return nil
	}
	cmd.SetUsageFunc(usage)
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(c.OutOrStdout(), "%s\n\n", c.Long)
		_ = usage(c)
	})
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig file; empty means the usual kubectl rules ($KUBECONFIG, ~/.kube/config), and in a pod its ServiceAccount.")
	cmd.Flags().StringVar(&taintKey, "taint-key", nodev1alpha1.DefaultReadinessTaintKey, "The readiness taint key the controller was configured with.")
	cmd.Flags().StringSliceVar(&stopDeployments, "stop-deployment", nil, "A Deployment (namespace/name) to scale to 0, waiting until none of its pods is left, before anything is removed; repeatable.")
	cmd.Flags().StringSliceVar(&deleteBindings, "delete-mutating-admission-policy-binding", nil, "A MutatingAdmissionPolicyBinding to delete first, so that no new Node is tainted at creation; repeatable. Missing or not served: ignored.")
	cmd.Flags().DurationVar(&stopTimeout, "stop-timeout", 2*time.Minute, "How long --stop-deployment waits for each Deployment's pods to go.")
	cmd.Flags().StringVar(&leaseNamespace, "lease-namespace", nodev1alpha1.DefaultLeaseNamespace, "The extension Lease namespace the controller was configured with.")
	return cmd
}
