package nodehealth_test

import (
	"flag"
	"time"

	"nodehealth.io/nodehealth/test/sim"
)

var simUnseenRecreations = flag.Bool("sim.unseen-recreations", true, "draw, on a share of the seeds, Nodes re-created while the controller's Node watch is stalled, so that only the relist after a 410 shows the new object, as an update (false: the schedule before they were drawn)")

// unseenStream is xored into the seed for unseenRecreations' stream: a
// stream of its own, so that a seed runs the schedule it ran before these
// re-creations were drawn until the first of them.
const unseenStream = 0x756e7365656e // "unseen"

// unseenShare is the share of seeds that draw such re-creations;
// unseenChance the chance, each second of those seeds, of one: about three
// in a 300 s seed (at most one a minute, fewer where other relists came
// close).
const (
	unseenShare  = 0.3
	unseenChance = 0.01
)

// drawUnseenRecreations decides whether the seed re-creates Nodes behind a
// stalled watch, and if so starts the stream. No seed kept for what it
// found, in any list, draws them: each keeps the schedule it found its
// defect with, unless the class's own list keeps it for what this class
// found.
func (s *simulation) drawUnseenRecreations(seed uint64) {
	s.urng = newestClassStream(*simUnseenRecreations, seed, simUnseenRegressions, unseenStream, unseenShare)
}

// unseenRecreations replaces a Node by a new object of the same name while
// every Node watch is stalled, then ends those watches past a compaction:
// the deletion and the creation are never delivered, the reflectors get 410
// Gone and relist, and the informers hand the new object to their handlers
// as an update of the old one, a UID change. That is how a controller whose
// watch was down (an API server restart, a network partition) meets a
// machine replaced under the same name; the live deletion and creation of
// the schedule's other re-creations (recreate) are a new node. The
// controller must take it for a re-creation (NodeRecreated), nothing of
// what it knew of the old object carried over; the model is fed the same
// update (feedModel) and says so (model.Node's UID).
func (s *simulation) unseenRecreations(now time.Time) {
	r := s.urng
	if r == nil || !r.Chance(unseenChance) {
		return
	}
	n, taint := s.nodes[r.Intn(len(s.nodes))], r.Chance(0.5)
	// A relist costs each reflector a wall-clock back-off that doubles
	// while 410s come close together (apiFaults): at most one a minute.
	// The draws are made all the same, so that the stream does not depend
	// on it.
	if !s.lastRelist.IsZero() && now.Sub(s.lastRelist) < time.Minute {
		return
	}
	s.lastRelist = now
	s.api.Stall(nodesGVR, nil)
	s.recreate(n, now, taint)
	s.api.Compact(s.api.ResourceVersion())
	s.api.CloseWatches(nodesGVR)
	s.api.Unstall(nodesGVR)
	s.trace.Add("t=%s %s's re-creation unseen: the Node watches missed it and relist (410 Gone)", s.at(), n.name)
}

// simUnseenRegressions are the seeds this class found something with (it
// draws them whatever their share).
var simUnseenRegressions = sim.Regressions{
	// The controller's (the class's first 40 fresh seeds, 2026-12-01): n8,
	// in service, then n7, its failure held, re-created behind the stalled
	// watch, tainted at creation, while the canary's renewals failed; the
	// controller took the creation taint for an ended gate's and took it
	// off.
	{Seed: 12441625308791025956, Name: "the taint a Node re-created unseen was created with is its gate, kept while the own view is stale, whatever the old object's gate was (NodeRecreated)"},
}
