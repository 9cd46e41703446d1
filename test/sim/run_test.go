package sim

import (
	"slices"
	"testing"
)

func TestFreshSeedsAreTheSameForACommitAndNewForTheNextOrAnotherSimulation(t *testing.T) {
	a := freshSeeds("c2fb339", "TestSimulation/guards", 40)
	if len(a) != 40 {
		t.Fatalf("%d seeds, want 40", len(a))
	}
	if b := freshSeeds("c2fb339", "TestSimulation/guards", 40); !slices.Equal(a, b) {
		t.Errorf("the same commit drew other seeds on a retry: %v, then %v", a[:3], b[:3])
	}
	for _, other := range [][]uint64{
		freshSeeds("d730e5d", "TestSimulation/guards", 40),
		freshSeeds("c2fb339", "TestUpdaterSimulation/updater", 40),
	} {
		for _, s := range other {
			if slices.Contains(a, s) {
				t.Errorf("seed %d drawn again for another commit or simulation", s)
			}
		}
	}
	seen := map[uint64]bool{}
	for _, s := range a {
		if seen[s] {
			t.Errorf("seed %d drawn twice in one run", s)
		}
		seen[s] = true
	}
}
