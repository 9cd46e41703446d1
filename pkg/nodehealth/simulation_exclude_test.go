package nodehealth_test

import (
	"flag"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/sim"
)

var simExclusions = flag.Bool("sim.exclusions", true, "draw, on a share of the seeds, nodes an admin excludes (nodehealth.io/exclude=true) and lets back in (false: the schedule before exclusions were drawn)")

// excludeStream is xored into the seed for excludeFaults' stream: a stream of
// its own, so that a seed runs the schedule it ran before exclusions were
// drawn until the first of them.
const excludeStream = 0x6578636c756465 // "exclude"

// excludeShare is the share of seeds in which an admin excludes nodes;
// excludeChance the chance, each second of those seeds, that one node's
// label is set or taken off. About 2 changes in a 300 s seed: a node
// excluded for a minute or two on average, whatever state it was in.
const (
	excludeShare  = 0.25
	excludeChance = 0.008
)

// drawExclusions decides whether an admin excludes nodes while the seed
// runs, and if so starts the stream. The seeds kept for what they found keep
// their schedules.
func (s *simulation) drawExclusions(seed uint64) {
	s.xrng = newerClassStream(*simExclusions, seed, simExcludeRegressions, excludeStream, excludeShare)
}

// excludeFaults labels one node nodehealth.io/exclude=true now and then, or
// takes the label off one that has it, as an admin does to take a node out
// of the controller's hands (docs/controller.md, "Exclusion"): its taint
// goes, its condition reads Unknown/NodeExcluded, it counts in no blast
// radius and is never escalated; taken off, the node is one found at start
// again. The model is told through the Node's labels (model.Node.Excluded).
func (s *simulation) excludeFaults() {
	r := s.xrng
	if r == nil || !r.Chance(excludeChance) {
		return
	}
	// Most exclusions end while the seed runs: an admin takes a node out
	// for some work and lets it back in.
	var excluded []*simNode
	for _, n := range s.nodes {
		if n.excluded {
			excluded = append(excluded, n)
		}
	}
	n := s.nodes[r.Intn(len(s.nodes))]
	if len(excluded) > 0 && r.Chance(0.6) {
		n = excluded[r.Intn(len(excluded))]
	}
	if !n.finalizeAt.IsZero() {
		// Deleted, held by its finalizer: nobody relabels it (the draw is
		// made, so that the stream does not depend on it).
		return
	}
	n.excluded = !n.excluded
	s.mutateNode(n, false, func(node *v1.Node) {
		if !n.excluded {
			delete(node.Labels, nodev1alpha1.ExcludeLabel)
			return
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[nodev1alpha1.ExcludeLabel] = "true"
	})
	if n.excluded {
		s.trace.Add("t=%s %s excluded (%s=true)", s.at(), n.name, nodev1alpha1.ExcludeLabel)
	} else {
		s.trace.Add("t=%s %s no longer excluded", s.at(), n.name)
	}
}

// simExcludeRegressions are the seeds the exclusion class found something
// with (it draws them whatever their share).
var simExcludeRegressions = sim.Regressions{
	// The model's (make simulate-fresh on f14a986): a node let back in
	// right after its update's reboot is found as at start, and the
	// release still on the updater's Lease is taken for its current boot.
	{Seed: 317045665190767694, Name: "a node let back in after an exclusion takes the release it finds for its current boot (PlannedMaintenance)"},
}
