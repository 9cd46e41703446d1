package app

import (
	"runtime"
	"testing"
)

func TestSetMaxProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	runtime.GOMAXPROCS(4)
	t.Setenv("GOMAXPROCS", "")
	if n := SetMaxProcs(); n != 1 {
		t.Errorf("without GOMAXPROCS in the environment: %d processors, want 1", n)
	}

	// Go reads the variable at start; SetMaxProcs leaves that choice alone.
	runtime.GOMAXPROCS(3)
	t.Setenv("GOMAXPROCS", "3")
	if n := SetMaxProcs(); n != 3 {
		t.Errorf("with GOMAXPROCS=3: %d processors, want 3", n)
	}
}
