package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// StartupStatus is the start-up timeline the controller recorded on a node
// (field startup of its nodehealth.io/boot record).
type StartupStatus struct {
	// Current is true when the record names the node's current boot and
	// UID; false when the node rebooted or was re-created since, and the
	// timeline is of the start-up before.
	Current  bool                         `json:"current"`
	Timeline nodev1alpha1.StartupTimeline `json:"timeline"`
}

// StartupNote is written into every -o json|yaml report of `status --startup`.
const StartupNote = "Recorded by the node-health controller when it ungated each node after a start-up. " +
	"Start and every duration but sinceCreation are the controller's clock, from when it observed the cause " +
	"(a new node, a reboot, a re-creation, or its own start finding the node gated: foundAtStart); " +
	"sinceCreation runs from the Node's creationTimestamp (the API server's clock) to the ungate."

// StartupReport is the -o json|yaml form of `status --startup`: the nodes
// with a recorded start-up, slowest first, and those without one.
type StartupReport struct {
	// apiVersion plugin.nodehealth.io/v1alpha1, kind NodeStartupReport.
	metav1.TypeMeta
	Time  metav1.Time   `json:"time"`
	Note  string        `json:"note"`
	Nodes []NodeStartup `json:"nodes"`
	// WithoutTimeline are the nodes whose boot record holds no start-up
	// timeline (found ready by the controller, never gated, or ungated by
	// a controller that did not record one).
	WithoutTimeline []string `json:"withoutTimeline,omitempty"`
}

// NodeStartup is one node of a StartupReport.
type NodeStartup struct {
	Node string `json:"node"`
	StartupStatus
}

// startupOf reads the start-up timeline from a node's boot record. The record
// is parsed leniently: fields a newer controller adds are ignored, and a
// record an older one wrote has no timeline.
func startupOf(node *corev1.Node) *StartupStatus {
	var rec struct {
		BootID  string                        `json:"bootID"`
		UID     types.UID                     `json:"uid"`
		Startup *nodev1alpha1.StartupTimeline `json:"startup"`
	}
	value := node.Annotations[nodev1alpha1.BootAnnotation]
	if value == "" || json.Unmarshal([]byte(value), &rec) != nil || rec.Startup == nil {
		return nil
	}
	return &StartupStatus{Current: rec.BootID == node.Status.NodeInfo.BootID && rec.UID == node.UID, Timeline: *rec.Startup}
}

// startupReport reads the named nodes (every node when names is empty) and
// sorts those with a timeline slowest first. Only Nodes are read.
func startupReport(ctx context.Context, client kubernetes.Interface, names []string, now time.Time) (StartupReport, error) {
	report := StartupReport{TypeMeta: metav1.TypeMeta{APIVersion: ReportAPIVersion, Kind: "NodeStartupReport"}, Time: metav1.NewTime(now), Note: StartupNote,
		Nodes: []NodeStartup{}}
	var nodes []corev1.Node
	if len(names) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return report, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
	} else {
		for _, name := range names {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return report, err
			}
			nodes = append(nodes, *n)
		}
	}
	for i := range nodes {
		if s := startupOf(&nodes[i]); s != nil {
			report.Nodes = append(report.Nodes, NodeStartup{Node: nodes[i].Name, StartupStatus: *s})
		} else {
			report.WithoutTimeline = append(report.WithoutTimeline, nodes[i].Name)
		}
	}
	sort.SliceStable(report.Nodes, func(i, j int) bool {
		a, b := report.Nodes[i], report.Nodes[j]
		if a.Timeline.Ready.Duration != b.Timeline.Ready.Duration {
			return a.Timeline.Ready.Duration > b.Timeline.Ready.Duration
		}
		return a.Node < b.Node
	})
	sort.Strings(report.WithoutTimeline)
	return report, nil
}

// printStartup writes a start-up report in the requested format.
func printStartup(w io.Writer, format string, report StartupReport) error {
	if printed, err := printData(w, format, report); printed {
		return err
	}
	if len(report.Nodes) > 0 {
		tw := newTable(w, "NODE", "CAUSE", "READY", "SLOWEST", "NEXT", "SINCE CREATION", "STARTED", "NOTE")
		for _, n := range report.Nodes {
			tl := n.Timeline
			slowest, next := "-", "-"
			if len(tl.Extensions) > 0 {
				slowest = extensionTime(tl.Extensions[0])
			}
			if len(tl.Extensions) > 1 {
				next = extensionTime(tl.Extensions[1])
			}
			created := "-"
			if tl.SinceCreation != nil {
				created = nodev1alpha1.ShortDuration(tl.SinceCreation.Duration)
			}
			var notes []string
			if !n.Current {
				notes = append(notes, "earlier boot")
			}
			if tl.FoundAtStart {
				notes = append(notes, "found at controller start")
			}
			note := "-"
			if len(notes) > 0 {
				note = strings.Join(notes, ", ")
			}
			tw.row(n.Node, tl.Cause, nodev1alpha1.ShortDuration(tl.Ready.Duration), slowest, next, created,
				duration.HumanDuration(report.Time.Sub(tl.Start.Time))+" ago", note)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, "No node has a recorded start-up timeline.")
	}
	if n := len(report.WithoutTimeline); n > 0 {
		shown := report.WithoutTimeline
		more := ""
		if len(shown) > 5 {
			shown, more = shown[:5], fmt.Sprintf(" and %d more", n-5)
		}
		fmt.Fprintf(w, "%s without a start-up timeline: %s%s.\n", capitalize(plural(n, "node")), strings.Join(shown, ", "), more)
	}
	return nil
}

func extensionTime(e nodev1alpha1.StartupExtension) string {
	if e.Ready == nil {
		return e.Name + " never"
	}
	return e.Name + " " + nodev1alpha1.ShortDuration(e.Ready.Duration)
}

// causeEvent says what the controller observed at a timeline's start.
func causeEvent(cause string) string {
	switch cause {
	case nodev1alpha1.ReasonNodeRegistered:
		return "new node observed"
	case nodev1alpha1.ReasonNodeRebooted:
		return "reboot observed"
	case nodev1alpha1.ReasonNodeRecreated:
		return "re-creation observed"
	case nodev1alpha1.ReasonControllerStarted:
		return "controller started, found the node gated"
	}
	return "gate began (" + cause + ")"
}

// explainStartup says, in sentences and a timeline, how the node's last
// recorded start-up went.
func explainStartup(n NodeStatus) []string {
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	startingUp := isStartingUp(n)
	s := n.Startup
	if s == nil {
		if startingUp {
			say("The node is starting up: the controller records its start-up timeline in the boot record when it ungates it.")
		} else {
			say("No start-up timeline is recorded on the node (annotation %s): the controller records one when it ungates a new, rebooted or re-created node; a node it found ready, or one ungated by a controller older than the timeline, has none.",
				nodev1alpha1.BootAnnotation)
		}
		return out
	}
	tl := s.Timeline
	if !s.Current {
		what := "The node rebooted or was re-created since its last recorded start-up"
		if startingUp {
			what += " and is starting up now (its timeline is recorded when it is ungated)"
		}
		say("%s; the start-up before was:", what)
	}
	say("Start-up timeline (the controller's clock, from when it observed the cause at %s):", tl.Start.UTC().Format(time.RFC3339))
	ready, never := splitByReadiness(tl.Extensions)
	out = append(out, alignTimeline(timelineRows(tl, ready, never))...)
	return append(out, timelineSummary(tl, ready)...)
}

// isStartingUp reports whether the node is gated for one of the causes a
// start-up timeline is recorded for.
func isStartingUp(n NodeStatus) bool {
	if !n.Gated || n.Condition == nil {
		return false
	}
	switch n.Condition.Reason {
	case nodev1alpha1.ReasonNodeRegistered, nodev1alpha1.ReasonNodeRebooted, nodev1alpha1.ReasonNodeRecreated,
		nodev1alpha1.ReasonControllerStarted, nodev1alpha1.ReasonStartupTimeout:
		return true
	}
	return false
}

// splitByReadiness returns the extensions that became ready, earliest first
// (the timeline reads top to bottom), and those that never did.
func splitByReadiness(exts []nodev1alpha1.StartupExtension) (ready, never []nodev1alpha1.StartupExtension) {
	ready = make([]nodev1alpha1.StartupExtension, 0, len(exts))
	for _, e := range exts {
		if e.Ready == nil {
			never = append(never, e)
		} else {
			ready = append(ready, e)
		}
	}
	sort.SliceStable(ready, func(i, j int) bool { return nodev1alpha1.Slower(ready[j], ready[i]) })
	return ready, never
}

// timelineRows are the timeline's rows: when (from the cause) and what.
func timelineRows(tl nodev1alpha1.StartupTimeline, ready, never []nodev1alpha1.StartupExtension) [][2]string {
	rows := [][2]string{{"+0s", causeEvent(tl.Cause)}}
	if tl.Omitted > 0 {
		rows = append(rows, [2]string{"", fmt.Sprintf("(%s not recorded, each ready no later than the ones below)", plural(int(tl.Omitted), "faster extension"))})
	}
	for i, e := range ready {
		what := e.Name + ": first ready renewal"
		if i == len(ready)-1 && i > 0 {
			what += fmt.Sprintf(" (the last, %s after %s)", nodev1alpha1.ShortDuration(e.Ready.Duration-ready[i-1].Ready.Duration), ready[i-1].Name)
		}
		rows = append(rows, [2]string{"+" + nodev1alpha1.ShortDuration(e.Ready.Duration), what})
	}
	rows = append(rows, [2]string{"+" + nodev1alpha1.ShortDuration(tl.Ready.Duration), "ungated"})
	for _, e := range never {
		rows = append(rows, [2]string{"never", e.Name + ": not ready at the ungate (failed open after its startup timeout)"})
	}
	return rows
}

// alignTimeline indents the rows and pads their first column to one width.
func alignTimeline(rows [][2]string) []string {
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, fmt.Sprintf("  %-*s  %s", width, r[0], r[1]))
	}
	return out
}

// timelineSummary says which extension the start-up waited for last and what
// the times count from.
func timelineSummary(tl nodev1alpha1.StartupTimeline, ready []nodev1alpha1.StartupExtension) []string {
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	switch {
	case len(ready) == 1:
		say("%s was the only extension to wait for; the node was ungated %s after the start.", ready[0].Name, nodev1alpha1.ShortDuration(tl.Ready.Duration))
	case len(ready) > 1:
		last, before := ready[len(ready)-1], ready[len(ready)-2]
		say("%s was the last extension to become ready, %s after %s; the node was ungated %s after the start.", last.Name,
			nodev1alpha1.ShortDuration(last.Ready.Duration-before.Ready.Duration), before.Name, nodev1alpha1.ShortDuration(tl.Ready.Duration))
	}
	if tl.SinceCreation != nil {
		say("From the Node's creationTimestamp (the API server's clock) to the ungate (the controller's clock): %s; the controller observed the node about %s after its creation.",
			nodev1alpha1.ShortDuration(tl.SinceCreation.Duration), nodev1alpha1.ShortDuration(tl.SinceCreation.Duration-tl.Ready.Duration))
	}
	if tl.FoundAtStart {
		say("The controller found this start-up under way when it started (or took over as leader), so the times count from that moment: the start-up itself began earlier.")
	}
	return out
}
