// Package prommetrics exports a heartbeat Renewer's observations as
// Prometheus metrics: pass New's result as heartbeat.Options.Metrics. It is
// a package of its own so that an extension that does not want metrics does
// not link or initialise Prometheus' client through nodehealth.io/heartbeat.
//
// Every series carries the constant label extension="<name>", so a process
// that embeds several renewers (one per extension) registers them all on
// the same registry:
//
//	nodehealth_heartbeat_renewals_total
//	nodehealth_heartbeat_renewal_failures_total
//	nodehealth_heartbeat_releases_total{reason}
//	nodehealth_heartbeat_probe_duration_seconds{result="success"|"failure"}
//	nodehealth_heartbeat_holding
//	nodehealth_heartbeat_last_renewal_timestamp_seconds
package prommetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics implements heartbeat.Metrics on Prometheus collectors.
type Metrics struct {
	renewals        prometheus.Counter
	renewalFailures prometheus.Counter
	releases        *prometheus.CounterVec
	probeDuration   *prometheus.HistogramVec
	holding         prometheus.Gauge
	lastRenewal     prometheus.Gauge
}

// New registers the metrics of the renewer of extension on reg and returns
// them. It fails when reg already has them, for instance for a second
// renewer of the same extension. A nil reg registers nothing (the metrics
// still count, e.g. for tests that read them through Collectors).
func New(reg prometheus.Registerer, extension string) (*Metrics, error) {
	labels := prometheus.Labels{"extension": extension}
	m := &Metrics{
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "nodehealth_heartbeat_renewals_total",
			Help:        "Successful writes of the extension's Lease that hold it (creation, renewal, re-acquisition).",
			ConstLabels: labels,
		}),
		renewalFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "nodehealth_heartbeat_renewal_failures_total",
			Help:        "Failed writes of the extension's Lease (each is retried with back-off).",
			ConstLabels: labels,
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "nodehealth_heartbeat_releases_total",
			Help:        "Releases of the extension's Lease (empty holderIdentity), by reason.",
			ConstLabels: labels,
		}, []string{"reason"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "nodehealth_heartbeat_probe_duration_seconds",
			Help:        "Duration of the extension's health probes, by result (success or failure).",
			ConstLabels: labels,
			Buckets:     []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"result"}),
		holding: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "nodehealth_heartbeat_holding",
			Help:        "1 while this process holds the extension's Lease (last write succeeded and held it), 0 otherwise.",
			ConstLabels: labels,
		}),
		lastRenewal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "nodehealth_heartbeat_last_renewal_timestamp_seconds",
			Help:        "Unix time of the last successful renewal; alert when it falls behind by more than the lease duration.",
			ConstLabels: labels,
		}),
	}
	if reg != nil {
		for _, c := range m.Collectors() {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Collectors returns the metrics' collectors.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.renewals, m.renewalFailures, m.releases, m.probeDuration, m.holding, m.lastRenewal}
}

// Renewed implements heartbeat.Metrics.
func (m *Metrics) Renewed(at time.Time) {
	m.renewals.Inc()
	m.lastRenewal.Set(float64(at.UnixNano()) / 1e9)
}

// RenewalFailed implements heartbeat.Metrics.
func (m *Metrics) RenewalFailed() { m.renewalFailures.Inc() }

// Released implements heartbeat.Metrics.
func (m *Metrics) Released(reason string) { m.releases.WithLabelValues(reason).Inc() }

// Probed implements heartbeat.Metrics.
func (m *Metrics) Probed(d time.Duration, success bool) {
	result := "success"
	if !success {
		result = "failure"
	}
	m.probeDuration.WithLabelValues(result).Observe(d.Seconds())
}

// Holding implements heartbeat.Metrics.
func (m *Metrics) Holding(held bool) {
	if held {
		m.holding.Set(1)
	} else {
		m.holding.Set(0)
	}
}
