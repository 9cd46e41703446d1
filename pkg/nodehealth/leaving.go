package nodehealth

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// leavingFacts are the parts of a Node that can make it leaving
// (docs/controller.md, "Leaving nodes"). The rule is nodeutil's, shared with
// the update operator, which counts leaving nodes toward an UpdatePolicy's
// budget: both must agree on which node is under someone else's maintenance.
type leavingFacts = nodeutil.LeavingFacts

// lifecycleCondition is one True KEP-5683 lifecycle condition written by
// someone other than nodehealth.
type lifecycleCondition = nodeutil.LifecycleCondition

// leavingFactsOf reads node's leaving facts with the configured taints.
func leavingFactsOf(node *v1.Node, opts *Options) leavingFacts {
	return nodeutil.LeavingFactsOf(node, opts.LeavingNodeTaints)
}

// leavingSignal judges the node's leaving facts at now.
func (s *nodeState) leavingSignal(now time.Time, opts *Options) string {
	why, _ := s.leaving.Signal(now, opts.LifecycleConditionMaxAge)
	return why
}
