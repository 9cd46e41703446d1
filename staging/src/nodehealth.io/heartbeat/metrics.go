package heartbeat

import "time"

// Metrics receives what a Renewer observes. The library defines no metrics
// implementation of its own, so that an extension that does not want
// metrics links and initialises no metrics library (issue 12: Prometheus'
// client is most of what the library would otherwise add to a process).
// Package nodehealth.io/heartbeat/prommetrics implements it on a Prometheus
// registry with the metric names documented on the package; extension-
// heartbeat uses it. Nil Options.Metrics records nothing.
//
// The methods are called from the Renewer's goroutines and must not block.
type Metrics interface {
	// Renewed counts a write that holds the Lease (creation, renewal,
	// re-acquisition) made at the given time.
	Renewed(at time.Time)
	// RenewalFailed counts a failed write of the Lease.
	RenewalFailed()
	// Released counts a release of the Lease with the given reason.
	Released(reason string)
	// Probed observes one probe: its duration and whether it succeeded.
	Probed(d time.Duration, success bool)
	// Holding records whether this process holds the Lease.
	Holding(held bool)
}

// noMetrics is the Metrics of a Renewer without Options.Metrics.
type noMetrics struct{}

func (noMetrics) Renewed(time.Time)          {}
func (noMetrics) RenewalFailed()             {}
func (noMetrics) Released(string)            {}
func (noMetrics) Probed(time.Duration, bool) {}
func (noMetrics) Holding(bool)               {}
