package nodehealth_test

import (
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"nodehealth.io/nodehealth/test/sim"
)

var simWorkers = flag.Int("sim.workers", 0, "the controller's node workers in every seed (0: drawn per seed; 1: the driver runs every sync itself, the schedule before workers were drawn)")

// workersStream is xored into the seed for drawWorkers' stream: a stream of
// its own, so that a seed that draws one worker runs the schedule it ran
// before workers were drawn.
const workersStream = 0x776f726b657273 // "workers"

// oneWorkerShare is the share of fresh seeds that keep one worker; the others
// run 2 to maxSimWorkers (production runs 10, but more than a few seldom
// have keys to work on at the same instant in a cluster of at most 39 nodes).
const (
	oneWorkerShare = 0.3
	maxSimWorkers  = 4
)

// deliverBetween is the chance, at each point where every worker is held at
// a request and a watch event is pending, that the event is delivered
// before the next request is served: a worker's cache then changes between
// its evaluation and its write, as it does when the watch is quicker than
// the write.
const deliverBetween = 0.25

// The names the gate gives the workers: the node queue's and the eviction
// queue's (production runs one eviction worker beside the node workers).
const (
	nodeWorker     = "worker"
	evictionWorker = "eviction worker"
)

// drawWorkers draws how many node workers the seed's controller runs, and
// starts the stream that interleaves them. The regression seeds kept before
// workers were drawn keep one: each replays what it was kept for.
// -sim.workers, or force, sets the number whatever the seed.
func (s *simulation) drawWorkers(seed uint64, force int) {
	r := sim.NewRand(seed ^ workersStream)
	s.wrng, s.workers = r, 1
	switch {
	case force > 0:
		s.workers = force
	case *simWorkers > 0:
		s.workers = *simWorkers
	case slices.Contains(simRegressions.Seeds(), seed) || slices.Contains(simEvictionRegressions.Seeds(), seed) ||
		slices.Contains(simZoneRegressions.Seeds(), seed):
	case !r.Chance(oneWorkerShare):
		s.workers = 2 + r.Intn(maxSimWorkers-1)
	}
	if s.workers > 1 {
		s.trace.Add("%d workers", s.workers)
	}
}

// drainWorkers is drain for several workers: the controller's node workers
// and its eviction worker, each on a goroutine of its own, take what is
// queued; every request they make waits at the gate, and the seed's stream
// picks which one is served next (or, now and then, delivers a pending
// watch event first). Between two requests one worker runs alone, so the
// seed orders every step, and a race between two workers' read-decide-write
// is one of the orders it draws. drain has waited for the handlers and
// released what came due; it reports whether any worker ran.
func (s *simulation) drainWorkers() bool {
	worked := false
	for {
		if s.startWorkers() {
			worked = true
		}
		held := s.gate.Held()
		if len(held) == 0 {
			return worked
		}
		if s.api.Pending() > 0 && s.wrng.Chance(deliverBetween) && s.deliverBetween(held) {
			continue
		}
		i := s.wrng.Intn(len(held))
		if len(held) > 1 {
			s.overlaps++
			s.interleaving.Add("t=%s serve %s (held: %s)", s.at(), held[i], heldString(held))
		}
		s.gateStep(func(ctx context.Context) error { return s.gate.Release(ctx, i) })
	}
}

// startWorkers starts a worker on each queued key a free worker would take
// at once, each running until its first request: the node workers up to
// their number, and the one eviction worker. It reports whether it started
// any.
func (s *simulation) startWorkers() bool {
	started := false
	for {
		nodes, evicting := 0, false
		for _, h := range s.gate.Held() {
			if h.Name == evictionWorker {
				evicting = true
			} else {
				nodes++
			}
		}
		q, e := s.queues[0], s.queues[1]
		switch {
		case nodes < s.workers && q.Len() > 0:
			s.gateStep(func(ctx context.Context) error { return q.turns.Grant(ctx, nodeWorker) })
		case !evicting && e.Len() > 0:
			s.gateStep(func(ctx context.Context) error { return e.turns.Grant(ctx, evictionWorker) })
		default:
			return started
		}
		started = true
	}
}

// gateStep runs one step of the gate: a worker runs until its next request
// or its end.
func (s *simulation) gateStep(step func(context.Context) error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if err := step(ctx); err != nil {
		s.t.Fatalf("t=%s %v\nthe workers' last steps:\n%s", s.at(), err, s.interleaving.Tail(20))
	}
}

// deliverBetween delivers one pending watch event while the workers are held
// and waits for the handlers, so that the workers go on with a cache that
// changed under them. It reports whether there was an event to deliver
// (a stalled watch's are not).
func (s *simulation) deliverBetween(held []sim.HeldRequest) bool {
	s.t.Helper()
	s.deliveries.Add(1)
	if s.api.Deliver(1) == 0 {
		return false
	}
	s.releaseRetries()
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Minute)
	defer cancel()
	if err := s.api.Settle(ctx, s.handlersDone); err != nil {
		s.t.Fatalf("t=%s the handlers did not catch up with an event delivered between the workers' requests: %v", s.at(), err)
	}
	s.deliveredBetween++
	s.interleaving.Add("t=%s deliver an event (held: %s)", s.at(), heldString(held))
	return true
}

func heldString(held []sim.HeldRequest) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = h.String()
	}
	return strings.Join(parts, "; ")
}

// The same seed with several workers gives the same trace and the same
// interleaving: requests of different workers overlap, events are delivered
// between them, and the seed orders both.
func TestSimulationWithSeveralWorkersIsDeterministic(t *testing.T) {
	const seed, workers = 42, 3
	a := runSimulationWith(t, seed, 120, workers)
	b := runSimulationWith(t, seed, 120, workers)
	if a.overlaps == 0 || a.deliveredBetween == 0 {
		t.Fatalf("seed %d with %d workers: %d requests served while another worker's was held, %d events delivered between requests: nothing was interleaved",
			seed, workers, a.overlaps, a.deliveredBetween)
	}
	if a.trace.Hash() != b.trace.Hash() || a.interleaving.Hash() != b.interleaving.Hash() {
		t.Fatalf("seed %d with %d workers gave two runs:\n%s\n%s\n----\n%s\n%s", seed, workers, a.trace, a.interleaving, b.trace, b.interleaving)
	}
	t.Logf("%d requests served while another worker's was held, %d events delivered between requests", a.overlaps, a.deliveredBetween)
}
