package nodehealth_test

import (
	"flag"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/test/sim"
)

var simLeaseDeletions = flag.Bool("sim.lease-deletions", true, "draw, on a share of the seeds, extension Leases someone deletes while their node stays (false: the schedule before they were drawn)")

// leaseDeleteStream is xored into the seed for leaseDeletions' stream: a
// stream of its own, so that a seed runs the schedule it ran before these
// deletions were drawn until the first of them.
const leaseDeleteStream = 0x6c6564656c // "ledel"

// leaseDeleteShare is the share of seeds that draw such deletions;
// leaseDeleteChance the chance, each second of those seeds, of one: about
// three in a 300 s seed.
const (
	leaseDeleteShare  = 0.3
	leaseDeleteChance = 0.01
)

// drawLeaseDeletions decides whether someone deletes extension Leases while
// the seed runs, and if so starts the stream. No seed kept for what it
// found, in any list, draws them, unless the class's own list keeps it for
// what this class found.
func (s *simulation) drawLeaseDeletions(seed uint64) {
	s.drng = newestClassStream(*simLeaseDeletions, seed, simLeaseDeleteRegressions, leaseDeleteStream, leaseDeleteShare)
}

// leaseDeletions deletes one extension's Lease now and then while its node
// stays, as `kubectl delete lease`, a namespace clean-up or a renewer's
// uninstall does: the extension is missing, not ready at once (an unplanned
// failure, docs/controller.md), and a self-registered one (the updater's)
// leaves the node's extension list until its Lease is back. Whoever renews
// it creates it again at its next renewal, if it is alive; the model is
// told through the informer's deletion (model.LeaseDeleted).
func (s *simulation) leaseDeletions() {
	r := s.drng
	if r == nil || !r.Chance(leaseDeleteChance) {
		return
	}
	n := s.nodes[r.Intn(len(s.nodes))]
	a := n.agents[r.Intn(len(n.agents))]
	err := s.kube.CoordinationV1().Leases(simNS).Delete(s.ctx, a.leaseName(n), metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return // never created, or deleted already
	case err != nil:
		s.t.Fatalf("deleting lease %s.%s: %v", a.ext, n.name, err)
	}
	s.observedMu.Lock()
	s.unseenLeaseDeletions.Insert(n.name + "/" + a.ext)
	s.observedMu.Unlock()
	s.trace.Add("t=%s %s/%s's Lease deleted", s.at(), n.name, a.ext)
}

// simLeaseDeleteRegressions are the seeds this class found something with
// (it draws them whatever their share).
var simLeaseDeleteRegressions = sim.Regressions{
	// The controller's (make simulate SEEDS=200, 2026-12-01): n7's
	// kube-proxy released its Lease for an update, which was then deleted
	// before the reboot; the gate kept remembering the planned release.
	{Seed: 18378656569196115148, Name: "a Lease released for maintenance and then deleted is missing, an unplanned failure (ExtensionsNotReady)"},
	// The driver's (make simulate SEEDS=200, 2026-12-02): n4's kube-proxy
	// Lease was deleted in a Lease-watch stall whose leader stopped before
	// the stall ended; the next leader found it missing, and the stopped
	// model, never told, still held it (unseenLeaseDeletions).
	{Seed: 8670837094640195926, Name: "a Lease deleted unseen before a failover is missing for the next leader and for the model"},
}
