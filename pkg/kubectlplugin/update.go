package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
)

func newUpdateCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Show and steer the Bottlerocket update rollout (UpdatePolicies, BottlerocketShadows)",
		Long: `The update operator drives each managed node through
Idle → StagedAndPerformedUpdate → RebootedIntoUpdate → MonitoringUpdate → Idle,
as the UpdatePolicy that selects the node says (target version, pause,
concurrency, windows, soak). A failure after a reboot (a missed deadline, the
wrong version, the health gate not passed) is recorded on the node's
BottlerocketShadow and halts its policy until it is resumed. See
docs/updater.md.`,
	}
	cmd.AddCommand(newUpdateStatusCommand(o), newUpdatePauseCommand(o, true), newUpdatePauseCommand(o, false), newUpdateResumeCommand(o))
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
	// Halting is true while this node's failure halts its policy.
	Halting bool `json:"halting"`
	// Problem is the agent's DrainBlocked or UpdateFailed message.
	Problem string `json:"problem,omitempty"`
	// Policy is the UpdatePolicy that started the node's update in flight
	// (the shadow's updates.nodehealth.io/policy annotation).
	Policy string `json:"policy,omitempty"`
	// InFlight is true while the node counts as updating.
	InFlight bool `json:"inFlight"`
	// WaitingForHook is the hook Job of its current step that has not
	// finished, if any: the drain or the health gate waits for it.
	WaitingForHook *HookWait `json:"waitingForHook,omitempty"`

	// stepSince is when spec entered its state (zero: unknown).
	stepSince time.Time
}

// UpdatePolicyRow is one policy of `update status`: its spec and the
// operator's last status.
type UpdatePolicyRow struct {
	Name     string `json:"name"`
	Target   string `json:"targetVersion,omitempty"`
	Paused   bool   `json:"paused"`
	Limit    string `json:"maxConcurrentUpdates"`
	Selector string `json:"nodeSelector"`
	Nodes    int32  `json:"nodes"`
	UpToDate int32  `json:"upToDate"`
	InFlight int32  `json:"inFlight"`
	// Others are the nodes of other tools (leaving, someone else's
	// maintenance) that count toward the policy's limits; OtherNodes names
	// the first of them with why.
	Others     int32                         `json:"others"`
	OtherNodes []updatesv1alpha1.CountedNode `json:"otherNodes,omitempty"`
	Failed     int32                         `json:"failed"`
	Waiting    int32                         `json:"waiting"`
	// Window is the WindowOpen condition: "open", "closed" or why unknown.
	Window        string   `json:"window"`
	WindowMessage string   `json:"windowMessage,omitempty"`
	HaltedBy      []string `json:"haltedBy,omitempty"`
	// Halted is the Halted condition's reason when it is True.
	Halted   string `json:"halted,omitempty"`
	Conflict string `json:"conflict,omitempty"`
	// Paced says what minReleaseAge or delayBetweenNodes holds back, with
	// ages relative to the report's time (the Paced condition).
	Paced string `json:"paced,omitempty"`
	// Hooks names the hooks of spec.hooks the policy sets.
	Hooks []string `json:"hooks,omitempty"`
	// Blocked says what spec.gates hold back (the Blocked condition's
	// message while it is True).
	Blocked string `json:"blocked,omitempty"`
	// Observed is false while the operator has not yet acted on the
	// policy's latest generation.
	Observed bool `json:"observed"`
}

// UpdateReport is the output of `update status -o json|yaml`.
type UpdateReport struct {
	// apiVersion plugin.nodehealth.io/v1alpha1, kind UpdateStatusReport.
	metav1.TypeMeta
	Time     metav1.Time       `json:"time"`
	Policies []UpdatePolicyRow `json:"policies"`
	// HaltedBy names the nodes whose failures halt a policy.
	HaltedBy []string     `json:"haltedBy"`
	Nodes    []UpdateNode `json:"nodes"`
	// HooksUnreadable says why the hooks' Jobs could not be listed (some
	// policy has hooks, but the user may not list Jobs there).
	HooksUnreadable string `json:"hooksUnreadable,omitempty"`
}

func newUpdateStatusCommand(o *Options) *cobra.Command {
	var output, hooksNamespace string
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show each UpdatePolicy, the nodes in flight and what halts the rollout",
		Long: `Show each UpdatePolicy (target version, progress, paused, update window,
the nodes whose failure halts it) and the nodes in flight: the state the
operator wants (DESIRED) and the state its agent reports (STATE), the running
and offered versions, the version being installed, the crash count, and any
failure recorded by the operator. Failures that halt a policy are listed
first, with the command that resumes it. A node whose drain or health gate
waits for a hook of its policy's spec.hooks names the hook's Job and how long
it has run (read from --hooks-namespace). -o wide shows every node with a
BottlerocketShadow, not only those in flight; -o json and -o yaml print
everything. With NODE..., only those nodes.`,
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
			addHookWaits(cmd.Context(), &report, o.NewClient, hooksNamespace, o.Clock.Now())
			if printed, err := printData(o.Out, output, report); printed {
				return err
			}
			return printUpdateStatus(o.Out, report, output == OutputWide || len(args) > 0)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml.")
	cmd.Flags().StringVar(&hooksNamespace, "hooks-namespace", DefaultHooksNamespace,
		"The namespace the update operator runs hooks in (its configuration's hooks.namespace).")
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
	policies, err := client.UpdatesV1alpha1().UpdatePolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return report, fmt.Errorf("listing UpdatePolicies: %w", err)
	}
	report.Policies = []UpdatePolicyRow{}
	for _, p := range policies.Items {
		report.Policies = append(report.Policies, policyRow(&p, now))
	}
	sort.Slice(report.Policies, func(i, j int) bool { return report.Policies[i].Name < report.Policies[j].Name })
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
			row.stepSince = t.Time
		}
		for _, c := range s.Status.Conditions {
			if c.Status == metav1.ConditionTrue && (c.Type == updatesv1alpha1.ConditionDrainBlocked || c.Type == updatesv1alpha1.ConditionUpdateFailed) {
				row.Problem = c.Type + ": " + c.Message
			}
		}
		row.Halting = updatesv1alpha1.Halting(s.Annotations)
		row.Policy = s.Annotations[updatesv1alpha1.PolicyAnnotation]
		row.InFlight = inFlight(&s)
		if row.Halting {
			report.HaltedBy = append(report.HaltedBy, s.Name)
		}
		report.Nodes = append(report.Nodes, row)
	}
	return report, nil
}

// policyRow summarizes a policy from its spec and the operator's status.
func policyRow(p *updatesv1alpha1.UpdatePolicy, now time.Time) UpdatePolicyRow {
	r := UpdatePolicyRow{Name: p.Name, Target: p.Spec.TargetVersion, Paused: p.Spec.Paused, Limit: p.Spec.MaxConcurrentUpdates.String(),
		Nodes: p.Status.Nodes, UpToDate: p.Status.UpToDate, InFlight: p.Status.InFlight, Others: p.Status.Others, OtherNodes: p.Status.OtherNodes, Failed: p.Status.Failed, Waiting: p.Status.Waiting,
		HaltedBy: p.Status.HaltedBy, Observed: p.Status.ObservedGeneration == p.Generation, Window: "unknown", Hooks: policyHooks(p)}
	if sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector); err == nil && p.Spec.NodeSelector != nil {
		r.Selector = sel.String()
		if r.Selector == "" {
			r.Selector = "<every managed node>"
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyWindowOpen); c != nil {
		switch c.Status {
		case metav1.ConditionTrue:
			r.Window = "open"
		case metav1.ConditionFalse:
			r.Window = "closed"
		default:
			r.Window = c.Reason
		}
		r.WindowMessage = c.Message
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyHalted); c != nil && c.Status == metav1.ConditionTrue {
		r.Halted = c.Reason
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicySelectorConflict); c != nil && c.Status == metav1.ConditionTrue {
		r.Conflict = c.Message
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyPaced); c != nil && c.Status == metav1.ConditionTrue {
		r.Paced = paced(p, c, now)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyBlocked); c != nil && c.Status == metav1.ConditionTrue {
		r.Blocked = c.Message
	}
	return r
}

// paced renders the Paced condition with ages from now, falling back to the
// operator's message when the records do not say more.
func paced(p *updatesv1alpha1.UpdatePolicy, c *metav1.Condition, now time.Time) string {
	ago := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	switch {
	case c.Reason == "DelayBetweenNodes" && p.Spec.DelayBetweenNodes != nil && p.Status.LastUpdateSucceeded != nil:
		next := p.Status.LastUpdateSucceeded.Add(p.Spec.DelayBetweenNodes.Duration)
		return fmt.Sprintf("waiting between nodes: the last update passed its health gate %s ago, next start at %s (delayBetweenNodes %s)",
			ago(p.Status.LastUpdateSucceeded.Time), next.UTC().Format(time.RFC3339), p.Spec.DelayBetweenNodes.Duration)
	case c.Reason == "ReleaseAge" && p.Spec.MinReleaseAge != nil:
		var young []string
		for _, o := range p.Status.OfferedVersions {
			// The operator's message names exactly the versions it holds.
			if strings.Contains(c.Message, o.Version+" first offered") && now.Sub(o.FirstOffered.Time) < p.Spec.MinReleaseAge.Duration {
				young = append(young, fmt.Sprintf("%s offered %s ago, needs %s", o.Version, ago(o.FirstOffered.Time), p.Spec.MinReleaseAge.Duration))
			}
		}
		if len(young) > 0 && !strings.Contains(c.Message, "not offered") {
			return "waiting for release age: " + strings.Join(young, "; ")
		}
	}
	return c.Message
}

// inFlight is docs/updater.md's counting table: spec not Idle, or the agent
// still reports an update state, unless the operator marked this attempt
// failed.
func inFlight(s *updatesv1alpha1.BottlerocketShadow) bool {
	if f, err := time.Parse(time.RFC3339, s.Annotations[updatesv1alpha1.FailedAnnotation]); err == nil &&
		s.Spec.StateTransitionTimestamp != nil && !f.Before(s.Spec.StateTransitionTimestamp.Time.Truncate(time.Second)) {
		return false
	}
	if s.Spec.State != updatesv1alpha1.StateIdle && s.Spec.State != "" {
		return true
	}
	switch s.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate,
		updatesv1alpha1.StateErrorReset:
		return true
	}
	return false
}

func printUpdateStatus(out io.Writer, r UpdateReport, all bool) error {
	if len(r.Policies) == 0 {
		fmt.Fprintln(out, "No UpdatePolicy: no node starts an update (docs/updater.md shows one to apply).")
	} else {
		if err := printPolicies(out, r.Policies, all); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	printHalt(out, r)
	if len(r.Nodes) == 0 {
		fmt.Fprintln(out, "No BottlerocketShadows: the update operator manages no node.")
		return nil
	}
	if err := printUpdateNodes(out, r.Nodes, all); err != nil {
		return err
	}
	printHookWaits(out, r)
	return nil
}

// printPolicies prints the policies' table, then what each says beyond it:
// a conflict, what pacing holds back, what its gates block, an edit not acted on yet, and the
// nodes of others its budget counts.
func printPolicies(out io.Writer, policies []UpdatePolicyRow, all bool) error {
	header := []string{"POLICY", "TARGET", "PROGRESS", "IN-FLIGHT", "OTHERS", "FAILED", "PAUSED", "WINDOW", "HALTED BY"}
	if all {
		header = append(header, "LIMIT", "SELECTOR")
	}
	w := newTable(out, header...)
	for _, p := range policies {
		halted := strings.Join(p.HaltedBy, ",")
		if p.Halted != "" && halted == "" {
			halted = p.Halted
		}
		target := p.Target
		if target == "" {
			target = "<offered>"
		}
		row := []string{p.Name, target, fmt.Sprintf("%d/%d", p.UpToDate, p.Nodes), fmt.Sprint(p.InFlight), fmt.Sprint(p.Others), fmt.Sprint(p.Failed),
			fmt.Sprint(p.Paused), p.Window, dash(halted)}
		if all {
			row = append(row, p.Limit, dash(p.Selector))
		}
		w.row(row...)
	}
	if err := w.flush(); err != nil {
		return err
	}
	for _, p := range policies {
		if p.Conflict != "" {
			fmt.Fprintf(out, "%s: %s\n", p.Name, p.Conflict)
		}
		if p.Paced != "" {
			fmt.Fprintf(out, "%s: %s\n", p.Name, p.Paced)
		}
		if p.Blocked != "" {
			fmt.Fprintf(out, "%s: BLOCKED: %s\n", p.Name, p.Blocked)
		}
		if !p.Observed {
			fmt.Fprintf(out, "%s: the operator has not acted on its latest edit yet\n", p.Name)
		}
		if len(p.OtherNodes) > 0 {
			fmt.Fprintf(out, "%s: the budget also counts %s\n", p.Name, otherNodes(p))
		}
	}
	return nil
}

// otherNodes names the nodes of others a policy's budget counts, and how many
// more it counts than the status names.
func otherNodes(p UpdatePolicyRow) string {
	var named []string
	for _, o := range p.OtherNodes {
		named = append(named, fmt.Sprintf("%s (%s)", o.Name, o.Reason))
	}
	more := ""
	if extra := int(p.Others) - len(p.OtherNodes); extra > 0 {
		more = fmt.Sprintf(" and %d more", extra)
	}
	return strings.Join(named, ", ") + more
}

// printHalt says which failed updates halt the rollout and how to resume it.
func printHalt(out io.Writer, r UpdateReport) {
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
}

// printUpdateNodes prints the nodes in flight or halting (every node with
// all).
func printUpdateNodes(out io.Writer, nodes []UpdateNode, all bool) error {
	var rows []UpdateNode
	for _, n := range nodes {
		if all || n.InFlight || n.Halting {
			rows = append(rows, n)
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(out, "No node in flight (%d nodes; -o wide lists them).\n", len(nodes))
		return nil
	}
	header := []string{"NODE", "POLICY", "DESIRED", "STATE", "SINCE", "CURRENT", "TARGET", "VERSION", "CRASH", "NOTE"}
	if all {
		// The failure's reason, its resume, and the agent's problem in full.
		header = append(header, "FAILURE-REASON", "RESUMED", "PROBLEM")
	}
	w := newTable(out, header...)
	for _, n := range rows {
		note := n.Problem
		if n.Failed != "" {
			note = "failed " + n.Failed
			if !n.Halting {
				note += " (resumed)"
			}
		}
		row := []string{n.Name, dash(n.Policy), n.Desired, n.State, dash(n.Since), dash(n.Current),
			dash(n.Target), dash(n.Version), fmt.Sprint(n.CrashCount), note}
		if all {
			row = append(row, dash(n.FailureReason), dash(n.Resumed), dash(n.Problem))
		}
		w.row(row...)
	}
	return w.flush()
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

func newUpdatePauseCommand(o *Options, pause bool) *cobra.Command {
	verb, short := "pause", "Stop an UpdatePolicy from starting nodes; nodes in flight finish"
	if !pause {
		verb, short = "unpause", "Let a paused UpdatePolicy start nodes again"
	}
	return &cobra.Command{
		Use:   verb + " POLICY",
		Short: short,
		Long: short + `. It sets the policy's spec.paused; the running
operator acts on it at once, with no restart. "kubectl get upol POLICY" shows
the operator's status; its observedGeneration equal to metadata.generation
means the operator has seen the edit, and no node starts after that while
paused.`,
		Example: "  kubectl nodehealth update " + verb + " fleet",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.NewShadowClient()
			if err != nil {
				return err
			}
			return setPaused(cmd.Context(), client, args[0], pause, o.Out)
		},
	}
}

func setPaused(ctx context.Context, client versioned.Interface, name string, pause bool, out io.Writer) error {
	policies := client.UpdatesV1alpha1().UpdatePolicies()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"paused": pause}})
	if err != nil {
		return err
	}
	p, err := policies.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no UpdatePolicy %s (kubectl get upol lists them)", name)
	}
	if err != nil {
		return fmt.Errorf("setting spec.paused of UpdatePolicy %s: %w", name, err)
	}
	if pause {
		fmt.Fprintf(out, "UpdatePolicy %s paused (generation %d): it starts no node; nodes in flight finish\n", name, p.Generation)
	} else {
		fmt.Fprintf(out, "UpdatePolicy %s unpaused (generation %d)\n", name, p.Generation)
	}
	return nil
}
