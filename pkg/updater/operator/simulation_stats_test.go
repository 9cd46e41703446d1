package operator_test

import (
	"flag"
	"testing"

	"nodehealth.io/nodehealth/test/sim"
)

// -sim.stats counts, over the seeds a run of TestUpdaterSimulation ran, how
// many seeds each fault class was injected in and how often, from the traces
// the driver writes anyway (docs/reliability.md, "The updater's fault
// classes"). Run it on the fresh seeds CI runs for a commit:
//
//	go test ./pkg/updater/operator -count=1 -v -run '^TestUpdaterSimulation$' -sim.seeds=12 \
//	  -sim.fresh=$(git rev-parse HEAD) -sim.stats
var simStats = flag.Bool("sim.stats", false, "log how many of the seeds run injected each fault class, and how often")

var simFaultClasses = []sim.FaultClass{
	// The hosts and their agents.
	sim.Class("agent SIGKILL or SIGTERM between its syncs", ` agent \d+ gets SIG(KILL|TERM)$`),
	sim.Class("agent killed mid-step (before or after a call)", ` agent \d+ killed mid-step$`),
	sim.Class("agent SIGKILL while the host prepares", ` gets SIGKILL while the host prepares$`),
	sim.Class("Bottlerocket answers lost", `Bottlerocket answers are lost$`),
	sim.Class("Bottlerocket refuses reboots", `Bottlerocket refuses the next reboots$`),
	sim.Class("Bottlerocket answers 500", `Bottlerocket answers 500$`),
	sim.Class("prepare fails (toggled)", `prepare fails toggled$`),
	sim.Class("update repository unreachable (toggled)", `the update repository unreachable toggled$`),
	sim.Class("slow prepare", `: prepare takes `),
	sim.Class("a boot into an update comes back on the old version (toggled)", `the next boot into an update fails toggled$`),
	sim.Class("user's version lock", `a user sets the version lock to \S+$`),
	sim.Class("user's version lock while the host prepares", `a user sets the version lock to \S+ while the host prepares$`),
	sim.Class("user's version lock while the agent is down with its pin", `while the agent is down with its pin on the host$`),
	sim.Class("unplanned reboot (host crash)", `: an unplanned reboot$`),
	// The cluster.
	sim.Class("Node deleted", `: the Node is deleted$`),
	sim.Class("tolerating pod lands on a drained node", `a tolerating pod arrives$`),
	sim.Class("user deletes a shadow (at rest)", `: a user deletes the shadow$`),
	sim.Class("user takes a node out of the managed set or puts it back", `: a user (takes the node out of|puts the node back in) the managed set$`),
	sim.Class("user's deletion of a shadow refused mid-update", `a user's deletion of the shadow is refused`),
	sim.Class("the node-health controller late to taint", `the node-health controller is late until`),
	sim.Class("status write's answer lost", `the next status write's answer is lost$`),
	sim.Class("spec write conflicts", `the next spec write conflicts$`),
	sim.Class("spec write's answer lost", `the next spec write's answer is lost$`),
	sim.Class("agent's next report conflicts", `its agent's next report conflicts$`),
	// The operator.
	sim.Class("operator killed, restarted at once", `operator killed; restarted at once$`),
	sim.Class("operator killed, a new leader after a gap", `operator killed; a new leader at `),
	sim.Class("failover while a hook's Job runs", `a failover while a hook runs$`),
	// Users and the policy.
	sim.Class("new version offered to a wave", `1\.21\.0 offered to a wave$`),
	sim.Class("pin changed", `^t=\S+ pin "`),
	sim.Class("paused or unpaused", `^t=\S+ paused (true|false)$`),
	sim.Class("windows set or removed", `^t=\S+ windows `),
	sim.Class("pacing edited while running", `^t=\S+ pacing minReleaseAge `),
	sim.Class("user resumes a halted rollout", `a user resumes the rollout$`),
	// What a seed draws for its policy (one line at the start).
	sim.Class("policy: pacing", `^pacing minReleaseAge `),
	sim.Class("policy: blockingPods gate", `^gates anywhere `),
	sim.Class("policy: onHealthGateFailure Rollback", `^onHealthGateFailure Rollback$`),
	sim.Class("policy: alerts gate", `^gates alerts$`),
	sim.Class("policy: hooks", `^hooks beforeDrain `),
	sim.Class("policy: drain options", `^drain skip `),
	// What the gates' sources do.
	sim.Class("blocking pod starts", `gate pod batch/\S+ starts`),
	sim.Class("alert fires", `^t=\S+ alert source: .*fires `),
	sim.Class("alert source goes down", `^t=\S+ alert source: .*goes down`),
	sim.Class("hook Job fails or times out", `: hook \S+ starts .* failed true$`),
}

// simBadRelease is the class the driver draws without a trace line.
const simBadRelease = "bad release (1.21.0 or 1.20.1 never healthy)"

func newSimTally() *sim.Tally { return sim.NewTally(simFaultClasses, simBadRelease) }

var simStatsCount = newSimTally()

// simClassesNoFixedSeedDraws are the classes that no seed every go test
// runs (the regressions and smoke seeds) injects, and why; every other
// class must be injected by one of them (TestUpdaterSimulation, sim.Tally's
// CheckDrawn).
var simClassesNoFixedSeedDraws = map[string]string{
	"user's deletion of a shadow refused mid-update": "drawn only with -sim.delete-shadows-mid-update",
}

// countSimStats adds one seed's run to tally.
func countSimStats(tally *sim.Tally, s *updaterSimulation) {
	bad := 0
	for _, b := range s.badVersions {
		if b {
			bad++
		}
	}
	tally.Count(s.trace, map[string]int{simBadRelease: bad})
}

// logSimStats logs the tally once every seed of t has run.
func logSimStats(t *testing.T) {
	if *simStats {
		t.Cleanup(func() { t.Log("\n" + simStatsCount.Report()) })
	}
}
