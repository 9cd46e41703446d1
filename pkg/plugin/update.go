package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
)

func newUpdateCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Show and steer the Bottlerocket update rollout (BottlerocketShadows)",
		Long: `The update operator drives each managed node through
Idle → StagedAndPerformedUpdate → RebootedIntoUpdate → MonitoringUpdate → Idle.
A failure after a reboot (a missed deadline, the wrong version, the health gate
not passed) is recorded on the node's BottlerocketShadow and halts the rollout
until it is resumed. See docs/updater.md.`,
	}
	cmd.AddCommand(newUpdateStatusCommand(o), newUpdateResumeCommand(o))
	return cmd
}

// UpdateNode is one node's row of `update status`.
type UpdateNode struct {
	Name          string `json:"name"`
	Desired       string `json:"desired"`
	State         string `json:"state"`
	Current       string `json:"currentVersion,omitempty"`
	Target        string `json:"targetVersion,omitempty"`
	Version       string `json:"version,omitempty"`
	CrashCount    int32  `json:"crashCount,omitempty"`
	Since         string `json:"since,omitempty"`
	Failed        string `json:"failed,omitempty"`
	FailureReason string `json:"failureReason,omitempty"`
	Resumed       string `json:"resumed,omitempty"`
	// Halting is true while this node's failure halts the rollout.
	Halting bool `json:"halting"`
	// Problem is the agent's DrainBlocked or UpdateFailed message.
	Problem string `json:"problem,omitempty"`
}

// UpdateReport is the output of `update status -o json` and `-o yaml`.
type UpdateReport struct {
	// apiVersion plugin.nodehealth.io/v1alpha1, kind UpdateStatusReport.
	metav1.TypeMeta
	Time metav1.Time `json:"time"`
	// HaltedBy names the nodes whose failures halt the rollout.
	HaltedBy []string     `json:"haltedBy"`
	Nodes    []UpdateNode `json:"nodes"`
}

func newUpdateStatusCommand(o *Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show where each node is in its update and what halts the rollout",
		Long: `Show, per node with a BottlerocketShadow, the state the operator wants
(DESIRED) and the state its agent reports (STATE), the running and offered
versions, the version being installed, the crash count, and any failure
recorded by the operator. Failures that halt the rollout are listed first, with
the command that resumes it. A pause or a closed update window is part of the
operator's configuration and is not shown here (see its logs and the
update_operator_rollout_halted metric).`,
		Example: `  kubectl nodehealth update status
  kubectl nodehealth update status -o wide
  kubectl nodehealth update status node-1 -o json`,
		ValidArgsFunction: completeShadows(o, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !validOutput(output) {
				return fmt.Errorf("--output %q is not supported: use wide, json or yaml", output)
			}
			client, err := o.NewShadowClient()
			if err != nil {
				return err
			}
			report, err := updateStatus(cmd.Context(), client, args, o.Clock.Now())
			if err != nil {
				return err
			}
			switch output {
			case OutputJSON:
				enc := json.NewEncoder(o.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			case OutputYAML:
				data, err := yaml.Marshal(report)
				if err != nil {
					return err
				}
				_, err = o.Out.Write(data)
				return err
			}
			return printUpdateStatus(o.Out, report, output == OutputWide)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputWide, OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func updateStatus(ctx context.Context, client versioned.Interface, names []string, now time.Time) (UpdateReport, error) {
	report := UpdateReport{TypeMeta: metav1.TypeMeta{APIVersion: ReportAPIVersion, Kind: "UpdateStatusReport"},
		Time: metav1.NewTime(now), HaltedBy: []string{}, Nodes: []UpdateNode{}}
	var items []updatesv1alpha1.BottlerocketShadow
	if len(names) == 0 {
		list, err := client.UpdatesV1alpha1().BottlerocketShadows().List(ctx, metav1.ListOptions{})
		if err != nil {
			return report, fmt.Errorf("listing BottlerocketShadows: %w", err)
		}
		items = list.Items
	} else {
		for _, n := range names {
			s, err := client.UpdatesV1alpha1().BottlerocketShadows().Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return report, fmt.Errorf("node %s has no BottlerocketShadow: the update operator does not manage it", n)
			}
			if err != nil {
				return report, err
			}
			items = append(items, *s)
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, s := range items {
		row := UpdateNode{
			Name: s.Name, Desired: string(s.Spec.State), State: string(s.Status.CurrentState),
			Current: s.Status.CurrentVersion, Target: s.Status.TargetVersion, Version: s.Spec.Version, CrashCount: s.Status.CrashCount,
			Failed: s.Annotations[updatesv1alpha1.FailedAnnotation], FailureReason: s.Annotations[updatesv1alpha1.FailureReasonAnnotation],
			Resumed: s.Annotations[updatesv1alpha1.ResumeAnnotation],
		}
		if row.State == "" {
			row.State = "<no agent>"
		}
		if t := s.Spec.StateTransitionTimestamp; t != nil {
			row.Since = now.Sub(t.Time).Round(time.Second).String()
		}
		for _, c := range s.Status.Conditions {
			if c.Status == metav1.ConditionTrue && (c.Type == updatesv1alpha1.ConditionDrainBlocked || c.Type == updatesv1alpha1.ConditionUpdateFailed) {
				row.Problem = c.Type + ": " + c.Message
			}
		}
		row.Halting = halts(row.Failed, row.Resumed)
		if row.Halting {
			report.HaltedBy = append(report.HaltedBy, s.Name)
		}
		report.Nodes = append(report.Nodes, row)
	}
	return report, nil
}

// halts mirrors the operator's rule: a failure halts while it is newer than
// the resume time (an unreadable failure time halts too).
// halts is the operator's rule (docs/updater.md): a failed value the resume does
// not repeat halts the rollout.
func halts(failed, resumed string) bool {
	return failed != "" && resumed != failed
}

func printUpdateStatus(out io.Writer, r UpdateReport, wide bool) error {
	if len(r.HaltedBy) > 0 {
		fmt.Fprintf(out, "Rollout HALTED by failed updates on: %s\n", strings.Join(r.HaltedBy, ", "))
		for _, n := range r.Nodes {
			if n.Halting {
				fmt.Fprintf(out, "  %s failed at %s: %s\n", n.Name, n.Failed, n.FailureReason)
			}
		}
		fmt.Fprintf(out, "After fixing the cause: kubectl nodehealth update resume NODE\n\n")
	} else if len(r.Nodes) > 0 {
		fmt.Fprintf(out, "No failure halts the rollout.\n\n")
	}
	if len(r.Nodes) == 0 {
		fmt.Fprintln(out, "No BottlerocketShadows: the update operator manages no node.")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "NODE\tDESIRED\tSTATE\tSINCE\tCURRENT\tTARGET\tVERSION\tCRASH\tNOTE"
	if wide {
		// The failure's reason, its resume, and the agent's problem in full.
		header += "\tFAILURE-REASON\tRESUMED\tPROBLEM"
	}
	fmt.Fprintln(w, header)
	for _, n := range r.Nodes {
		note := n.Problem
		if n.Failed != "" {
			note = "failed " + n.Failed
			if !n.Halting {
				note += " (resumed)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s", n.Name, n.Desired, n.State, dash(n.Since), dash(n.Current),
			dash(n.Target), dash(n.Version), n.CrashCount, note)
		if wide {
			fmt.Fprintf(w, "\t%s\t%s\t%s", dash(n.FailureReason), dash(n.Resumed), dash(n.Problem))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newUpdateResumeCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NODE",
		Short: "Lift the halt caused by a node's failed update",
		Long: `Record on the node's BottlerocketShadow (annotation
` + updatesv1alpha1.ResumeAnnotation + `, a copy of its failed value) that its failed update
was dealt with. The rollout continues once every failed value is repeated by
its shadow's resume; a later failure halts it again. The failed node itself is
updated again only if it still runs an older version.`,
		Example:           `  kubectl nodehealth update resume node-1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeShadows(o, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.NewShadowClient()
			if err != nil {
				return err
			}
			return resumeNode(cmd.Context(), client, args[0], o.Out)
		},
	}
}

func resumeNode(ctx context.Context, client versioned.Interface, name string, out io.Writer) error {
	shadows := client.UpdatesV1alpha1().BottlerocketShadows()
	s, err := shadows.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s has no BottlerocketShadow: the update operator does not manage it", name)
	}
	if err != nil {
		return err
	}
	failed := s.Annotations[updatesv1alpha1.FailedAnnotation]
	if failed == "" {
		fmt.Fprintf(out, "%s has no failed update; nothing to resume\n", name)
		return nil
	}
	// The failed value, repeated: it resumes exactly the failure it was run
	// for, whatever the clocks say; a later failure halts again. The
	// resourceVersion keeps it from resuming a failure recorded since.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": s.ResourceVersion,
		"annotations":     map[string]string{updatesv1alpha1.ResumeAnnotation: failed},
	}})
	if err != nil {
		return err
	}
	if _, err := shadows.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("resuming %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s resumed: its failure at %s (%s) no longer halts the rollout\n", name, failed, s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	return nil
}
