package operator

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// -sim.stats counts, over the seeds a run of TestUpdaterSimulation ran, how
// many seeds each fault class was injected in and how often, from the traces
// the driver writes anyway (docs/reliability.md, "The updater's fault
// classes"). Run it on the fresh seeds CI runs for a commit:
//
//	go test ./pkg/updater/operator -count=1 -v -run '^TestUpdaterSimulation$' -sim.seeds=12 \
//	  -sim.fresh=$(git rev-parse HEAD) -sim.stats
var simStats = flag.Bool("sim.stats", false, "log how many of the seeds run injected each fault class, and how often")

// simFaultClass is one class of what the schedule injects or draws, told by
// the trace line the driver writes when it does.
type simFaultClass struct {
	name string
	line *regexp.Regexp
}

var simFaultClasses = []simFaultClass{
	// The hosts and their agents.
	{"agent SIGKILL or SIGTERM between its syncs", regexp.MustCompile(` agent \d+ gets SIG(KILL|TERM)$`)},
	{"agent killed mid-step (before or after a call)", regexp.MustCompile(` agent \d+ killed mid-step$`)},
	{"agent SIGKILL while the host prepares", regexp.MustCompile(` gets SIGKILL while the host prepares$`)},
	{"Bottlerocket answers lost", regexp.MustCompile(`Bottlerocket answers are lost$`)},
	{"Bottlerocket refuses reboots", regexp.MustCompile(`Bottlerocket refuses the next reboots$`)},
	{"Bottlerocket answers 500", regexp.MustCompile(`Bottlerocket answers 500$`)},
	{"prepare fails (toggled)", regexp.MustCompile(`prepare fails toggled$`)},
	{"update repository unreachable (toggled)", regexp.MustCompile(`the update repository unreachable toggled$`)},
	{"slow prepare", regexp.MustCompile(`: prepare takes `)},
	{"a boot into an update comes back on the old version (toggled)", regexp.MustCompile(`the next boot into an update fails toggled$`)},
	{"user's version lock", regexp.MustCompile(`a user sets the version lock to \S+$`)},
	{"user's version lock while the host prepares", regexp.MustCompile(`a user sets the version lock to \S+ while the host prepares$`)},
	{"user's version lock while the agent is down with its pin", regexp.MustCompile(`while the agent is down with its pin on the host$`)},
	{"unplanned reboot (host crash)", regexp.MustCompile(`: an unplanned reboot$`)},
	// The cluster.
	{"Node deleted", regexp.MustCompile(`: the Node is deleted$`)},
	{"tolerating pod lands on a drained node", regexp.MustCompile(`a tolerating pod arrives$`)},
	{"user deletes a shadow (at rest)", regexp.MustCompile(`: a user deletes the shadow$`)},
	{"user's deletion of a shadow refused mid-update", regexp.MustCompile(`a user's deletion of the shadow is refused`)},
	{"the node-health controller late to taint", regexp.MustCompile(`the node-health controller is late until`)},
	{"status write's answer lost", regexp.MustCompile(`the next status write's answer is lost$`)},
	{"spec write conflicts", regexp.MustCompile(`the next spec write conflicts$`)},
	{"spec write's answer lost", regexp.MustCompile(`the next spec write's answer is lost$`)},
	{"agent's next report conflicts", regexp.MustCompile(`its agent's next report conflicts$`)},
	// The operator.
	{"operator killed, restarted at once", regexp.MustCompile(`operator killed; restarted at once$`)},
	{"operator killed, a new leader after a gap", regexp.MustCompile(`operator killed; a new leader at `)},
	{"failover while a hook's Job runs", regexp.MustCompile(`a failover while a hook runs$`)},
	// Users and the policy.
	{"new version offered to a wave", regexp.MustCompile(`1\.21\.0 offered to a wave$`)},
	{"pin changed", regexp.MustCompile(`^t=\S+ pin "`)},
	{"paused or unpaused", regexp.MustCompile(`^t=\S+ paused (true|false)$`)},
	{"windows set or removed", regexp.MustCompile(`^t=\S+ windows `)},
	{"pacing edited while running", regexp.MustCompile(`^t=\S+ pacing minReleaseAge `)},
	{"user resumes a halted rollout", regexp.MustCompile(`a user resumes the rollout$`)},
	// What a seed draws for its policy (one line at the start).
	{"policy: pacing", regexp.MustCompile(`^pacing minReleaseAge `)},
	{"policy: blockingPods gate", regexp.MustCompile(`^gates anywhere `)},
	{"policy: onHealthGateFailure Rollback", regexp.MustCompile(`^onHealthGateFailure Rollback$`)},
	{"policy: alerts gate", regexp.MustCompile(`^gates alerts$`)},
	{"policy: hooks", regexp.MustCompile(`^hooks beforeDrain `)},
	{"policy: drain options", regexp.MustCompile(`^drain skip `)},
	// What the gates' sources do.
	{"blocking pod starts", regexp.MustCompile(`gate pod batch/\S+ starts`)},
	{"alert fires", regexp.MustCompile(`^t=\S+ alert source: .*fires `)},
	{"alert source goes down", regexp.MustCompile(`^t=\S+ alert source: .*goes down`)},
	{"hook Job fails or times out", regexp.MustCompile(`: hook \S+ starts .* failed true$`)},
}

// simStatsTally is what -sim.stats counted: per class, the seeds it was
// injected in and how many times.
type simStatsTally struct {
	mu     sync.Mutex
	seeds  int
	inSeed map[string]int
	times  map[string]int
}

var simStatsCount simStatsTally

// simBadRelease is the class the driver draws without a trace line.
const simBadRelease = "bad release (1.21.0 or 1.20.1 never healthy)"

// count adds one seed's run.
func (st *simStatsTally) count(s *updaterSimulation) {
	lines := strings.Split(s.trace.String(), "\n")
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.inSeed == nil {
		st.inSeed, st.times = map[string]int{}, map[string]int{}
	}
	st.seeds++
	for _, c := range simFaultClasses {
		n := 0
		for _, l := range lines {
			if c.line.MatchString(l) {
				n++
			}
		}
		st.add(c.name, n)
	}
	bad := 0
	for _, b := range s.badVersions {
		if b {
			bad++
		}
	}
	st.add(simBadRelease, bad)
}

func (st *simStatsTally) add(class string, n int) {
	if n > 0 {
		st.inSeed[class]++
		st.times[class] += n
	}
}

// report is the table -sim.stats logs.
func (st *simStatsTally) report() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "fault classes over %d seeds (seeds injecting it; times):\n", st.seeds)
	names := make([]string, 0, len(simFaultClasses)+1)
	for _, c := range simFaultClasses {
		names = append(names, c.name)
	}
	names = append(names, simBadRelease)
	for _, name := range names {
		fmt.Fprintf(&b, "  %-62s %3d of %d; %d\n", name, st.inSeed[name], st.seeds, st.times[name])
	}
	return b.String()
}

// logSimStats logs the tally once every seed of t has run.
func logSimStats(t *testing.T) {
	if *simStats {
		t.Cleanup(func() { t.Log("\n" + simStatsCount.report()) })
	}
}
