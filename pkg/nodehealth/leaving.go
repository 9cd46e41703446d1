package nodehealth

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// leavingFacts are the parts of a Node that can make it leaving
// (docs/controller.md, "Leaving nodes"): it is being deleted, it carries a
// taint of leavingNodeTaints, or someone else's KEP-5683 lifecycle condition
// says it is drained or under maintenance. The facts are kept raw, not
// judged: whether a foreign condition still counts depends on the clock, so
// the evaluation and the blast-radius recount judge them at their own instant
// (signal).
type leavingFacts struct {
	deleting bool
	// taint is the first taint of leavingNodeTaints the node carries.
	taint         string
	unschedulable bool
	// conditions are the foreign lifecycle conditions that are True.
	conditions []lifecycleCondition
}

// lifecycleCondition is one True KEP-5683 lifecycle condition written by
// someone other than nodehealth.
type lifecycleCondition struct {
	kind, reason string
	since        time.Time
}

// leavingLifecycleConditions are the KEP-5683 condition types that make a
// node leaving when True (MaintenancePlanned does not: the node is still in
// service).
var leavingLifecycleConditions = []string{
	nodev1alpha1.LifecycleConditionDrainInProgress,
	nodev1alpha1.LifecycleConditionDrained,
	nodev1alpha1.LifecycleConditionMaintenanceInProgress,
}

// leavingFactsOf reads node's leaving facts with the configured taints.
func leavingFactsOf(node *v1.Node, opts *Options) leavingFacts {
	l := leavingFacts{deleting: node.DeletionTimestamp != nil, unschedulable: node.Spec.Unschedulable}
	for _, t := range node.Spec.Taints {
		if opts.LeavingNodeTaints.Has(t.Key) {
			l.taint = t.Key
			break
		}
	}
	for _, kind := range leavingLifecycleConditions {
		for _, c := range node.Status.Conditions {
			if string(c.Type) == kind && c.Status == v1.ConditionTrue && !nodev1alpha1.OwnLifecycleReason(c.Reason) {
				l.conditions = append(l.conditions, lifecycleCondition{kind: kind, reason: c.Reason, since: c.LastTransitionTime.Time})
				break
			}
		}
	}
	return l
}

func (l leavingFacts) equal(o leavingFacts) bool {
	return l.deleting == o.deleting && l.taint == o.taint && l.unschedulable == o.unschedulable &&
		slices.EqualFunc(l.conditions, o.conditions, func(a, b lifecycleCondition) bool {
			return a.kind == b.kind && a.reason == b.reason && a.since.Equal(b.since)
		})
}

// signal says why the node is leaving at now ("" when it is not), and when
// that answer changes without any event (zero: never): a foreign lifecycle
// condition on a schedulable node counts only for maxAge after its
// lastTransitionTime, so that a condition nobody cleared does not exempt the
// node forever.
func (l leavingFacts) signal(now time.Time, maxAge time.Duration) (why string, changes time.Time) {
	switch {
	case l.deleting:
		return "deletionTimestamp set", time.Time{}
	case l.taint != "":
		return "taint " + l.taint, time.Time{}
	}
	for _, c := range l.conditions {
		desc := fmt.Sprintf("condition %s=True, reason %s", c.kind, c.reason)
		if l.unschedulable {
			return desc + ", node unschedulable", time.Time{}
		}
		if end := c.since.Add(maxAge); now.Before(end) {
			return desc + fmt.Sprintf(", since %s", c.since.UTC().Format(time.RFC3339)), end
		}
	}
	return "", time.Time{}
}

// leavingSignal judges the node's leaving facts at now.
func (s *nodeState) leavingSignal(now time.Time, opts *Options) string {
	why, _ := s.leaving.signal(now, opts.LifecycleConditionMaxAge)
	return why
}
