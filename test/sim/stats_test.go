package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestATallyCountsTheSeedsInjectingEachClassAndHowOften(t *testing.T) {
	tally := NewTally([]FaultClass{Class("reboot", ` reboots$`), Class("stall", `stalls`)}, "eviction error")
	a, b := &Trace{}, &Trace{}
	a.Add("t=1s n1 reboots")
	a.Add("t=2s n2 reboots")
	a.Add("t=3s watch stalls")
	b.Add("t=1s n1 reboots")
	b.Add("t=2s n1 reboots twice") // no match: the class is told by its line
	tally.Count(a, map[string]int{"eviction error": 0})
	tally.Count(b, map[string]int{"eviction error": 3})
	want := []string{
		"fault classes over 2 seeds",
		"reboot" + strings.Repeat(" ", 57) + "  2 of 2; 3",
		"stall" + strings.Repeat(" ", 58) + "  1 of 2; 1",
		"eviction error" + strings.Repeat(" ", 49) + "  1 of 2; 3",
	}
	got := tally.Report()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("report lacks %q:\n%s", w, got)
		}
	}
}

// errorsOf records what a check reports instead of failing the test.
type errorsOf struct {
	testing.TB
	errors, logs []string
}

func (e *errorsOf) Helper() {}
func (e *errorsOf) Errorf(format string, args ...any) {
	e.errors = append(e.errors, fmt.Sprintf(format, args...))
}
func (e *errorsOf) Logf(format string, args ...any) {
	e.logs = append(e.logs, fmt.Sprintf(format, args...))
}

func TestAClassNoFixedSeedInjectsFailsTheCheckUnlessNamedAbsentAndAnAbsentOneInjectedFailsIt(t *testing.T) {
	tally := NewTally([]FaultClass{Class("reboot", ` reboots$`), Class("stall", `stalls`), Class("race", `races$`)}, "eviction error", "large cluster")
	a := &Trace{}
	a.Add("t=1s n1 reboots")
	a.Add("t=2s n2 races")
	tally.Count(a, map[string]int{"eviction error": 2})
	tally.Count(&Trace{}, nil)

	for _, tc := range []struct {
		name       string
		want       int
		absent     map[string]string
		wantErrors []string
	}{
		{"every class named", 2, nil, []string{`"stall"`, `"large cluster"`}},
		{"the two excused", 2, map[string]string{"stall": "slow", "large cluster": "slow"}, nil},
		{"an injected class excused", 2, map[string]string{"stall": "slow", "large cluster": "slow", "reboot": "rare"}, []string{`"reboot" is named`}},
		{"an excuse for no class", 2, map[string]string{"stall": "slow", "large cluster": "slow", "stalls": "typo"}, []string{`"stalls" is no class`}},
		{"fewer seeds counted than the set holds", 3, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &errorsOf{TB: t}
			tally.CheckDrawn(rec, tc.want, tc.absent)
			if len(rec.errors) != len(tc.wantErrors) {
				t.Fatalf("errors %q, want %d naming %q", rec.errors, len(tc.wantErrors), tc.wantErrors)
			}
			for _, w := range tc.wantErrors {
				if !slices.ContainsFunc(rec.errors, func(e string) bool { return strings.Contains(e, w) }) {
					t.Errorf("errors %q lack %q", rec.errors, w)
				}
			}
			if tc.want > 2 && len(rec.logs) == 0 {
				t.Errorf("a partial run says nothing of why it checked nothing")
			}
		})
	}
}
