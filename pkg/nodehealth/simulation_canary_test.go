package nodehealth_test

import (
	"flag"
	"slices"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/sim"
)

var simCanaryFaults = flag.Bool("sim.canary-faults", true, "draw, on a share of the seeds, renewals of the controller's canary that fail while every other write goes through (false: the schedule before they were drawn)")

// canaryStream is xored into the seed for canaryFaults' stream: a stream of
// its own, so that a seed runs the schedule it ran before these faults were
// drawn until the first of them.
const canaryStream = 0x63616e617279 // "canary"

// canaryShare is the share of seeds in which the canary's renewals fail now
// and then; canaryChance the chance, each second of those seeds, that the
// next 2-6 fail. About 3 such runs in a 300 s seed.
const (
	canaryShare  = 0.3
	canaryChance = 0.01
)

// drawCanaryFaults decides whether the canary's renewals fail now and then
// while the seed runs, and if so starts the stream. The seeds kept for what
// they found keep their schedules.
func (s *simulation) drawCanaryFaults(seed uint64) {
	// The fresh regressions keep theirs too: each replays what a sweep
	// found before this class was drawn.
	on := *simCanaryFaults && !slices.Contains(simFreshRegressions.Seeds(), seed)
	s.crng = newerClassStream(on, seed, nil, canaryStream, canaryShare)
}

// canaryFaults fails the canary's next 2-6 renewals now and then (500, a
// timeout, or applied with the answer lost) while the API server takes every
// other write, as a refused or hung renewal does that no outage explains:
// the canary Lease's own object in etcd, an admission webhook on Leases
// timing out. The renewals go out every 2 s (simCanary) and the view is
// stale after three intervals without a new one observed, so a run of
// three or more refused renewals makes it stale. The model says so from the
// renewals it observed (Model.CheckView), not from the canary's verdict; a
// renewal applied with its answer lost is observed and keeps the view
// current.
func (s *simulation) canaryFaults() {
	r := s.crng
	if r == nil || !r.Chance(canaryChance) || !s.outageUntil.IsZero() || s.leaderless() {
		return
	}
	kind := []sim.FaultKind{sim.ServerError, sim.Timeout, sim.LostAnswer}[r.Intn(3)]
	k := 2 + r.Intn(5)
	s.api.Inject(sim.Fault{Verb: "update", Resource: leasesGVR.Resource, Name: nodev1alpha1.ControllerCanaryLease, Kind: kind, Count: k})
	s.trace.Add("t=%s the canary's next %d renewals fail (%s)", s.at(), k, kind)
}
