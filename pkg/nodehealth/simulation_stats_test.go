package nodehealth

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// -sim.stats counts, over the seeds a run of TestSimulation ran, how many
// seeds each fault class was injected in and how often, from the traces the
// driver writes anyway (docs/reliability.md, "Fault classes"). Run it on the
// fresh seeds CI runs for a commit:
//
//	go test ./pkg/nodehealth -count=1 -run '^TestSimulation$' -sim.seeds=40 \
//	  -sim.fresh=$(git rev-parse HEAD) -sim.stats
var simStats = flag.Bool("sim.stats", false, "log how many of the seeds run injected each fault class, and how often")

// simFaultClass is one class of what the schedule injects, told by the trace
// line the driver writes when it injects it.
type simFaultClass struct {
	name string
	line *regexp.Regexp
}

var simFaultClasses = []simFaultClass{
	{"extension dies (silent)", regexp.MustCompile(`^t=\S+ \S+/\S+ dies$`)},
	{"release (Crash)", regexp.MustCompile(`releases \(Crash\)$`)},
	{"release for an update, then a reboot", regexp.MustCompile(`releases \(Updating\)$`)},
	{"reboot", regexp.MustCompile(` reboots from `)},
	{"label change (cni on/off)", regexp.MustCompile(` cni=(true|false)$`)},
	{"node joins", regexp.MustCompile(` joins \(`)},
	{"node re-created under its name", regexp.MustCompile(` re-created \(`)},
	{"Lease-watch stall", regexp.MustCompile(`lease watch stalls until`)},
	{"kube-proxy dies in a zone", regexp.MustCompile(`kube-proxy dies in zone`)},
	{"kube-proxy dies everywhere", regexp.MustCompile(`kube-proxy dies everywhere$`)},
	{"controller restart or failover", regexp.MustCompile(`controller ([2-9]|\d\d+) started$`)},
	{"watches closed", regexp.MustCompile(`watches closed$`)},
	{"node patch conflicts", regexp.MustCompile(`next node patch conflicts$`)},
	{"node patch applied, answer lost", regexp.MustCompile(`next node patch's answer is lost$`)},
	{"history compacted: 410 Gone and relist", regexp.MustCompile(`history compacted`)},
	{"outage of the controller's writes", regexp.MustCompile(`the controller's writes fail`)},
	{"other writers' taints (leaving: autoscaler, Karpenter)", regexp.MustCompile(` gets taint `)},
	{"other writers' conditions (foreign Drained=True)", regexp.MustCompile(`foreign Drained=true`)},
	{"scale-down (nodes deleted)", regexp.MustCompile(`scale-down of`)},
	{"a node's clock off (skewed renewTime)", regexp.MustCompile(`'s clock is off by `)},
	{"zone label changed while running", regexp.MustCompile(` zone label \S+ -> \S+$`)},
	{"other writer: readiness taint added or removed", regexp.MustCompile(`another writer (adds|removes) the readiness taint$`)},
	{"other writer: SystemExtensionsReady overwritten", regexp.MustCompile(`another writer writes SystemExtensionsReady=`)},
	{"other writer: its own taint or condition", regexp.MustCompile(`another writer's (taint|condition) `)},
	{"other writer: label or annotation racing a write", regexp.MustCompile(`lands before the controller's write$`)},
	{"eviction mode NoExecute", regexp.MustCompile(`^eviction mode NoExecute,`)},
	{"eviction mode None", regexp.MustCompile(`^eviction mode None,`)},
	{"eviction rate limited (one node every 10-50 s)", regexp.MustCompile(`^eviction mode \S+, 0\.\d+ nodes per second$`)},
	{"several workers (2-4)", regexp.MustCompile(`^\d+ workers$`)},
	{"configuration reload (restart with edited options)", regexp.MustCompile(`configuration reloaded: `)},
	{"configuration edit rejected (no restart)", regexp.MustCompile(`configuration edit rejected \(`)},
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

// count adds one seed's run: its trace and the eviction errors it injected
// (which write no trace line, so that they leave a second quiet).
func (st *simStatsTally) count(s *simulation) {
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
	st.add("eviction error (500, 429, 404)", s.evictionErrors)
	st.add("blast-radius thresholds drawn (1-100 %)", b2i(s.thresholdsDrawn))
	st.add("nodes without a zone label (from creation)", b2i(s.zonelessEvery > 0))
	st.add(workersOverlapping, s.overlaps)
	st.add(workersDeliveredBetween, s.deliveredBetween)
}

// What -sim.stats counts of several workers beside the seeds that run them.
const (
	workersOverlapping      = "several workers: a request served while another's waits"
	workersDeliveredBetween = "several workers: an event delivered between requests"
)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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
	names = append(names, "eviction error (500, 429, 404)", "blast-radius thresholds drawn (1-100 %)", "nodes without a zone label (from creation)",
		workersOverlapping, workersDeliveredBetween)
	for _, name := range names {
		fmt.Fprintf(&b, "  %-58s %3d of %d; %d\n", name, st.inSeed[name], st.seeds, st.times[name])
	}
	return b.String()
}

// logSimStats logs the tally once every seed of t has run.
func logSimStats(t *testing.T) {
	if *simStats {
		t.Cleanup(func() { t.Log("\n" + simStatsCount.report()) })
	}
}
