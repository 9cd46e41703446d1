package sim

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
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
