package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth/uninstall"
)

func newUninstallCommand() *cobra.Command {
	var kubeconfig, taintKey, leaseNamespace string
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove every taint, annotation and condition the controller owns from every node",
		Long: `uninstall removes from every node what nodehealth-controller owns: the
readiness taint (both effects), the nodehealth.io/boot record, the
SystemExtensionsReady condition, and the extension-list entries added by rules
and self-registration. Entries added by hand stay.

Stop the controller first (scale its Deployment to 0), or it puts everything back.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			out := cmd.OutOrStdout()
			res, err := uninstall.Uninstall(cmd.Context(), client, taintKey, leaseNamespace, func(format string, args ...interface{}) {
				fmt.Fprintf(out, format+"\n", args...)
			})
			fmt.Fprintf(out, "changed %d nodes: removed %d taints, %d annotations, %d conditions\n", res.Nodes, res.Taints, res.Annotations, res.Conditions)
			if len(res.Skipped) > 0 {
				fmt.Fprintf(out, "left the unparsable %s annotation on: %v\n", nodev1alpha1.SystemExtensionsAnnotation, res.Skipped)
			}
			return err
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
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig file; empty means the usual kubectl rules ($KUBECONFIG, ~/.kube/config).")
	cmd.Flags().StringVar(&taintKey, "taint-key", nodev1alpha1.DefaultReadinessTaintKey, "The readiness taint key the controller was configured with.")
	cmd.Flags().StringVar(&leaseNamespace, "lease-namespace", nodev1alpha1.DefaultLeaseNamespace, "The extension Lease namespace the controller was configured with.")
	return cmd
}
