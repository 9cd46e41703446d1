//go:build !race

package sim

// RaceDetector reports whether the binary was built with -race (race.go).
const RaceDetector = false
