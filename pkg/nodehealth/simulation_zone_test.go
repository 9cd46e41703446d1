package nodehealth_test

import (
	"flag"
	"slices"

	v1 "k8s.io/api/core/v1"

	"nodehealth.io/nodehealth/test/sim"
)

var simZones = flag.Bool("sim.zones", true, "draw, on a share of the seeds, changes of running nodes' zone labels (false: zones as created, the schedule before they were drawn)")

// zoneStream is xored into the seed for zoneFaults' stream: a stream of its
// own, so that a seed runs the schedule it ran before zone changes were
// drawn until the first of them.
const zoneStream = 0x7a6f6e65 // "zone"

// zoneChangeShare is the share of seeds that change zone labels while they
// run; zoneChangeChance the chance, each second of those seeds, that one
// node's label changes. About 4 changes in a 300 s seed: enough for a
// failing node to change zones now and then, few enough that the zones
// keep enough nodes for their thresholds to mean something.
const (
	zoneChangeShare  = 0.4
	zoneChangeChance = 0.015
)

// drawZoneChanges decides whether the seed changes zone labels while it
// runs, and if so starts their stream. The regression seeds keep their
// zones: each replays what it was kept for. The open findings draw (none
// registered before this class draws a change): a seed this class finds
// draws its changes as an open finding, and once fixed belongs in a list
// of seeds that draw, as simEvictionRegressions are for the eviction mode.
func (s *simulation) drawZoneChanges(seed uint64) {
	if !*simZones || slices.Contains(simRegressions.Seeds(), seed) || slices.Contains(simEvictionRegressions.Seeds(), seed) {
		return
	}
	s.zrng = sim.Stream(seed, zoneStream, zoneChangeShare)
}

// zoneFaults changes one running node's topology.kubernetes.io/zone label
// now and then, as an admin relabelling nodes or a cloud provider's node
// controller correcting them does: to the other zone, to a zone no node had
// (z2), or off; a node without one gets one. docs/controller.md counts a
// node in the zone its label names at its latest evaluation, so the model
// is told only the new label, as for any other label change.
func (s *simulation) zoneFaults() {
	r := s.zrng
	if r == nil || !r.Chance(zoneChangeChance) {
		return
	}
	n := s.nodes[r.Intn(len(s.nodes))]
	from := n.zone
	switch d := r.Intn(4); {
	case from == "":
		n.zone = []string{"z0", "z1"}[d%2]
	case d < 2:
		n.zone = map[string]string{"z0": "z1", "z1": "z0", "z2": "z0", "z3": "z1"}[from]
	case d == 2:
		n.zone = "z2"
		if from == "z2" {
			n.zone = "z1"
		}
	default:
		n.zone = ""
	}
	if !n.finalizeAt.IsZero() {
		// Deleted, held by its finalizer: nobody relabels it (the draws
		// are made, so that the stream does not depend on it).
		n.zone = from
		return
	}
	s.mutateNode(n, false, func(node *v1.Node) {
		if n.zone == "" {
			delete(node.Labels, v1.LabelTopologyZone)
			return
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[v1.LabelTopologyZone] = n.zone
	})
	s.trace.Add("t=%s %s zone label %s -> %s", s.at(), n.name, zoneName(from), zoneName(n.zone))
}

func zoneName(z string) string {
	if z == "" {
		return "none"
	}
	return z
}

// simZoneRegressions are the seeds the zone-change class found something
// with, kept with what they found; unlike simRegressions, they draw their
// zone changes.
var simZoneRegressions = sim.Regressions{
	// The controller's (the fresh seeds of the class's first run,
	// 2026-11-29): n4, relabelled into z1 at 3m18s, released in the second
	// the cluster's suspension ended and the controller tainted n1 and n7;
	// the suspension that followed took n7's written taint, not yet in the
	// cache, for a held gate's and removed it (the defect of
	// 1221797598538672297).
	{Seed: 10922137312603887257, Name: "a failure taint written in the second the blast radius resumes stays when the next failure of that second suspends it again"},
}
