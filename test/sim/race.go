//go:build race

package sim

// RaceDetector reports whether the binary was built with -race. Under it a
// simulation runs a few of its seeds (make test-unit runs all of them
// again without it): a seed takes about four times as long, and the race
// detector needs the concurrent paths, not every schedule through them.
const RaceDetector = true
