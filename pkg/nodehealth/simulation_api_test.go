package nodehealth_test

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/sim"
)

// The simulation's API-server faults (issue 35): what a real kube-apiserver
// and its etcd do to the controller besides conflicts and lost answers. They
// are drawn from a stream of their own (apiFaultsStream), so that the seeds
// kept before they were added draw the same schedule of the world until the
// first of them.

// apiFaultsStream is xored into the seed for the API-server faults' stream.
const apiFaultsStream = 0x6170692d6661756c // "api-faul"

// outageCatchUp is how long after an outage of its writes the controller
// may still differ from the model, which takes every decision as written:
// the controller retries a refused write in the next simulated second
// (immediateRetry), but a gate it could not write is only pending, not in
// force, so an own-view guard the canary's failed renewals fired meanwhile
// holds it until renewals after the lift (seed 10708024348038392572: 4 s
// after a 20 s outage). The first second in which both agree with the own
// view fresh ends the catching up: agreeing while the view is stale, they
// part again at its lift (seed 32385196713419906).
const outageCatchUp = 20 * time.Second

// apiFaults draws this second's API-server faults from their stream.
func (s *simulation) apiFaults(now time.Time) {
	r := s.frng
	if !s.outageUntil.IsZero() && !now.Before(s.outageUntil) {
		s.api.ClearEndlessFaults()
		s.outageUntil = time.Time{}
		s.model.Writes(now, false)
		s.trace.Add("t=%s the API server takes the controller's writes again", s.at())
	}
	// Pods whose eviction was answered 404 are gone by now.
	for _, p := range s.podsGone {
		if err := s.kube.CoreV1().Pods(p.Namespace).Delete(s.ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Fatalf("deleting pod %s: %v", p.Name, err)
		}
	}
	s.podsGone = nil
	switch {
	case r.Chance(0.004):
		// etcd compacted past what the watches delivered, and they end (an
		// API server restarts): a reflector's re-watch from its last
		// resourceVersion gets 410 Gone and relists. Sometimes the relist
		// fails too, once or twice, as during an outage.
		// At most one a minute: each 410 and each failed list costs the
		// reflector a wall-clock back-off that doubles until 2 min pass
		// without one, so that close ones made a seed of the default run
		// take 43 s. The draws are made all the same, so that the stream
		// does not depend on it.
		which, failed := r.Intn(3), 0
		if r.Chance(0.3) {
			failed = 1 + r.Intn(2)
			if *simConfig {
				failed = 1 // a second failed list only doubles the back-off
			}
		}
		if *simConfig && !s.lastRelist.IsZero() && now.Sub(s.lastRelist) < time.Minute {
			break
		}
		s.lastRelist = now
		s.api.Compact(s.api.ResourceVersion())
		gvrs := [][]string{{"nodes"}, {"leases"}, {"nodes", "leases"}}[which]
		for _, res := range gvrs {
			if res == "nodes" {
				s.api.CloseWatches(nodesGVR)
			} else {
				s.api.CloseWatches(leasesGVR)
			}
			if failed > 0 {
				s.api.Inject(sim.Fault{Verb: "list", Resource: res, Kind: sim.ServerError, Count: failed})
			}
		}
		s.trace.Add("t=%s history compacted, %v watches closed (410 Gone, relist; %d lists fail first)", s.at(), gvrs, failed)
	case s.outageUntil.IsZero() && r.Chance(0.004):
		// kube-apiserver or etcd cannot take the controller's writes for
		// 1–20 s: its Node patches and its canary's renewals answer 500 or
		// 504, some of them applied (the answer lost). Until the outage is
		// over and the controller has caught up, what it shows lags behind
		// what it decided (the model's): compare only checks the
		// invariants then (lagUntil).
		kind := []sim.FaultKind{sim.ServerError, sim.Timeout, sim.LostAnswer}[r.Intn(3)]
		s.outageUntil = now.Add(time.Duration(1+r.Intn(20)) * time.Second)
		s.lagUntil = s.outageUntil.Add(outageCatchUp)
		s.retriesUntil = s.lagUntil
		s.api.Inject(sim.Fault{Verb: "patch", Resource: nodesGVR.Resource, Kind: kind, Count: -1})
		s.api.Inject(sim.Fault{Resource: leasesGVR.Resource, Name: nodev1alpha1.ControllerCanaryLease, Kind: kind, Count: -1})
		// Answers lost are writes applied: the model is told of refusals.
		s.model.Writes(now, kind != sim.LostAnswer)
		s.trace.Add("t=%s the controller's writes fail (%s) until %s", s.at(), kind, s.outageUntil.Sub(sim.Epoch))
	}
}

// evictionError is how the API server answers the first eviction of a pod
// without a budget, other than a budget's refusal, in one case in two: 500
// (etcd's leader changed), 429 with a Retry-After of 1-10 s (the API
// server's priority and fairness), or 404 (the pod's owner deleted it just
// before; the driver deletes it at the start of the next second). Derived
// from the pod's name, not drawn: when the controller evicts is its own
// business and must not shift the seed's draws. Only the first attempt, so
// that a pod's back-off after it (5 s, or the Retry-After) stays within the
// drain invariant's gap.
func (s *simulation) evictionError(pod *v1.Pod) error {
	if pod.Labels["budget"] == "guarded" || s.evictErred.Has(pod.Name) {
		return nil
	}
	s.evictErred.Insert(pod.Name)
	h := hash("eviction-error/"+pod.Name, sim.Epoch)
	if h%6 < 3 {
		s.evictionErrors++ // -sim.stats
	}
	switch h % 6 {
	case 0:
		return apierrors.NewInternalError(errors.New("sim: etcdserver: leader changed"))
	case 1:
		return apierrors.NewTooManyRequests("sim: too many requests, please try again later", 1+int(h/6%10))
	case 2:
		s.podsGone = append(s.podsGone, pod)
		return apierrors.NewNotFound(podsGVR.GroupResource(), pod.Name)
	}
	return nil
}

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

var simConfig = flag.Bool("sim.config", true, "draw each seed's blast radius, cluster size and zone labels, space its 410s a minute apart and fail at most one list after each (false: 50/60 %, 6-9 nodes in two zones, 410s as drawn, as in issue 35's first sweep; replays the open finding found then)")

// configStream is xored into the seed for drawConfig's stream: a stream of
// its own, so that the API-server faults of a seed do not depend on it.
const configStream = 0x636f6e666967 // "config"

// drawConfig draws, from a stream of its own (configStream), what differs between
// clusters beyond the world's schedule: the blast radius's thresholds, in
// whole percent from 1 to 100 (half the seeds keep 50 % and 60 %), and how
// many nodes beyond the first 6-9 the cluster starts with (a quarter of the
// seeds: up to 30 more, a fifth of those up to 51), or whether it has only
// 3-5 (smallCluster), in how many zones (2, or 3-4 in a fifth of the
// seeds), of which every zonelessEvery-th carries no zone label (zero: all
// do). It runs before the model is made.
func (s *simulation) drawConfig(seed uint64) (extra int) {
	s.zones = 2
	if !*simConfig {
		return 0
	}
	r := sim.NewRand(seed ^ configStream)
	if r.Chance(0.5) {
		s.thresholdsDrawn = true
		s.opts.BlastRadius.ClusterThreshold = float64(1+r.Intn(100)) / 100
		s.opts.BlastRadius.ZoneThreshold = float64(1+r.Intn(100)) / 100
	}
	if r.Chance(0.25) {
		extra = 1 + r.Intn(30)
	}
	if r.Chance(0.3) {
		s.zonelessEvery = 2 + r.Intn(4)
	}
	// Since 2026-12-01 the sizes reach 3 and 60 nodes: in a fifth of the
	// seeds that draw more nodes, up to 21 more again, and in a tenth of
	// the others only 3-5 (below the base 6-9; at 3, one failing node is a
	// third of the cluster, and a zone may hold a single node). Drawn after
	// the rest, so that the draws before keep their values; the kept
	// seeds keep their sizes.
	grow, shrink := r.Chance(0.2), r.Chance(0.1)
	more, small := 1+r.Intn(21), 3+r.Intn(3)
	// And in a fifth of the seeds 3 or 4 zones instead of 2.
	spread, zones := r.Chance(0.2), 3+r.Intn(2)
	if !keptSeed(seed) {
		switch {
		case extra > 0 && grow:
			extra += more
		case extra == 0 && shrink:
			s.smallCluster = small
		}
		if spread {
			s.zones = zones
		}
	}
	size := fmt.Sprintf("%d more nodes", extra)
	if s.smallCluster > 0 {
		size = fmt.Sprintf("%d nodes in all", s.smallCluster)
	}
	if s.zones != 2 {
		size += fmt.Sprintf(" in %d zones", s.zones)
	}
	s.trace.Add("config: blast radius cluster %v zone %v, %s, every %d-th without a zone (0: none)",
		s.opts.BlastRadius.ClusterThreshold, s.opts.BlastRadius.ZoneThreshold, size, s.zonelessEvery)
	return extra
}

// keptSeed reports whether seed is one of the regression seeds that keep
// the schedule they were kept with where a newer draw would change it.
func keptSeed(seed uint64) bool {
	for _, rs := range scheduleKeepingRegressions() {
		if slices.Contains(rs.Seeds(), seed) {
			return true
		}
	}
	return false
}
