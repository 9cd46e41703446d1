package operator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

const metricsNamespace = "update_operator"

// Metrics are the update controller's Prometheus metrics. None has a per-node
// label: cardinality is bounded by the states, the halt reasons and the
// Bottlerocket versions running in the cluster at once.
type Metrics struct {
	NodesByState     *prometheus.GaugeVec
	NodesByVersion   *prometheus.GaugeVec
	StateEntered     *prometheus.GaugeVec
	RolloutHalted    *prometheus.GaugeVec
	DeadlineExpiries *prometheus.CounterVec
	Transitions      *prometheus.CounterVec
	DryRunActions    *prometheus.CounterVec
	Starts           prometheus.Counter
	Aborts           prometheus.Counter
	UpdateDuration   prometheus.Histogram
	NextStartDelay   prometheus.Histogram
	AlertQueries     *prometheus.CounterVec
	AlertQueryErrors *prometheus.CounterVec
	Hooks            *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		NodesByState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "nodes",
			Help: "Managed nodes by the state their agent reports (status.currentState; Unknown before the first report)."}, []string{"state"}),
		NodesByVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "nodes_by_version",
			Help: "Managed nodes by the Bottlerocket version they run (status.currentVersion)."}, []string{"version"}),
		StateEntered: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "oldest_state_entered_timestamp_seconds",
			Help: "Unix time at which the node longest in this update state (spec.state StagedAndPerformedUpdate, RebootedIntoUpdate or MonitoringUpdate) entered it; a series exists only while some node is in the state. time() minus it is how long that node has been there."}, []string{"state"}),
		RolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "rollout_halted",
			Help: "1 while no node may start an update for this reason (Paused, UpdateFailed, OutsideWindow)."}, []string{"reason"}),
		DeadlineExpiries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "deadline_expiries_total",
			Help: "Updates failed because a node stayed in a state past its deadline, by state (the spec state, or ReturnToIdle: spec back at Idle, the agent still in an update state)."}, []string{"state"}),
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "spec_transitions_total",
			Help: "Spec state writes, by the state written."}, []string{"state"}),
		DryRunActions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "dry_run_actions_total",
			Help: "Writes a dry-run operator would have made: of a spec, by the state it would have written; of a Node's lifecycle conditions, state \"lifecycle\"."}, []string{"state"}),
		Starts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "update_starts_total",
			Help: "Nodes moved out of Idle to start an update."}),
		Aborts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "update_aborts_total",
			Help: "Updates that failed before the reboot (agent reported ErrorReset) and were returned to Idle to retry after back-off."}),
		UpdateDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "update_duration_seconds",
			Help:    "From a node's start to passing its health gate.",
			Buckets: prometheus.ExponentialBuckets(30, 2, 10)}),
		NextStartDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "next_start_delay_seconds",
			Help:    "From one node passing its health gate to the operator starting the next node.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
		AlertQueries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "alert_queries_total",
			Help: "Queries of an alert source (the configuration's alertSources) for the alerts gates of UpdatePolicies, by source."}, []string{"source"}),
		AlertQueryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "alert_query_errors_total",
			Help: "Queries of an alert source that got no answer (unreachable, a timeout, an error status, an answer that does not decode), by source: starts wait and soaks pause meanwhile."}, []string{"source"}),
		Hooks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "hooks_total",
			Help: "Hook Jobs of UpdatePolicies' spec.hooks that finished, by hook (beforeDrain, afterReboot) and result (succeeded, failed, timedOut)."}, []string{"hook", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.NodesByState, m.NodesByVersion, m.StateEntered, m.RolloutHalted, m.DeadlineExpiries, m.Transitions,
			m.DryRunActions, m.Starts, m.Aborts, m.UpdateDuration, m.NextStartDelay, m.AlertQueries, m.AlertQueryErrors, m.Hooks)
	}
	return m
}

var allStates = []updatesv1alpha1.ShadowState{updatesv1alpha1.StateIdle, updatesv1alpha1.StateStagedAndPerformedUpdate,
	updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate, updatesv1alpha1.StateErrorReset}

// updateGauges recomputes the per-state and per-version gauges from the
// cache. The start pass calls it on every shadow change.
func (c *Controller) updateGauges(shadows []*updatesv1alpha1.BottlerocketShadow) {
	byState := map[string]float64{"Unknown": 0}
	for _, st := range allStates {
		byState[string(st)] = 0
	}
	byVersion := map[string]float64{}
	// The oldest entry into each in-flight spec state: a timestamp, so the
	// gauge needs no update while a stuck node does not move.
	entered := map[updatesv1alpha1.ShadowState]time.Time{}
	for _, s := range shadows {
		if spec := s.Spec.State; inFlight(spec) && s.Spec.StateTransitionTimestamp != nil {
			if t, ok := entered[spec]; !ok || s.Spec.StateTransitionTimestamp.Time.Before(t) {
				entered[spec] = s.Spec.StateTransitionTimestamp.Time
			}
		}
		st := string(s.Status.CurrentState)
		if _, ok := byState[st]; !ok {
			st = "Unknown"
		}
		byState[st]++
		if s.Status.CurrentVersion != "" {
			byVersion[s.Status.CurrentVersion]++
		}
	}
	for st, n := range byState {
		c.metrics.NodesByState.WithLabelValues(st).Set(n)
	}
	// Versions no node runs any more disappear.
	c.metrics.NodesByVersion.Reset()
	for v, n := range byVersion {
		c.metrics.NodesByVersion.WithLabelValues(v).Set(n)
	}
	c.metrics.StateEntered.Reset()
	for st, t := range entered {
		c.metrics.StateEntered.WithLabelValues(string(st)).Set(float64(t.Unix()))
	}
}
