package nodehealth

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics exposes the controller's workqueues (depth, adds, latency,
// work duration, retries) on the controller's own registry, labelled by queue
// name, in the shape of client-go's standard workqueue metrics.
type queueMetrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = &queueMetrics{}

func newQueueMetrics() *queueMetrics {
	opts := func(name, help string) (string, string, string) { return metricsNamespace, "workqueue_" + name, help }
	gauge := func(name, help string) *prometheus.GaugeVec {
		ns, n, h := opts(name, help)
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: n, Help: h}, []string{"name"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		ns, n, h := opts(name, help)
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: n, Help: h}, []string{"name"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		ns, n, h := opts(name, help)
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: n, Help: h,
			Buckets: prometheus.ExponentialBuckets(10e-6, 10, 8)}, []string{"name"})
	}
	return &queueMetrics{
		depth:          gauge("depth", "Current depth of the workqueue (nodes waiting to be evaluated or escalated)."),
		adds:           counter("adds_total", "Items added to the workqueue."),
		latency:        histogram("queue_duration_seconds", "How long an item waits in the workqueue before being processed."),
		workDuration:   histogram("work_duration_seconds", "How long processing an item takes."),
		unfinished:     gauge("unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration_seconds."),
		longestRunning: gauge("longest_running_processor_seconds", "Seconds the longest-running processor has been running."),
		retries:        counter("retries_total", "Items re-queued after an error."),
	}
}

func (m *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries}
}

func (m *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}
func (m *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}
func (m *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}
func (m *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}
func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}
func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name)
}
func (m *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
