package app

import (
	"os"
	"runtime"
)

// SetMaxProcs runs the sidecar's Go code on one processor (GOMAXPROCS=1)
// unless the GOMAXPROCS environment variable says otherwise. The sidecar
// needs a few milliseconds of CPU every 10 s, and every processor the Go
// runtime keeps costs memory whether it is used or not: its own cache of
// heap spans and GC buffers. Go's default is one per core of the node (or of
// the container's CPU limit): RSS grows from 16.8 MiB with one to 17.1 MiB
// with two and 18.1 MiB with 16 (docs/benchmarks.md), and nodes have dozens
// of cores. It returns the value in effect.
func SetMaxProcs() int {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	return runtime.GOMAXPROCS(0)
}
