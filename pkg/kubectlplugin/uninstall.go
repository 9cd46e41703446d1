package kubectlplugin

import (
	"fmt"

	"github.com/spf13/cobra"

	"nodehealth.io/nodehealth/pkg/nodehealth/uninstall"
)

// newUninstallCommand is the workstation's way to do what the chart's
// pre-delete hook does, where the hook cannot run (its image cannot be
// pulled, or helm uninstall --no-hooks left the nodes tainted).
func newUninstallCommand(o *Options) *cobra.Command {
	plan := uninstall.DefaultPlan()
	stop := []string{}
	for _, d := range plan.StopDeployments {
		stop = append(stop, d.String())
	}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the readiness taint and everything else the controller put on the nodes",
		Long: `uninstall does from this machine what the chart's pre-delete hook does in
the cluster: it deletes the MutatingAdmissionPolicyBinding that taints new
Nodes, scales the controller's Deployment to 0 and waits until its pods are
gone (or it would put everything back), then removes from every node the
readiness taint (both effects), the nodehealth.io/boot record, the
SystemExtensionsReady condition and the extension-list entries rules and
self-registration added; manual entries stay. What is already gone is skipped,
so it is safe after "helm uninstall --no-hooks" or a second time.

--taint-key and --lease-namespace must match the controller's configuration.`,
		Example: `  # after helm uninstall --no-hooks (or instead of a hook Job that cannot start)
  kubectl nodehealth uninstall

  # a controller installed under other names
  kubectl nodehealth uninstall --stop-deployment=platform/nodehealth-controller --taint-key=example.com/not-ready`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			deployments, err := uninstall.ParseDeployments(stop)
			if err != nil {
				return fmt.Errorf("--stop-deployment: %w", err)
			}
			client, err := o.NewClient()
			if err != nil {
				return err
			}
			plan.StopDeployments = deployments
			plan.TaintKey, plan.LeaseNamespace = o.TaintKey, o.LeaseNamespace
			return plan.Run(cmd.Context(), client, o.Out)
		},
	}
	flags := cmd.Flags()
	flags.StringSliceVar(&stop, "stop-deployment", stop,
		"The controller's Deployment (namespace/name) to scale to 0 before anything is removed; repeatable; empty to stop none.")
	flags.StringSliceVar(&plan.DeleteBindings, "delete-mutating-admission-policy-binding", plan.DeleteBindings,
		"MutatingAdmissionPolicyBindings to delete first, so that no new Node is tainted at creation; missing or not served: skipped.")
	flags.DurationVar(&plan.StopTimeout, "stop-timeout", plan.StopTimeout, "How long to wait for each Deployment's pods to go.")
	return cmd
}
