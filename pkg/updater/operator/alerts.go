package operator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
)

// AlertSource answers which alerts fire that match every matcher: an
// Alertmanager (alertmanager.Client), or a fake in tests.
type AlertSource interface {
	Firing(ctx context.Context, matchers []alertmanager.Matcher) ([]alertmanager.Alert, error)
}

// Reasons of the Blocked condition and failures of the alerts gate.
const (
	BlockedByAlerts    = "FiringAlerts"
	UnknownAlertSource = "UnknownAlertSource"
	// ReasonFiringAlert fails a node's health gate: an alert of its
	// policy's gate that names the node fired during its soak.
	ReasonFiringAlert = "FiringAlert"
	// NodeLabel is the alert label that names a node for the soak.
	NodeLabel = "node"
)

// alertGate is one entry of spec.gates.alerts in plain values.
type alertGate struct {
	source   string
	matchers []alertmanager.Matcher
}

// key is the entry as a pass's read of it is keyed: an edited matcher is
// read again.
func (g alertGate) key() string {
	parts := []string{g.source}
	for _, m := range g.matchers {
		parts = append(parts, m.String())
	}
	return strings.Join(parts, ",")
}

// alertsKey keys all of a policy's alert gates.
func alertsKey(gates []alertGate) string {
	keys := make([]string, 0, len(gates))
	for _, g := range gates {
		keys = append(keys, g.key())
	}
	return strings.Join(keys, ";")
}

// parseAlerts reads spec.gates.alerts. The CRD checks the shape; a regular
// expression is checked here, where RE2 is at hand, so that a policy whose
// matcher Alertmanager would refuse says so instead of blocking for good
// as GateUnavailable.
func (out *policy) parseAlerts(in []updatesv1alpha1.AlertGate) error {
	for i, a := range in {
		if a.Source == "" || len(a.Matchers) == 0 {
			return fmt.Errorf("spec.gates.alerts[%d]: a source and at least one matcher are required", i)
		}
		g := alertGate{source: a.Source}
		for j, m := range a.Matchers {
			if m.IsRegex {
				if _, err := regexp.Compile(m.Value); err != nil {
					return fmt.Errorf("spec.gates.alerts[%d].matchers[%d]: %v", i, j, err)
				}
			}
			g.matchers = append(g.matchers, alertmanager.Matcher{Name: m.Name, Value: m.Value, IsRegex: m.IsRegex, IsEqual: m.IsEqual == nil || *m.IsEqual})
		}
		out.alerts = append(out.alerts, g)
	}
	return nil
}

// unknownSources are the sources the policy names that the operator's
// configuration does not define, in order of the gates.
func unknownSources(pol *policy, known map[string]AlertSource) []string {
	var out []string
	for _, g := range pol.alerts {
		if _, ok := known[g.source]; !ok && !slices.Contains(out, g.source) {
			out = append(out, g.source)
		}
	}
	return out
}

// firingAlert is an alert of a gate, named for a condition or an Event.
type firingAlert struct {
	source string
	alert  alertmanager.Alert
}

func (f firingAlert) String() string {
	name := f.alert.Name()
	if n := f.alert.Labels[NodeLabel]; n != "" {
		name += "{node=" + n + "}"
	}
	return name + " (source " + f.source + ")"
}

// answerAlerts is the sources' answer for the gates, shared with every
// other reader of the same gates for Options.GateRecheck (alertAnswers); one asked
// before notBefore is not used.
func (c *Controller) answerAlerts(ctx context.Context, gates []alertGate, notBefore time.Time) *alertAnswer {
	return c.alertAnswers.get(ctx, alertsKey(gates), c.now(), notBefore, c.opts.GateRecheck, func(ctx context.Context) ([]firingAlert, []string) {
		return c.queryAlerts(ctx, gates)
	})
}

// queryAlerts asks each source of the gates for its firing alerts; errs
// says which sources could not answer, and why.
func (c *Controller) queryAlerts(ctx context.Context, gates []alertGate) (firing []firingAlert, errs []string) {
	for _, g := range gates {
		src, ok := c.opts.AlertSources[g.source]
		if !ok {
			errs = append(errs, fmt.Sprintf("alert source %q is not defined in the operator's configuration (alertSources)", g.source))
			continue
		}
		c.metrics.AlertQueries.WithLabelValues(g.source).Inc()
		alerts, err := src.Firing(ctx, g.matchers)
		if err != nil {
			c.metrics.AlertQueryErrors.WithLabelValues(g.source).Inc()
			klog.FromContext(ctx).V(2).Info("Alert source unavailable", "source", g.source, "err", err)
			errs = append(errs, fmt.Sprintf("querying alert source %s: %v", g.source, err))
			continue
		}
		for _, a := range alerts {
			firing = append(firing, firingAlert{source: g.source, alert: a})
		}
	}
	return firing, errs
}

// soakAlerts runs the policy's alerts gate on a node in its soak, which
// ends at end: an alert that names the node fails its health gate
// (reported is true: nothing more to do in this sync), a source that
// cannot answer pauses the soak and its deadline until it answers again,
// and a source that answers again resumes them. Without alert gates it
// does nothing.
func (c *Controller) soakAlerts(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, pol *policy, now, end time.Time) (bool, error) {
	if pol == nil || len(pol.alerts) == 0 {
		return false, c.resumeSoak(ctx, s, now)
	}
	// The answer that passes the node was asked once its soak was over:
	// an answer shared from earlier would miss an alert that fired in the
	// soak's last seconds.
	var notBefore time.Time
	if !now.Before(end) {
		notBefore = end
	}
	ans := c.answerAlerts(ctx, pol.alerts, notBefore)
	// Looked at again when the answer expires, with the policy's other
	// nodes: the pause ends when the source answers.
	recheck := max(ans.recheckAt().Sub(now), 0)
	for _, f := range ans.firing {
		if f.alert.Labels[NodeLabel] != s.Name {
			continue
		}
		c.countMu.Lock()
		defer c.countMu.Unlock()
		return true, c.recordFailure(ctx, s, &failure{reason: ReasonFiringAlert, healthGate: true,
			message: fmt.Sprintf("%s: alert %s of spec.gates.alerts of UpdatePolicy %s names the node and fired during its soak", ReasonFiringAlert, f, pol.name)})
	}
	if len(ans.errs) > 0 {
		c.after(s.Name, recheck)
		return true, c.pauseSoak(ctx, s, now, strings.Join(ans.errs, "; "))
	}
	if soakPausedNow(s) {
		return true, c.resumeSoak(ctx, s, now)
	}
	c.after(s.Name, recheck)
	return false, nil
}

// pauseSoak records when the soak paused, once.
func (c *Controller) pauseSoak(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, now time.Time, why string) error {
	if soakPausedNow(s) {
		return nil
	}
	c.event(s, v1.EventTypeWarning, "SoakPaused", "The soak and its deadline are paused until the alerts gate can be read again: %s", why)
	return c.setSoakPause(ctx, s, map[string]*string{updatesv1alpha1.SoakPausedSinceAnnotation: ptr.To(now.UTC().Format(time.RFC3339))})
}

// resumeSoak adds the pause that ends now to the soak's paused time.
func (c *Controller) resumeSoak(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, now time.Time) error {
	since, ok := pausedSince(s)
	if !ok {
		return nil
	}
	total := soakPaused(s) + max(now.Sub(since), 0)
	c.event(s, v1.EventTypeNormal, "SoakResumed", "The alerts gate can be read again; the soak and its deadline go on, paused %s in all", total)
	return c.setSoakPause(ctx, s, map[string]*string{
		updatesv1alpha1.SoakPausedSinceAnnotation: nil,
		updatesv1alpha1.SoakPausedAnnotation:      ptr.To(strconv.FormatInt(int64(total/time.Second), 10)),
	})
}

// setSoakPause writes (a value) or removes (nil) the pause's annotations,
// guarded by the resourceVersion it was judged on.
func (c *Controller) setSoakPause(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, set map[string]*string) error {
	if c.opts.DryRun {
		klog.FromContext(ctx).Info("Dry run: would record the soak's pause", "node", s.Name)
		return nil
	}
	n := s.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range set {
		if v == nil {
			delete(n.Annotations, k)
		} else {
			n.Annotations[k] = *v
		}
	}
	if _, err := c.client.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"}); err != nil {
		return fmt.Errorf("recording the soak's pause on shadow %s: %w", s.Name, err)
	}
	return nil
}

// pausedSince is when the current pause of the soak began.
func pausedSince(s *updatesv1alpha1.BottlerocketShadow) (time.Time, bool) {
	v, ok := s.Annotations[updatesv1alpha1.SoakPausedSinceAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// soakPausedNow reports whether the node's soak is paused: its deadline
// does not run.
func soakPausedNow(s *updatesv1alpha1.BottlerocketShadow) bool {
	_, ok := pausedSince(s)
	return ok && s.Spec.State == updatesv1alpha1.StateMonitoringUpdate
}

// soakPaused is how long the soak's earlier pauses lasted.
func soakPaused(s *updatesv1alpha1.BottlerocketShadow) time.Duration {
	n, err := strconv.ParseInt(s.Annotations[updatesv1alpha1.SoakPausedAnnotation], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
