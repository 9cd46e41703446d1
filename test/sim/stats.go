package sim

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// FaultClass is one class of what a schedule injects or draws, told by the
// trace line its driver writes when it does.
type FaultClass struct {
	Name string
	Line *regexp.Regexp
}

// Class is the fault class name, told by the lines that match pattern.
func Class(name, pattern string) FaultClass {
	return FaultClass{Name: name, Line: regexp.MustCompile(pattern)}
}

// Tally counts, over the seeds of a run, in how many seeds each fault class
// was injected and how many times: what a simulation's -sim.stats reports.
// Its classes are those of the trace lines, in order, then the extra ones,
// whose counts a driver adds itself (what writes no trace line). Safe for the
// parallel seeds of one run.
type Tally struct {
	classes []FaultClass
	extra   []string

	mu     sync.Mutex
	seeds  int
	inSeed map[string]int
	times  map[string]int
}

// NewTally counts classes from traces and extra from what drivers add.
func NewTally(classes []FaultClass, extra ...string) *Tally {
	return &Tally{classes: classes, extra: extra, inSeed: map[string]int{}, times: map[string]int{}}
}

// Count adds one seed: the lines of its trace that each class matches, and
// extra, the driver's own counts by class name.
func (t *Tally) Count(tr *Trace, extra map[string]int) {
	lines := strings.Split(tr.String(), "\n")
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seeds++
	for _, c := range t.classes {
		n := 0
		for _, l := range lines {
			if c.Line.MatchString(l) {
				n++
			}
		}
		t.add(c.Name, n)
	}
	for name, n := range extra {
		t.add(name, n)
	}
}

func (t *Tally) add(class string, n int) {
	if n > 0 {
		t.inSeed[class]++
		t.times[class] += n
	}
}

// Report is the table -sim.stats logs: per class, the seeds that injected it
// and how many times.
func (t *Tally) Report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "fault classes over %d seeds (seeds injecting it; times):\n", t.seeds)
	names := make([]string, 0, len(t.classes)+len(t.extra))
	for _, c := range t.classes {
		names = append(names, c.Name)
	}
	names = append(names, t.extra...)
	for _, name := range names {
		fmt.Fprintf(&b, "  %-62s %3d of %d; %d\n", name, t.inSeed[name], t.seeds, t.times[name])
	}
	return b.String()
}

// CheckDrawn fails tb for every class that none of the counted seeds
// injected, unless absent names it with the reason no seed does, and for
// every class absent names that a seed did inject. Counted over a fixed set
// of seeds (the regressions and smoke seeds every go test runs), it is
// deterministic: a class the set stops injecting says its driver stopped
// firing it, as the other writers' race did from 2026-11-29 to 2026-12-02
// with nothing failing. want is how many seeds the set holds: a run that
// counted fewer (a -run or -sim.seed filter, a seed that failed) checks
// nothing, nor does one with a flag that changes what the seeds draw.
func (t *Tally) CheckDrawn(tb testing.TB, want int, absent map[string]string) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seeds < want {
		tb.Logf("fault classes: %d of the %d fixed seeds counted, not checked", t.seeds, want)
		return
	}
	if set := scheduleFlagsSet(); len(set) > 0 {
		tb.Logf("fault classes: not checked, %s changes what the fixed seeds draw", strings.Join(set, ", "))
		return
	}
	names := make([]string, 0, len(t.classes)+len(t.extra))
	for _, c := range t.classes {
		names = append(names, c.Name)
	}
	names = append(names, t.extra...)
	for _, name := range names {
		why, excused := absent[name]
		switch n := t.inSeed[name]; {
		case n == 0 && !excused:
			tb.Errorf("fault class %q: none of the %d fixed seeds injected it; its driver no longer fires it, or the seeds that drew it left their lists (keep one, or name it in the absent classes with why)", name, t.seeds)
		case n > 0 && excused:
			tb.Errorf("fault class %q is named as drawn by no fixed seed (%s), yet %d of %d inject it: take it off that list", name, why, n, t.seeds)
		}
	}
	for name := range absent {
		if !slices.Contains(names, name) {
			tb.Errorf("absent fault class %q is no class of the tally", name)
		}
	}
}

// notScheduleFlags are the -sim.* flags that leave every seed's schedule
// as drawn: which seeds run, what is logged or compared.
var notScheduleFlags = []string{"sim.seed", "sim.seeds", "sim.fresh", "sim.verbose", "sim.v", "sim.stats", "sim.open", "sim.per-event"}

// scheduleFlagsSet names the -sim.* flags set on the command line that may
// change what a seed draws (-sim.workers, -sim.writers=false, -sim.off...).
func scheduleFlagsSet() []string {
	var set []string
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "sim.") && !slices.Contains(notScheduleFlags, f.Name) {
			set = append(set, "-"+f.Name)
		}
	})
	return set
}
