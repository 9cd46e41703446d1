package sim

import (
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
