package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// DefaultGateRecheck is how soon the start pass runs again while a gate
// holds a start back (Options.GateRecheck): the operator does not watch
// pods (a cluster-wide pod cache would cost more than every other informer
// together), so it lists again.
const DefaultGateRecheck = 10 * time.Second

// Reasons of the policy's Blocked condition.
const (
	BlockedByPods    = "BlockingPods"
	GateUnavailable  = "GateUnavailable"
	NotBlocked       = "NotBlocked"
	maxNamedBlockers = 3
)

// unfinishedPods is the field selector of the gates' LISTs: a pod that
// completed or failed no longer blocks, and the API server drops it.
const unfinishedPods = "status.phase!=Succeeded,status.phase!=Failed"

// podGate is what one start pass read of a policy's spec.gates.blockingPods.
type podGate struct {
	// anywhere and onNode are the selectors the pods were listed with, so
	// that a pass does not reuse a read of an edited spec.
	anywhere, onNode string
	// anywherePods are the unfinished pods anywhere selects, as
	// "namespace/name" in order.
	anywherePods []string
	// onNodePods are the unfinished pods onNode selects, by the node they
	// are bound to, in order; a pod not bound to a node blocks none.
	onNodePods map[string][]string
	// alerts keys the alert gates the sources were queried with; firing
	// are the alerts they answered.
	alerts string
	firing []firingAlert
	// recheck is when what holds a start back is read again: Options.GateRecheck
	// after the pods were listed, or sooner, when the shared answer of the
	// alert sources (alertAnswers) expires.
	recheck time.Time
	// err says why a selector's pods could not be listed or an alert
	// source not queried ("" when all were): every start of the policy
	// waits.
	err string
}

// gated reports whether the policy has a gate to read before a start.
func (p *policy) gated() bool {
	return p.blockingAnywhere != nil || p.blockingOnNode != nil || len(p.alerts) > 0
}

// selectorString is a selector's LIST form, "" for none.
func selectorString(s labels.Selector) string {
	if s == nil {
		return ""
	}
	return s.String()
}

// readGates lists the pods of the policy's gates, one LIST per selector
// across every namespace, straight from the API server: it runs only when
// the policy would start a node, so no pod is cached.
func (c *Controller) readGates(ctx context.Context, pol *policy) *podGate {
	g := &podGate{anywhere: selectorString(pol.blockingAnywhere), onNode: selectorString(pol.blockingOnNode), onNodePods: map[string][]string{},
		alerts: alertsKey(pol.alerts)}
	var errs []string
	if g.anywhere != "" {
		pods, err := c.listBlocking(ctx, g.anywhere)
		if err != nil {
			errs = append(errs, fmt.Sprintf("listing the pods of spec.gates.blockingPods.anywhere (%s): %v", g.anywhere, err))
		}
		for _, p := range pods {
			g.anywherePods = append(g.anywherePods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(g.anywherePods)
	}
	if g.onNode != "" {
		pods, err := c.listBlocking(ctx, g.onNode)
		if err != nil {
			errs = append(errs, fmt.Sprintf("listing the pods of spec.gates.blockingPods.onNode (%s): %v", g.onNode, err))
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				g.onNodePods[p.Spec.NodeName] = append(g.onNodePods[p.Spec.NodeName], p.Namespace+"/"+p.Name)
			}
		}
		for _, l := range g.onNodePods {
			sort.Strings(l)
		}
	}
	g.recheck = c.now().Add(c.opts.GateRecheck)
	if len(pol.alerts) > 0 {
		ans := c.answerAlerts(ctx, pol.alerts, time.Time{})
		g.firing = ans.firing
		errs = append(errs, ans.errs...)
		if r := ans.recheckAt(); r.Before(g.recheck) {
			g.recheck = r
		}
	}
	g.err = strings.Join(errs, "; ")
	return g
}

// listBlocking lists the unfinished pods a selector matches in every
// namespace. The phase is checked here too: the field selector is the API
// server's, and a pod read from elsewhere must not block for it.
func (c *Controller) listBlocking(ctx context.Context, selector string) ([]v1.Pod, error) {
	list, err := c.opts.Pods.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: unfinishedPods})
	if err != nil {
		return nil, err
	}
	out := make([]v1.Pod, 0, len(list.Items))
	for _, p := range list.Items {
		if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// gateReads are the gates read in one start pass, by policy: a policy's
// gates are listed at most once per pass.
type gateReads map[string]*podGate

// planGated plans the policy's starts and, when it would start a node and
// has gates, reads them (once per pass) and plans again with them.
func (c *Controller) planGated(ctx context.Context, snap *snapshot, pol *policy, reads gateReads) plan {
	p := planStarts(snap, pol)
	if !p.gatesUnread {
		return p
	}
	g := reads[pol.name]
	if g == nil || g.anywhere != selectorString(pol.blockingAnywhere) || g.onNode != selectorString(pol.blockingOnNode) ||
		g.alerts != alertsKey(pol.alerts) {
		g = c.readGates(ctx, pol)
		reads[pol.name] = g
	}
	snap.gates[pol.name] = g
	return planStarts(snap, pol)
}

// gateHolds reports whether the policy's gates hold back the start of node
// and notes why; it wakes the pass to look again. Without a read of the
// gates it holds nothing but marks the plan as needing one: the caller
// reads them and plans again before anything starts.
func (p *plan) gateHolds(now time.Time, pol *policy, node, target string) bool {
	if !pol.gated() {
		return false
	}
	g := p.gate
	if g == nil {
		p.gatesUnread = true
		return false
	}
	switch {
	case g.err != "":
		p.blocked = &blocked{reason: GateUnavailable, message: fmt.Sprintf("No node starts while a gate cannot be read (fail closed): %s", g.err)}
	case len(g.firing) > 0:
		names := make([]string, 0, len(g.firing))
		for _, f := range g.firing {
			names = append(names, f.String())
		}
		p.blocked = &blocked{reason: BlockedByAlerts, message: fmt.Sprintf("Alerts of spec.gates.alerts fire and hold back every start: %s", namedSome(names))}
	case len(g.anywherePods) > 0:
		p.blocked = &blocked{reason: BlockedByPods, message: fmt.Sprintf("Pods of spec.gates.blockingPods.anywhere hold back every start: %s",
			namedSome(g.anywherePods))}
	case len(g.onNodePods[node]) > 0:
		if p.blocked == nil {
			p.blocked = &blocked{reason: BlockedByPods}
		}
		p.blocked.nodes = append(p.blocked.nodes, node)
		p.notes[node] = note{"UpdateBlocked", fmt.Sprintf("Not starting the update to %s: pods of spec.gates.blockingPods.onNode of UpdatePolicy %s run on the node: %s",
			target, pol.name, namedSome(g.onNodePods[node]))}
		wake(&p.wake, g.recheckAfter(now))
		return true
	default:
		return false
	}
	wake(&p.wake, g.recheckAfter(now))
	return true
}

// recheckAfter is when a pass at now that the gates held reads them
// again: never before now, so a read that expired as the pass ran wakes
// the next one at once.
func (g *podGate) recheckAfter(now time.Time) time.Time {
	if g.recheck.IsZero() {
		return now.Add(DefaultGateRecheck)
	}
	if g.recheck.Before(now) {
		return now
	}
	return g.recheck
}

// blocked is why the policy's gates hold back starts: every start (a
// message already set), or the starts of nodes.
type blocked struct {
	reason, message string
	nodes           []string
}

// namedSome names the first pods and counts the rest, so the condition
// stays short when a selector matches hundreds.
func namedSome(pods []string) string {
	if len(pods) <= maxNamedBlockers {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:maxNamedBlockers], ", "), len(pods)-maxNamedBlockers)
}

// blockedCondition says what the gates hold back. The message names pods,
// not times, so that it changes only when they do.
func blockedCondition(p plan) metav1.Condition {
	b := p.blocked
	if b == nil {
		return condition(updatesv1alpha1.PolicyBlocked, false, NotBlocked, "No gate holds back a start")
	}
	if b.message != "" {
		return condition(updatesv1alpha1.PolicyBlocked, true, b.reason, b.message)
	}
	// A pod on every node (a DaemonSet's) would otherwise name them all.
	var why []string
	for _, n := range b.nodes[:min(len(b.nodes), maxNamedBlockers)] {
		why = append(why, fmt.Sprintf("%s (%s)", n, namedSome(p.gate.onNodePods[n])))
	}
	more := ""
	if len(b.nodes) > maxNamedBlockers {
		more = fmt.Sprintf(" and %d more nodes", len(b.nodes)-maxNamedBlockers)
	}
	return condition(updatesv1alpha1.PolicyBlocked, true, b.reason, fmt.Sprintf("Pods of spec.gates.blockingPods.onNode hold back the start of their nodes; other nodes may start: %s%s",
		strings.Join(why, "; "), more))
}

// parseGates reads spec.gates. An empty selector would match every pod and
// block the policy for good: the CRD refuses it, and so does the operator
// for an older CRD that let it through.
func (out *policy) parseGates(g *updatesv1alpha1.PolicyGates) error {
	if g == nil {
		return nil
	}
	if err := out.parseAlerts(g.Alerts); err != nil {
		return err
	}
	if g.BlockingPods == nil {
		if len(out.alerts) == 0 {
			return errors.New("spec.gates: set blockingPods, alerts or both")
		}
		return nil
	}
	for _, s := range []struct {
		field string
		sel   *metav1.LabelSelector
		into  *labels.Selector
	}{
		{"anywhere", g.BlockingPods.Anywhere, &out.blockingAnywhere},
		{"onNode", g.BlockingPods.OnNode, &out.blockingOnNode},
	} {
		if s.sel == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.sel)
		if err != nil {
			return fmt.Errorf("spec.gates.blockingPods.%s: %v", s.field, err)
		}
		if sel.Empty() {
			return fmt.Errorf("spec.gates.blockingPods.%s must not be empty: an empty selector matches every pod", s.field)
		}
		*s.into = sel
	}
	if out.blockingAnywhere == nil && out.blockingOnNode == nil {
		return errors.New("spec.gates.blockingPods: set anywhere, onNode or both")
	}
	return nil
}
