package heartbeat

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one Renewer. Every series carries the constant label
// extension="<name>", so a process that embeds several renewers (one per
// extension) registers them all on the same registry.
type metrics struct {
	renewals        prometheus.Counter
	renewalFailures prometheus.Counter
	releases        *prometheus.CounterVec
	probeDuration   *prometheus.HistogramVec
	holding         prometheus.Gauge
	lastRenewal     prometheus.Gauge
}

func newMetrics(extension string) *metrics {
	labels := prometheus.Labels{"extension": extension}
	return &metrics{
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
}

func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.renewals, m.renewalFailures, m.releases, m.probeDuration, m.holding, m.lastRenewal} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
