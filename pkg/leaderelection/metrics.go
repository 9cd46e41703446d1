package leaderelection

import "github.com/prometheus/client_golang/prometheus"

// LeadingMetricName is the gauge that says whether a replica runs the
// component's work: dashboards and the "no leader" alert sum it over the
// replicas of a component.
const LeadingMetricName = "nodehealth_leader_election_leading"

// NewLeadingGauge creates and registers (reg may be nil) the gauge of the
// component called name: 1 while this replica runs the work, 0 otherwise.
// Give it to Config.Leading; a component running without leader election
// sets it itself while its work runs, so that the sum over replicas is 1
// either way.
func NewLeadingGauge(reg prometheus.Registerer, name string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        LeadingMetricName,
		Help:        "1 while this replica runs the component's work (leads, or runs without leader election), 0 otherwise.",
		ConstLabels: prometheus.Labels{"name": name},
	})
	if reg != nil {
		reg.MustRegister(g)
	}
	return g
}
