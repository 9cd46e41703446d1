package nodehealth_test

import (
	"flag"
	"testing"

	"nodehealth.io/nodehealth/test/sim"
)

// -sim.stats counts, over the seeds a run of TestSimulation ran, how many
// seeds each fault class was injected in and how often, from the traces the
// driver writes anyway (docs/reliability.md, "Fault classes"). Run it on the
// fresh seeds CI runs for a commit:
//
//	go test ./pkg/nodehealth -count=1 -run '^TestSimulation$' -sim.seeds=40 \
//	  -sim.fresh=$(git rev-parse HEAD) -sim.stats
var simStats = flag.Bool("sim.stats", false, "log how many of the seeds run injected each fault class, and how often")

var simFaultClasses = []sim.FaultClass{
	sim.Class("extension dies (silent)", `^t=\S+ \S+/\S+ dies$`),
	sim.Class("release (Crash)", `releases \(Crash\)$`),
	sim.Class("release for an update, then a reboot", `releases \(Updating\)$`),
	sim.Class("reboot", ` reboots from `),
	sim.Class("label change (cni on/off)", ` cni=(true|false)$`),
	sim.Class("node joins", ` joins \(`),
	sim.Class("node re-created under its name", ` re-created \(`),
	sim.Class("node re-created behind a stalled watch, seen in a relist", ` re-creation unseen: `),
	sim.Class("an extension's Lease deleted while its node stays", `'s Lease deleted$`),
	sim.Class("Lease-watch stall", `lease watch stalls until`),
	sim.Class("kube-proxy dies in a zone", `kube-proxy dies in zone`),
	sim.Class("kube-proxy dies everywhere", `kube-proxy dies everywhere$`),
	sim.Class("controller restart or failover", `controller ([2-9]|\d\d+) started$`),
	sim.Class("watches closed", `watches closed$`),
	sim.Class("node patch conflicts", `next node patch conflicts$`),
	sim.Class("node patch applied, answer lost", `next node patch's answer is lost$`),
	sim.Class("history compacted: 410 Gone and relist", `history compacted`),
	sim.Class("outage of the controller's writes", `the controller's writes fail`),
	sim.Class("other writers' taints (leaving: autoscaler, Karpenter)", ` gets taint `),
	sim.Class("other writers' conditions (foreign Drained=True)", `foreign Drained=true`),
	sim.Class("scale-down (nodes deleted)", `scale-down of`),
	sim.Class("a Node deleted outright", ` deleted outright \(failing (true|false)\)$`),
	sim.Class("a failing Node deleted outright", ` deleted outright \(failing true\)$`),
	sim.Class("a node's clock off (skewed renewTime)", `'s clock is off by `),
	sim.Class("zone label changed while running", ` zone label \S+ -> \S+$`),
	sim.Class("other writer: readiness taint added or removed", `another writer (adds|removes) the readiness taint( \(no leader\))?$`),
	sim.Class("other writer: SystemExtensionsReady overwritten", `another writer writes SystemExtensionsReady=`),
	sim.Class("other writer: its own taint or condition", `another writer's (taint|condition) `),
	sim.Class("other writer: label or annotation racing a write", `lands before the controller's write$`),
	sim.Class("eviction mode NoExecute", `^eviction mode NoExecute,`),
	sim.Class("eviction mode None", `^eviction mode None,`),
	sim.Class("eviction rate limited (one node every 10-50 s)", `^eviction mode \S+, 0\.\d+ nodes per second$`),
	sim.Class("several workers (2-4)", `^\d+ workers$`),
	sim.Class("configuration reload (restart with edited options)", `configuration reloaded: `),
	sim.Class("configuration edit rejected (no restart)", `configuration edit rejected \(`),
	sim.Class("failover with a gap: no leader for 1-2 s (lease released)", `stops; no leader for [12]s `),
	sim.Class("failover with a gap: no leader for 13-17 s (leader crashed)", `stops; no leader for 1[3-7]s `),
	sim.Class("configuration edited while no leader runs", `configuration edited while no leader runs: `),
	sim.Class("node excluded (nodehealth.io/exclude=true)", ` excluded \(\S+=true\)$`),
	sim.Class("node no longer excluded", ` no longer excluded$`),
	sim.Class("other writer: readiness taint removed while no leader runs", `another writer removes the readiness taint \(no leader\)$`),
	sim.Class("the canary's renewals fail (500, timeout, answer lost), nothing else does", `the canary's next \d+ renewals fail `),
}

// What -sim.stats counts from the driver's own figures, which write no trace
// line (an eviction error leaves its second quiet).
const (
	statEvictionErrors      = "eviction error (500, 429, 404)"
	statThresholdsDrawn     = "blast-radius thresholds drawn (1-100 %)"
	statZoneless            = "nodes without a zone label (from creation)"
	statSmallCluster        = "a cluster of 3-5 nodes"
	statLargeCluster        = "a cluster of 40-60 nodes"
	statMoreZones           = "nodes created in 3 or 4 zones"
	workersOverlapping      = "several workers: a request served while another's waits"
	workersDeliveredBetween = "several workers: an event delivered between requests"
	statTakenTogether       = "observations of a node one sync took together"
	statPatchConflicted     = "the controller's Node patch answered 409 (injected or raced)"
	statPatchTimedOut       = "the controller's Node patch answered 504 (answer lost, timeout)"
)

func newSimTally() *sim.Tally {
	return sim.NewTally(simFaultClasses,
		statEvictionErrors, statThresholdsDrawn, statZoneless, statSmallCluster, statLargeCluster, statMoreZones,
		workersOverlapping, workersDeliveredBetween, statTakenTogether, statPatchConflicted, statPatchTimedOut)
}

var simStatsCount = newSimTally()

// simClassesNoFixedSeedDraws are the classes that no seed every go test
// runs (the regressions and smoke seeds) injects, and why; every other
// class must be injected by one of them (TestSimulation, sim.Tally's
// CheckDrawn).
var simClassesNoFixedSeedDraws = map[string]string{
	statLargeCluster: "a seed of 40-60 nodes takes tens of seconds; the fresh seeds draw one in about 5 %",
}

// countSimStats adds one seed's run to tally.
func countSimStats(tally *sim.Tally, s *simulation) {
	tally.Count(s.trace, map[string]int{
		statEvictionErrors:      s.evictionErrors,
		statThresholdsDrawn:     b2i(s.thresholdsDrawn),
		statZoneless:            b2i(s.zonelessEvery > 0),
		statSmallCluster:        b2i(s.smallCluster > 0),
		statLargeCluster:        b2i(s.startNodes >= 40),
		statMoreZones:           b2i(s.zones > 2),
		workersOverlapping:      s.overlaps,
		workersDeliveredBetween: s.deliveredBetween,
		statTakenTogether:       s.together,
		statPatchConflicted:     int(s.ctrlPatchesConflicted.Load()),
		statPatchTimedOut:       int(s.ctrlPatchesTimedOut.Load()),
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logSimStats logs the tally once every seed of t has run.
func logSimStats(t *testing.T) {
	if *simStats {
		t.Cleanup(func() { t.Log("\n" + simStatsCount.Report()) })
	}
}
