package nodeutil

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// LeavingFacts are the parts of a Node that can make it leaving: it is being
// deleted, it carries a leaving taint, or someone else's KEP-5683 lifecycle
// condition says it is drained or under maintenance. The controller (which
// then neither escalates the node nor counts it in the blast radius) and the
// update operator (which counts it toward an UpdatePolicy's budget) read the
// same signals, so one rule lives here. The facts are kept raw, not judged:
// whether a foreign condition still counts depends on the clock, so each
// caller judges them at its own instant (Signal).
type LeavingFacts struct {
	Deleting bool
	// Taint is the first leaving taint the node carries.
	Taint         string
	Unschedulable bool
	// Conditions are the foreign lifecycle conditions that are True.
	Conditions []LifecycleCondition
}

// LifecycleCondition is one True KEP-5683 lifecycle condition written by
// someone other than nodehealth.
type LifecycleCondition struct {
	Kind, Reason string
	Since        time.Time
}

// LeavingLifecycleConditions are the KEP-5683 condition types that make a
// node leaving when True (MaintenancePlanned does not: the node is still in
// service).
var LeavingLifecycleConditions = []string{
	nodev1alpha1.LifecycleConditionDrainInProgress,
	nodev1alpha1.LifecycleConditionDrained,
	nodev1alpha1.LifecycleConditionMaintenanceInProgress,
}

// LeavingFactsOf reads node's leaving facts; taints are the leaving taint
// keys of the configuration.
func LeavingFactsOf(node *v1.Node, taints sets.Set[string]) LeavingFacts {
	l := LeavingFacts{Deleting: node.DeletionTimestamp != nil, Unschedulable: node.Spec.Unschedulable}
	for _, t := range node.Spec.Taints {
		if taints.Has(t.Key) {
			l.Taint = t.Key
			break
		}
	}
	for _, kind := range LeavingLifecycleConditions {
		for _, c := range node.Status.Conditions {
			if string(c.Type) == kind && c.Status == v1.ConditionTrue && !nodev1alpha1.OwnLifecycleReason(c.Reason) {
				l.Conditions = append(l.Conditions, LifecycleCondition{Kind: kind, Reason: c.Reason, Since: c.LastTransitionTime.Time})
				break
			}
		}
	}
	return l
}

// Equal reports whether both describe the same signals.
func (l LeavingFacts) Equal(o LeavingFacts) bool {
	return l.Deleting == o.Deleting && l.Taint == o.Taint && l.Unschedulable == o.Unschedulable &&
		slices.EqualFunc(l.Conditions, o.Conditions, func(a, b LifecycleCondition) bool {
			return a.Kind == b.Kind && a.Reason == b.Reason && a.Since.Equal(b.Since)
		})
}

// Signal says why the node is leaving at now ("" when it is not), and when
// that answer changes without any event (zero: never): a foreign lifecycle
// condition on a schedulable node counts only for maxAge after its
// lastTransitionTime, so that a condition nobody cleared does not exempt the
// node forever.
func (l LeavingFacts) Signal(now time.Time, maxAge time.Duration) (why string, changes time.Time) {
	switch {
	case l.Deleting:
		return "deletionTimestamp set", time.Time{}
	case l.Taint != "":
		return "taint " + l.Taint, time.Time{}
	}
	for _, c := range l.Conditions {
		desc := fmt.Sprintf("condition %s=True, reason %s", c.Kind, c.Reason)
		if l.Unschedulable {
			return desc + ", node unschedulable", time.Time{}
		}
		if end := c.Since.Add(maxAge); now.Before(end) {
			return desc + fmt.Sprintf(", since %s", c.Since.UTC().Format(time.RFC3339)), end
		}
	}
	return "", time.Time{}
}

// Leaving says why node is leaving at now ("" when it is not), with the
// leaving taint keys taints and a foreign lifecycle condition on a
// schedulable node counting for maxAge after its lastTransitionTime.
func Leaving(node *v1.Node, taints sets.Set[string], maxAge time.Duration, now time.Time) string {
	why, _ := LeavingFactsOf(node, taints).Signal(now, maxAge)
	return why
}
