package nodehealth

import (
	"time"

	"nodehealth.io/nodehealth/test/sim"
)

// The simulation's API-server faults (issue 35): what a real kube-apiserver
// and its etcd do to the controller besides conflicts and lost answers. They
// are drawn from a stream of their own (apiFaultsStream), so that the seeds
// kept before they were added draw the same schedule of the world until the
// first of them.

// apiFaultsStream is xored into the seed for the API-server faults' stream.
const apiFaultsStream = 0x6170692d6661756c // "api-faul"

// apiFaults draws this second's API-server faults from their stream.
func (s *simulation) apiFaults(now time.Time) {
	r := s.frng
	switch {
	case r.Chance(0.004):
		// etcd compacted past what the watches delivered, and they end (an
		// API server restarts): a reflector's re-watch from its last
		// resourceVersion gets 410 Gone and relists. Sometimes the relist
		// fails too, once or twice, as during an outage.
		s.api.Compact(s.api.ResourceVersion())
		var gvrs []string
		switch r.Intn(3) {
		case 0:
			s.api.CloseWatches(nodesGVR)
			gvrs = []string{"nodes"}
		case 1:
			s.api.CloseWatches(leasesGVR)
			gvrs = []string{"leases"}
		default:
			s.api.CloseWatches(nodesGVR)
			s.api.CloseWatches(leasesGVR)
			gvrs = []string{"nodes", "leases"}
		}
		failed := 0
		if r.Chance(0.3) {
			failed = 1 + r.Intn(2)
			for _, res := range gvrs {
				s.api.Inject(sim.Fault{Verb: "list", Resource: res, Kind: sim.ServerError, Count: failed})
			}
		}
		s.trace.Add("t=%s history compacted, %v watches closed (410 Gone, relist; %d lists fail first)", s.at(), gvrs, failed)
	}
}
