package nodehealth

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

const metricsNamespace = "nodehealth"

// Metrics are the controller's Prometheus metrics. No metric has a per-node
// label: cardinality is bounded by the number of extensions and gate reasons.
type Metrics struct {
	GatedNodes          *prometheus.GaugeVec
	NotReadyNodes       *prometheus.GaugeVec
	TaintWrites         *prometheus.CounterVec
	DetectionLatency    prometheus.Histogram
	UngateLatency       prometheus.Histogram
	Evictions           *prometheus.CounterVec
	GatingSuspended     *prometheus.GaugeVec
	Suspensions         *prometheus.CounterVec
	InvalidLists        prometheus.Gauge
	ListWrites          *prometheus.CounterVec
	DryRunActions       *prometheus.CounterVec
	ConditionWrites     *prometheus.CounterVec
	StartupTimeouts     *prometheus.CounterVec
	OwnViewStale        prometheus.Gauge
	TrackedNodes        prometheus.Gauge
	LeavingNodes        prometheus.Gauge
	EvaluationsTotal    prometheus.Counter
	TimerRechecks       prometheus.Counter
	EvaluationDurations prometheus.Histogram
	// NodeStartup and ExtensionStartup time start-ups: from the gate's
	// start to the ungate, by cause, and to each extension's first ready
	// renewal, by extension (label bounded by startupSeries).
	NodeStartup      *prometheus.HistogramVec
	ExtensionStartup *prometheus.HistogramVec
	// LongestGate is read at scrape time from the running controller.
	LongestGate *gateAges
	// EvictionTurnWaiting is read at scrape time too: a node stops
	// waiting when its turn's instant comes, which no event announces.
	EvictionTurnWaiting *scrapedGauge

	queues *queueMetrics
	// notReadySeries bounds and cleans up the extension label of
	// NotReadyNodes.
	notReadySeries *extensionSeries
	// startupSeries bounds the extension label of ExtensionStartup.
	startupSeries *extensionLabels
}

// maxExtensionSeries caps the distinct extension label values of
// extension_not_ready_nodes. Extension names come from node annotations and
// Lease names, which anyone allowed to write them chooses; past the cap,
// further extensions are counted under otherExtensionsLabel.
const maxExtensionSeries = 100

// otherExtensionsLabel is the extension label of the extensions past the cap.
const otherExtensionsLabel = "_other"

// extensionSeries keeps the extension series of a gauge vector to those with
// a non-zero value, at most limit of them (plus otherExtensionsLabel). It is
// not safe for concurrent use: the controller calls it under its lock.
type extensionSeries struct {
	gauge  *prometheus.GaugeVec
	limit  int
	counts map[string]int
}

func newExtensionSeries(gauge *prometheus.GaugeVec, limit int) *extensionSeries {
	return &extensionSeries{gauge: gauge, limit: limit, counts: map[string]int{}}
}

// label is the label value extension is counted under: its own name while it
// has a series or there is room for one.
func (e *extensionSeries) label(extension string) string {
	if _, ok := e.counts[extension]; ok || extension == otherExtensionsLabel {
		return extension
	}
	n := len(e.counts)
	if _, ok := e.counts[otherExtensionsLabel]; ok {
		n--
	}
	if n < e.limit {
		return extension
	}
	return otherExtensionsLabel
}

// inc counts one more node under label (from label()).
func (e *extensionSeries) inc(label string) {
	e.counts[label]++
	e.gauge.WithLabelValues(label).Inc()
}

// dec counts one node less under label, and deletes the series at zero so
// that extensions that are gone do not keep series forever.
func (e *extensionSeries) dec(label string) {
	if e.counts[label] <= 1 {
		delete(e.counts, label)
		e.gauge.DeleteLabelValues(label)
		return
	}
	e.counts[label]--
	e.gauge.WithLabelValues(label).Dec()
}

// extensionLabels bounds the extension label of a histogram the way
// extensionSeries bounds extension_not_ready_nodes: at most limit extensions
// get a series of their own, further ones share otherExtensionsLabel. A
// histogram's series are never deleted (that would reset its counts under
// rate()), so the first limit extensions keep theirs. Safe for concurrent use.
type extensionLabels struct {
	mu    sync.Mutex
	limit int
	known map[string]struct{}
}

func newExtensionLabels(limit int) *extensionLabels {
	return &extensionLabels{limit: limit, known: map[string]struct{}{}}
}

// label is the label value extension is observed under.
func (e *extensionLabels) label(extension string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.known[extension]; ok || extension == otherExtensionsLabel {
		return extension
	}
	if len(e.known) < e.limit {
		e.known[extension] = struct{}{}
		return extension
	}
	return otherExtensionsLabel
}

// startupBuckets span 1 s to 30 min: extensions come up in seconds to
// minutes after a boot, and startup timeouts are minutes (10 m by default).
var startupBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1200, 1800}

// Start-up causes, the cause label of nodehealth_node_startup_seconds.
const (
	startupBootstrap  = "bootstrap"
	startupReboot     = "reboot"
	startupRecreation = "re-creation"
)

// startupCauseLabel is the cause label of a gate cause; false for a
// cause that is not a start-up the histogram times.
func startupCauseLabel(cause string) (string, bool) {
	switch gateCause(cause) {
	case causeNew:
		return startupBootstrap, true
	case causeRebooted:
		return startupReboot, true
	case causeRecreated:
		return startupRecreation, true
	}
	return "", false
}

// latencyBuckets span 10 ms to ~80 s: the targets are around one second, and
// anything over a Lease duration is a failure worth seeing.
var latencyBuckets = prometheus.ExponentialBuckets(0.01, 2, 14)

// NewMetrics creates the metrics and registers them with reg (which may be nil
// in tests that do not look at them).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		GatedNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "gated_nodes",
			Help: "Nodes the controller gates, by reason (NodeRegistered, NodeRebooted, NodeRecreated, ControllerStarted, ExtensionsNotReady, PlannedMaintenance, StartupTimeout)."}, []string{"reason"}),
		NotReadyNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "extension_not_ready_nodes",
			Help: "Nodes on which a listed extension is not ready, by extension. Series exist only while non-zero; past 100 extensions, further ones are counted under extension=\"_other\"."}, []string{"extension"}),
		TaintWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "taint_writes_total",
			Help: "Node writes that add or remove the readiness taint, by operation (add, remove, noexecute) and result (success, conflict, error)."}, []string{"operation", "result"}),
		DetectionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "detection_latency_seconds",
			Help: "From the instant an extension stopped being ready (Lease expiry, observed release, or Lease deletion or first seen missing) to the readiness taint being written.", Buckets: latencyBuckets}),
		UngateLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "ungate_latency_seconds",
			Help: "From observing the last required renewal to the readiness taint being removed.", Buckets: latencyBuckets}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "evictions_total",
			Help: "Pod evictions and escalations, by result (evicted, blocked, error, noexecute)."}, []string{"result"}),
		GatingSuspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "gating_suspended",
			Help: "Blast-radius suspension of failure taints and evictions: scope cluster is 1 while suspended cluster-wide, scope zones is the number of suspended zones. See own_view_stale for the canary."}, []string{"scope"}),
		Suspensions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "suspensions_total",
			Help: "Suspensions of failure taints and evictions that began, by scope (cluster, zone, own-view)."}, []string{"scope"}),
		InvalidLists: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "invalid_extension_lists",
			Help: "Nodes whose nodehealth.io/system-extensions annotation cannot be parsed; they keep their gate state."}),
		ListWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "extension_list_writes_total",
			Help: "Writes of the SystemExtensions annotation by rules and self-registration, by result."}, []string{"result"}),
		DryRunActions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "dry_run_actions_total",
			Help: "Changes a dry-run controller would have made, by action (add, remove, noexecute, taints, annotations, condition, evict)."}, []string{"action"}),
		ConditionWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "condition_writes_total",
			Help: "Writes of the SystemExtensionsReady node condition, by result."}, []string{"result"}),
		StartupTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "startup_timeouts_total",
			Help: "Extensions that were not ready within their startup timeout, by failure policy."}, []string{"policy"}),
		OwnViewStale: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "own_view_stale",
			Help: "1 while the controller does not observe its own canary Lease renewals; taint additions and evictions are suspended."}),
		TrackedNodes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "tracked_nodes",
			Help: "Nodes that list at least one extension that affects readiness."}),
		LeavingNodes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "leaving_nodes",
			Help: "Nodes that are leaving (a deletionTimestamp, a taint of leavingNodeTaints, or a foreign KEP-5683 lifecycle condition) and list an extension: never escalated, and counted on neither side of the blast radius."}),
		EvaluationsTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "evaluations_total",
			Help: "Node evaluations."}),
		TimerRechecks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "timer_rechecks_total",
			Help: "Expiry timers of steady nodes whose Leases had all been renewed since: the timer moved to the new expiry without a full evaluation."}),
		EvaluationDurations: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "evaluation_duration_seconds",
			Help: "Time to evaluate and write one node.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		NodeStartup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "node_startup_seconds",
			Help: "Start-ups of nodes: from the controller observing the cause (a new node, a reboot, a re-creation) to the readiness taint being removed, by cause (bootstrap, reboot, re-creation); the controller's clock. Start-ups found at a controller start are not counted.", Buckets: startupBuckets}, []string{"cause"}),
		ExtensionStartup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "extension_startup_seconds",
			Help: "From the start of a node's start-up gate to the first ready renewal of an extension's Lease the controller observed after it, by extension; the controller's clock. Past 100 extensions, further ones are counted under extension=\"_other\".", Buckets: startupBuckets}, []string{"extension"}),
		LongestGate: &gateAges{desc: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", "longest_gate_seconds"),
			"How long the longest-gated of the nodes gated for this reason has been gated without interruption (as seen by the current leader: a failover restarts the count). Series exist only for reasons some node is gated for.",
			[]string{"reason"}, nil)},
		EvictionTurnWaiting: &scrapedGauge{desc: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", "eviction_turn_waiting_nodes"),
			"Nodes whose eviction came due and that wait for their turn of the cluster-wide eviction rate (eviction.nodesPerSecond): a turn taken whose instant has not come.",
			nil, nil)},
		queues: newQueueMetrics(),
	}
	m.notReadySeries = newExtensionSeries(m.NotReadyNodes, maxExtensionSeries)
	m.startupSeries = newExtensionLabels(maxExtensionSeries)
	if reg != nil {
		reg.MustRegister(m.GatedNodes, m.NotReadyNodes, m.TaintWrites, m.DetectionLatency, m.UngateLatency, m.Evictions,
			m.GatingSuspended, m.Suspensions, m.InvalidLists, m.ListWrites, m.DryRunActions, m.ConditionWrites,
			m.StartupTimeouts, m.OwnViewStale, m.TrackedNodes, m.LeavingNodes, m.EvaluationsTotal, m.TimerRechecks, m.EvaluationDurations, m.LongestGate,
			m.NodeStartup, m.ExtensionStartup, m.EvictionTurnWaiting)
		reg.MustRegister(m.queues.collectors()...)
	}
	return m
}

// gateAges is nodehealth_longest_gate_seconds. Computed when scraped rather
// than kept up to date, because a gate's age grows without any event: a
// node that stays gated is exactly the one no sync touches. The alert on
// nodes gated too long reads it.
type gateAges struct {
	desc *prometheus.Desc
	// source returns the longest gate age by reason; set by the running
	// controller (a new one after a failover replaces it).
	source atomic.Pointer[func() map[gateCause]float64]
}

func (g *gateAges) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gateAges) Collect(ch chan<- prometheus.Metric) {
	source := g.source.Load()
	if source == nil {
		return
	}
	for reason, seconds := range (*source)() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, seconds, string(reason))
	}
}

// scrapedGauge is a gauge without labels whose value the running controller
// computes when it is scraped (a new one after a failover replaces the
// source); no series before a controller set one.
type scrapedGauge struct {
	desc   *prometheus.Desc
	source atomic.Pointer[func() float64]
}

func (g *scrapedGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *scrapedGauge) Collect(ch chan<- prometheus.Metric) {
	if source := g.source.Load(); source != nil {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, (*source)())
	}
}

// observeStartup counts a start-up that ended in decision d: the node's
// time to the ungate by cause and each extension's time to its first ready
// renewal. A start-up found at a controller start began an unknown time
// before the controller saw it and is not counted.
func (c *Controller) observeStartup(d decision) {
	if d.startup == nil || d.startup.FoundAtStart {
		return
	}
	cause, ok := startupCauseLabel(d.startup.Cause)
	if !ok {
		return
	}
	c.metrics.NodeStartup.WithLabelValues(cause).Observe(d.startup.Ready.Seconds())
	for ext, ready := range d.startupExtensions {
		c.metrics.ExtensionStartup.WithLabelValues(c.metrics.startupSeries.label(ext)).Observe(ready.Seconds())
	}
}
