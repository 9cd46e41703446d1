package nodehealth_test

import (
	"flag"
	"slices"
	"time"

	"nodehealth.io/nodehealth/test/sim"
)

var simNodeDeletions = flag.Bool("sim.node-deletions", true, "draw, on a share of the seeds, Nodes deleted outright, most of them failing ones (false: the schedule before they were drawn)")

// nodeDeleteStream is xored into the seed for nodeDeletions' stream: a stream
// of its own, so that a seed runs the schedule it ran before these deletions
// were drawn until the first of them.
const nodeDeleteStream = 0x6e6f64656c // "nodel"

// nodeDeleteShare is the share of seeds that draw such deletions;
// nodeDeleteChance the chance, each second of those seeds, of one: about
// three in a 300 s seed. nodeDeleteFailing is the share of them that take a
// failing node when there is one.
const (
	nodeDeleteShare   = 0.3
	nodeDeleteChance  = 0.01
	nodeDeleteFailing = 0.7
)

// drawNodeDeletions decides whether Nodes are deleted outright while the seed
// runs, and if so starts the stream. No seed kept for what it found, in any
// list, draws them, unless the class's own list keeps it.
func (s *simulation) drawNodeDeletions(seed uint64) {
	s.nrng = newestClassStream(*simNodeDeletions, seed, simNodeDeleteRegressions, nodeDeleteStream, nodeDeleteShare)
}

// nodeDeletions deletes a Node now and then with no leaving signal before it,
// as node auto-repair does with a node that stays unhealthy (GKE's, Karpenter's
// node repair), as the cloud's node lifecycle controller does once the
// instance is gone, or `kubectl delete node`. Most take a failing node — one
// an extension of which is dead, released or rebooting — which is what a
// repair removes and what the blast radius counts: its deletion can bring a
// suspended zone, or the cluster, below its resume point, where a scale-down
// of leaving nodes, which count nowhere, never does. The model is told
// through the informer's deletion (model.NodeDeleted); the node's pods and,
// garbage collected, its Leases go with it.
func (s *simulation) nodeDeletions(now time.Time) {
	r := s.nrng
	if r == nil || !r.Chance(nodeDeleteChance) {
		return
	}
	var all, failing []*simNode
	for _, n := range s.nodes {
		if n.leavingTaint != "" || !n.removeAt.IsZero() || !n.finalizeAt.IsZero() {
			continue // the leaving nodes' own schedule deletes them
		}
		all = append(all, n)
		if s.failingNode(n, now) {
			failing = append(failing, n)
		}
	}
	if len(all) <= 4 {
		return // keep a cluster to judge
	}
	cands := all
	if len(failing) > 0 && r.Chance(nodeDeleteFailing) {
		cands = failing
	}
	n := cands[r.Intn(len(cands))]
	wasFailing := s.failingNode(n, now)
	s.removeNode(n) // no leaving taint, so no finalizer holds it: gone now
	s.nodes = slices.DeleteFunc(s.nodes, func(m *simNode) bool { return m == n })
	s.trace.Add("t=%s %s deleted outright (failing %v)", s.at(), n.name, wasFailing)
}

// failingNode reports whether one of the extensions the node requires and
// that gate it is dead or released, or the node is rebooting: what the
// driver did to it, not what the controller or the model concluded (cni
// only where the node's label asks for it, as renewals count it).
func (s *simulation) failingNode(n *simNode, now time.Time) bool {
	if !now.Before(n.downFrom) && now.Before(n.downUntil) {
		return true
	}
	for _, a := range n.agents {
		if !a.registered && (a.ext != "cni" || n.cni) && (!a.alive || a.released != "") {
			return true
		}
	}
	return false
}

// simNodeDeleteRegressions are the seeds this class found something with (it
// draws them whatever their share).
var simNodeDeleteRegressions = sim.Regressions{
	// The driver's (make simulate SEEDS=200, 2026-12-02): n0, failing, was
	// deleted outright while no leader ran; the next leader never saw it,
	// the model, never told, still counted it in its zone.
	{Seed: 2731414471645490661, Name: "a Node deleted while no leader runs is gone for the next leader and for the model"},
}
