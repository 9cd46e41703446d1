package operator

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/window"
)

// DefaultPostRebootSoak is a policy's postRebootSoak when it sets none, and
// the soak of a node whose policy is gone.
const DefaultPostRebootSoak = 5 * time.Minute

// policy is an UpdatePolicy in plain values, validated by the operator:
// the CRD's schema and CEL rules catch most mistakes, but not an unknown
// time zone, a version the operator cannot compare, or a soak longer than
// the operator's own MonitoringUpdate deadline.
type policy struct {
	name       string
	generation int64
	// invalid says why the policy starts nothing ("" when valid).
	invalid string
	// badTimeZone is set when invalid is an unknown time zone: reported
	// in the WindowOpen condition too.
	badTimeZone bool

	selector             labels.Selector
	targetVersion        string
	paused               bool
	maxConcurrent        intstr.IntOrString
	maxConcurrentPerZone *intstr.IntOrString
	windows              window.Set
	soak                 time.Duration

	// ignoreWaves: the pin is taken ahead of its wave (spec.ignoreWaves).
	ignoreWaves bool
	// countNotReady: selected nodes not ready take slots too
	// (spec.countNotReady).
	countNotReady bool

	// minReleaseAge and delayBetweenNodes pace the rollout (0: no wait).
	minReleaseAge, delayBetweenNodes time.Duration
	// firstOffered (by normalized version) and lastSucceeded are the
	// policy's own records from its status: what the pacing is measured
	// from, kept in the API so that a new leader does not start the clocks
	// over.
	firstOffered  map[string]offer
	lastSucceeded time.Time

	// drain is spec.drain; its unset fields take the configuration's.
	drain policyDrain

	// blockingAnywhere and blockingOnNode are spec.gates.blockingPods's
	// selectors (nil: unset).
	blockingAnywhere, blockingOnNode labels.Selector
	// alerts are spec.gates.alerts: the queries of alert sources that
	// hold starts back, and fail a node an alert names in its soak.
	alerts []alertGate

	// rollback: a node that fails its health gate is updated back to the
	// version it ran before (spec.onHealthGateFailure Rollback).
	rollback bool

	// hooks are spec.hooks (hooks.go).
	hooks policyHooks
}

// policyDrain is a policy's spec.drain in plain values: nil (0 for the
// timeout) where the policy leaves it to the operator's configuration.
type policyDrain struct {
	timeout               time.Duration
	gracePeriodSeconds    *int64
	force, deleteEmptyDir *bool
	// skip selects the pods the drain leaves alone (nil: none).
	skip labels.Selector
}

// MaxGracePeriodSeconds bounds spec.drain.gracePeriodSeconds, as the CRD's
// rules do.
const MaxGracePeriodSeconds = 86400

// Upper bounds of the pacing fields, as the CRD's rules have them.
const (
	MaxMinReleaseAge     = 30 * 24 * time.Hour
	MaxDelayBetweenNodes = 24 * time.Hour
)

// parsePolicy validates an UpdatePolicy against what the controller relies
// on. An invalid policy is kept (it still governs its nodes, so they do not
// fall to another policy or start by accident) but starts nothing.
func parsePolicy(p *updatesv1alpha1.UpdatePolicy, d Deadlines) *policy {
	out := newPolicy(p)
	for _, parse := range []func() error{
		func() error { return out.parseSelector(p.Spec.NodeSelector) },
		func() error {
			// Before the checks that may fail: the nodes in flight of a
			// policy made invalid by another field keep its soak.
			if soak := p.Spec.PostRebootSoak; soak != nil {
				out.soak = soak.Duration
			}
			return nil
		},
		// Before the checks that may fail too: a node in flight of a policy
		// made invalid by another field is still rolled back as asked.
		func() error { return out.parseOnHealthGateFailure(p.Spec.OnHealthGateFailure) },
		func() error { return out.parsePacingAndDrain(p.Spec, d) },
		func() error { return parseLimitsAndTarget(p.Spec) },
		func() error { return out.parseSoak(d) },
		func() error { return out.parseWindows(p.Spec.Windows) },
		func() error { return out.parseGates(p.Spec.Gates) },
		func() error { return out.parseHooks(p.Spec.Hooks, d) },
	} {
		if err := parse(); err != nil {
			out.invalid = err.Error()
			return out
		}
	}
	return out
}

// newPolicy is the policy's plain settings and its records; the records come
// first, since an invalid policy keeps them in its status.
func newPolicy(p *updatesv1alpha1.UpdatePolicy) *policy {
	out := &policy{name: p.Name, generation: p.Generation, targetVersion: p.Spec.TargetVersion, paused: p.Spec.Paused,
		// Only a pin is taken ahead of its wave (CEL rejects ignoreWaves
		// without one; an older CRD may not).
		ignoreWaves: p.Spec.IgnoreWaves && p.Spec.TargetVersion != "", countNotReady: p.Spec.CountNotReady,
		maxConcurrent: p.Spec.MaxConcurrentUpdates, maxConcurrentPerZone: p.Spec.MaxConcurrentUpdatesPerZone, soak: DefaultPostRebootSoak}
	out.firstOffered = map[string]offer{}
	for _, v := range p.Status.OfferedVersions {
		out.firstOffered[versionKey(v.Version)] = offer{version: v.Version, since: v.FirstOffered.Time}
	}
	if t := p.Status.LastUpdateSucceeded; t != nil {
		out.lastSucceeded = t.Time
	}
	// Whatever else is invalid: the policy's nodes in flight still run the
	// hooks a drain or a reboot must not go without (parseHooks).
	if h := p.Spec.Hooks; h != nil {
		out.hooks = policyHooks{beforeDrain: h.BeforeDrain, afterReboot: h.AfterReboot}
	}
	return out
}

func (out *policy) parseSelector(s *metav1.LabelSelector) error {
	// A policy whose selector is invalid selects nothing, so it cannot be
	// the reason a node starts.
	out.selector = labels.Nothing()
	if s == nil {
		return errors.New("spec.nodeSelector is required (use {} for every managed node)")
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return fmt.Errorf("spec.nodeSelector: %v", err)
	}
	out.selector = sel
	return nil
}

func (out *policy) parseOnHealthGateFailure(a updatesv1alpha1.HealthGateFailureAction) error {
	switch a {
	case "", updatesv1alpha1.HealthGateFailureHalt:
	case updatesv1alpha1.HealthGateFailureRollback:
		out.rollback = true
	default:
		// An older CRD, without the enum, may let it through.
		return fmt.Errorf("spec.onHealthGateFailure %q must be %s or %s", a, updatesv1alpha1.HealthGateFailureHalt, updatesv1alpha1.HealthGateFailureRollback)
	}
	return nil
}

func (out *policy) parsePacingAndDrain(spec updatesv1alpha1.UpdatePolicySpec, d Deadlines) error {
	if v := spec.MinReleaseAge; v != nil {
		out.minReleaseAge = v.Duration
	}
	if v := spec.DelayBetweenNodes; v != nil {
		out.delayBetweenNodes = v.Duration
	}
	// An older CRD, without the rules, may let these through.
	if out.minReleaseAge < 0 || out.minReleaseAge > MaxMinReleaseAge {
		return fmt.Errorf("spec.minReleaseAge (%s) must be between 0 and %s", out.minReleaseAge, MaxMinReleaseAge)
	}
	if out.delayBetweenNodes < 0 || out.delayBetweenNodes > MaxDelayBetweenNodes {
		return fmt.Errorf("spec.delayBetweenNodes (%s) must be between 0 and %s", out.delayBetweenNodes, MaxDelayBetweenNodes)
	}
	if err := parseDrain(spec.Drain, d, &out.drain); err != nil {
		return fmt.Errorf("spec.drain: %v", err)
	}
	if out.ignoreWaves && out.minReleaseAge > 0 {
		return fmt.Errorf("spec.ignoreWaves takes the pin before it is offered, and spec.minReleaseAge waits until it has been offered for %s: set one of them",
			out.minReleaseAge)
	}
	return nil
}

func parseLimitsAndTarget(spec updatesv1alpha1.UpdatePolicySpec) error {
	if _, err := scaledLimit(spec.MaxConcurrentUpdates, 1); err != nil {
		return fmt.Errorf("spec.maxConcurrentUpdates: %v", err)
	}
	if z := spec.MaxConcurrentUpdatesPerZone; z != nil {
		if _, err := scaledLimit(*z, 1); err != nil {
			return fmt.Errorf("spec.maxConcurrentUpdatesPerZone: %v", err)
		}
	}
	if v := spec.TargetVersion; v != "" {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("spec.targetVersion: %v", err)
		}
	}
	return nil
}

func (out *policy) parseSoak(d Deadlines) error {
	if out.soak < 0 {
		out.soak = DefaultPostRebootSoak
		return errors.New("spec.postRebootSoak must not be negative")
	}
	if d.MonitoringUpdate > 0 && out.soak >= d.MonitoringUpdate {
		// Nodes of the policy in flight keep a soak that can pass.
		soak := out.soak
		out.soak = min(DefaultPostRebootSoak, d.MonitoringUpdate/2)
		return fmt.Errorf("spec.postRebootSoak (%s) must be shorter than the operator's MonitoringUpdate deadline (%s), which includes it",
			soak, d.MonitoringUpdate)
	}
	return nil
}

func (out *policy) parseWindows(windows []updatesv1alpha1.UpdateWindow) error {
	specs := make([]window.Spec, 0, len(windows))
	for _, w := range windows {
		specs = append(specs, window.Spec{Schedule: w.Schedule, Duration: w.Duration.Duration, TimeZone: w.TimeZone})
	}
	ws, err := window.Parse(specs...)
	if err != nil {
		out.badTimeZone = errors.Is(err, window.ErrUnknownTimeZone)
		return fmt.Errorf("spec.windows: %v", err)
	}
	out.windows = ws
	return nil
}

// parseDrain checks spec.drain against what the operator relies on: a
// timeout its RebootedIntoUpdate deadline, which includes the drain, can
// hold, and a selector it can match.
func parseDrain(in *updatesv1alpha1.PolicyDrain, d Deadlines, out *policyDrain) error {
	if in == nil {
		return nil
	}
	// Nothing of an invalid spec.drain applies: the drains of the
	// policy's nodes in flight take the configuration's.
	var pd policyDrain
	if in.Timeout != nil {
		pd.timeout = in.Timeout.Duration
		if pd.timeout <= 0 {
			return fmt.Errorf("timeout must be positive, got %s", pd.timeout)
		}
		if d.RebootedIntoUpdate > 0 && pd.timeout >= d.RebootedIntoUpdate {
			return fmt.Errorf("timeout (%s) must be shorter than the operator's RebootedIntoUpdate deadline (%s), which includes the drain and the reboot",
				pd.timeout, d.RebootedIntoUpdate)
		}
	}
	if g := in.GracePeriodSeconds; g != nil && (*g < 0 || *g > MaxGracePeriodSeconds) {
		return fmt.Errorf("gracePeriodSeconds must be between 0 and %d, got %d", MaxGracePeriodSeconds, *g)
	}
	pd.gracePeriodSeconds, pd.force, pd.deleteEmptyDir = in.GracePeriodSeconds, in.Force, in.DeleteEmptyDirData
	if in.SkipPodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(in.SkipPodSelector)
		if err != nil {
			return fmt.Errorf("skipPodSelector: %w", err)
		}
		pd.skip = sel
	}
	*out = pd
	return nil
}

// versionKey is a version as the pacing records compare it: "v1.21.0" and
// "1.21.0" are one version.
func versionKey(v string) string { return strings.TrimPrefix(v, "v") }

// parsePolicies parses every policy, sorted by name.
func parsePolicies(list []*updatesv1alpha1.UpdatePolicy, d Deadlines) []*policy {
	out := make([]*policy, 0, len(list))
	for _, p := range list {
		out = append(out, parsePolicy(p, d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// scaledLimit resolves a count or percentage against total: a percentage
// rounds down, and the result is at least 1 so a rollout always progresses.
func scaledLimit(v intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, false)
	if err != nil {
		return 0, err
	}
	if v.Type == intstr.Int && n < 1 {
		return 0, fmt.Errorf("must be at least 1")
	}
	if v.Type == intstr.String && (n < 0 || v.StrVal == "0%") {
		return 0, fmt.Errorf("must be a percentage from 1%% to 100%%")
	}
	return max(n, 1), nil
}
