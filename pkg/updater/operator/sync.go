package operator

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// Failure reasons recorded in the failure-reason annotation's first word and
// in the halt metric.
const (
	ReasonDeadlineExceeded = "DeadlineExceeded"
	ReasonWrongVersion     = "WrongVersion"
	ReasonNodeDeleted      = "NodeDeleted"
	// ReasonRollbackFailed: the agent reported a failure before the reboot
	// of a rollback (ErrorReset), which halts like any failed rollback.
	ReasonRollbackFailed = "RollbackFailed"
)

// now is the operator's clock at the resolution the API stores times in, so
// deadlines computed before and after a write agree.
func (c *Controller) now() time.Time { return c.clock.Now().Truncate(time.Second) }

// syncShadow drives one node's update: it reacts to the agent's reports,
// enforces the current state's deadline and runs the health gate.
func (c *Controller) syncShadow(ctx context.Context, name string) error {
	s, err := c.shadowLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.forgetShadow(name)
		return nil
	}
	if err != nil {
		return err
	}
	node, err := c.nodeOf(s)
	if err != nil {
		return err
	}
	return c.syncShadowOf(ctx, name, s, node)
}

// syncShadowOf is syncShadow of the shadow s and its node as read from the
// cache (node nil when gone).
func (c *Controller) syncShadowOf(ctx context.Context, name string, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) error {
	logger := klog.FromContext(ctx).WithValues("node", name)
	spec := s.Spec.State
	now := c.now()
	if !drainStep(s) {
		c.forgetDrain(name)
	}

	if f := c.dueFailure(s, node, now); f != nil {
		// Serialized with the start pass, which records due failures
		// before it starts anything: no node starts between a failure
		// becoming due and its record halting the rollout.
		c.countMu.Lock()
		defer c.countMu.Unlock()
		return c.recordFailure(ctx, s, f)
	}

	if spec == updatesv1alpha1.StateIdle || spec == "" {
		if to := rollbackDue(s); to != "" && node != nil {
			if wait := rollbackWait(s, c.clock.Now()); wait > 0 {
				c.after(name, wait)
				return nil
			}
			return c.startRollback(ctx, s, to)
		}
		c.syncIdleSpec(s, now)
		return nil
	}
	if node == nil {
		// Scaled down before its reboot was requested (dueFailure fails
		// the others): not the release's doing. The shadow controller
		// deletes the shadow; no deadline.
		logger.V(2).Info("Node deleted before its reboot was requested; its slot is free", "state", spec)
		return nil
	}

	// The agent failed before the reboot: it aborts once spec is Idle and
	// retries after its back-off. No halt.
	if s.Status.CurrentState == updatesv1alpha1.StateErrorReset {
		return c.syncErrorReset(ctx, logger, s)
	}

	// Re-armed on every sync, so a failover picks deadlines up from the
	// stored transition time.
	// A paused soak's deadline does not run: the alerts gate's recheck
	// wakes the node instead.
	if !soakPausedNow(s) {
		c.after(name, c.deadline(s).Sub(now))
	}
	return c.syncInFlight(ctx, logger, s, node, now)
}

// syncInFlight does the operator's part of the state the update is in: the
// health gate, the drain, the wait for the reboot, or moving spec on.
func (c *Controller) syncInFlight(ctx context.Context, logger klog.Logger, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, now time.Time) error {
	if s.Spec.State == updatesv1alpha1.StateMonitoringUpdate {
		return c.healthGate(ctx, s, node, now)
	}
	if drainStep(s) {
		return c.syncDrain(ctx, s, node, now)
	}
	if awaitingReboot(s, node) {
		c.syncAwaitingReboot(ctx, s, node)
		return nil
	}
	c.forgetLastPass(s.Name)
	return c.advance(ctx, logger, s)
}

// forgetShadow drops what the operator keeps in memory about a node whose
// shadow is gone.
func (c *Controller) forgetShadow(name string) {
	c.mu.Lock()
	delete(c.soakSince, name)
	delete(c.told, name)
	delete(c.drains, name)
	delete(c.lastPassTold, name)
	delete(c.hooksTold, name)
	c.mu.Unlock()
}

// syncIdleSpec ends the soak of a node whose spec is back at Idle and, while
// its agent still completes or aborts, arms the ReturnToIdle deadline.
func (c *Controller) syncIdleSpec(s *updatesv1alpha1.BottlerocketShadow, now time.Time) {
	c.mu.Lock()
	delete(c.soakSince, s.Name)
	c.mu.Unlock()
	// The ReturnToIdle deadline (see dueFailure).
	if returning(s) && !shadow.MarkedFailed(s) && s.Spec.StateTransitionTimestamp != nil {
		c.after(s.Name, s.Spec.StateTransitionTimestamp.Add(c.opts.Deadlines.ReturnToIdle).Sub(now))
	}
}

// syncErrorReset returns a node whose agent reported a failure before the
// reboot to Idle: a version not offered yet is waited for, anything else
// is an abort.
func (c *Controller) syncErrorReset(ctx context.Context, logger klog.Logger, s *updatesv1alpha1.BottlerocketShadow) error {
	spec := s.Spec.State
	if waitingForWave(s) {
		// Not a failure: Bottlerocket releases in waves.
		logger.Info("Version not offered to the node yet; returning it to Idle until its next refresh", "version", s.Spec.Version)
		if err := c.writeSpec(ctx, s, updatesv1alpha1.StateIdle, s.Spec.Version, nil); err != nil {
			return err
		}
		// The node is tried again after every refresh for as long as
		// its wave takes: only the try that began the wait is news.
		if waitBegan(s) {
			c.event(s, v1.EventTypeNormal, "UpdateWaiting", "Version %s is not offered to this node yet (Bottlerocket releases in waves); trying again after each of its refreshes",
				s.Spec.Version)
		}
		return nil
	}
	msg := updateFailedMessage(s)
	logger.Info("Update failed before the reboot; returning the node to Idle", "state", spec, "crashCount", s.Status.CrashCount, "cause", msg)
	// spec.version stays: the agent restores the version lock only
	// while it still is the version it pinned.
	if err := c.writeSpec(ctx, s, updatesv1alpha1.StateIdle, s.Spec.Version, nil); err != nil {
		return err
	}
	c.event(s, v1.EventTypeWarning, "UpdateAborted", "Update to %s failed in %s (%s); the node retries after its back-off (crash count %d)",
		s.Spec.Version, spec, msg, s.Status.CrashCount)
	c.metrics.Aborts.Inc()
	return nil
}

// updateFailedMessage is what the agent's UpdateFailed condition says.
func updateFailedMessage(s *updatesv1alpha1.BottlerocketShadow) string {
	msg := "the agent reported a failure"
	for _, cond := range s.Status.Conditions {
		if cond.Type == updatesv1alpha1.ConditionUpdateFailed {
			msg = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
		}
	}
	return msg
}

// advance moves spec to the state after the one the agent reached.
func (c *Controller) advance(ctx context.Context, logger klog.Logger, s *updatesv1alpha1.BottlerocketShadow) error {
	spec := s.Spec.State
	if s.Status.CurrentState != spec {
		return nil // the agent is working on it
	}
	to := next[spec]
	logger.V(2).Info("Agent reached the desired state; moving on", "from", spec, "to", to)
	if err := c.writeSpec(ctx, s, to, s.Spec.Version, nil); err != nil {
		return err
	}
	c.event(s, v1.EventTypeNormal, "UpdateProgressing", "Update to %s: %s done, now %s", s.Spec.Version, spec, to)
	return nil
}

// nodeOf is the shadow's Node, or nil when it was deleted (or deleted and
// re-created under the same name).
func (c *Controller) nodeOf(s *updatesv1alpha1.BottlerocketShadow) (*v1.Node, error) {
	node, err := c.nodeLister.Get(s.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !shadow.Describes(s, node) {
		return nil, nil
	}
	return node, nil
}

// deadline is when the node's current spec state times out, measured from
// the stored transition time.
func (c *Controller) deadline(s *updatesv1alpha1.BottlerocketShadow) time.Time {
	since := c.now()
	if s.Spec.StateTransitionTimestamp != nil {
		since = s.Spec.StateTransitionTimestamp.Time
	}
	if s.Spec.State == updatesv1alpha1.StateIdle || s.Spec.State == "" {
		return since.Add(c.opts.Deadlines.ReturnToIdle)
	}
	if s.Spec.State == updatesv1alpha1.StateMonitoringUpdate {
		// The soak's pauses (an alert source unreachable) move the
		// deadline as far as the soak's end.
		since = since.Add(soakPaused(s))
	}
	return since.Add(c.opts.Deadlines.of(s.Spec.State))
}

// failure is an update failure that halts the rollout; state labels a missed
// deadline in the metrics ("" for other failures); healthGate: the node did
// not pass its health gate (the MonitoringUpdate deadline), the one failure
// a policy may roll back.
type failure struct {
	reason, message, state string
	healthGate             bool
}

// dueFailure says whether the node's update has failed in a way the
// operator records and that halts the rollout (nil when not):
//   - the Node was deleted past its drain (after the reboot was requested, or
//     in MonitoringUpdate): autoscalers and node repair delete exactly the
//     nodes a bad release breaks, and a bad release must not walk the fleet;
//   - the current state's deadline passed;
//   - the node rebooted into another version than spec.version;
//   - the ReturnToIdle deadline passed: spec is back at Idle but the agent
//     still reports an update state, completing or aborting. Such a node
//     counts toward the limits, and an agent that can do neither
//     (crash-looping, no update repository) would hold the slot forever and
//     silently freeze the rollout; marked failed, it frees the slot and
//     halts the rollout naming it (its crashCount is unchanged).
//
// A failure before the reboot (ErrorReset) is no halting failure.
func (c *Controller) dueFailure(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, now time.Time) *failure {
	spec := s.Spec.State
	if spec == updatesv1alpha1.StateIdle || spec == "" {
		if !returning(s) || shadow.MarkedFailed(s) || s.Spec.StateTransitionTimestamp == nil || now.Before(c.deadline(s)) {
			return nil
		}
		return &failure{ReasonDeadlineExceeded, fmt.Sprintf("%s: the node's agent still reports %s %s after spec returned to Idle (ReturnToIdle): it could neither complete nor abort",
			ReasonDeadlineExceeded, s.Status.CurrentState, c.opts.Deadlines.ReturnToIdle), StateReturnToIdle, false}
	}
	if node == nil {
		if !shadow.PastDrain(s) {
			return nil
		}
		return &failure{ReasonNodeDeleted, fmt.Sprintf("%s: node %s (UID %s) was deleted in %s, after its reboot was requested (agent reports %q)",
			ReasonNodeDeleted, s.Name, shadow.NodeUID(s), spec, s.Status.CurrentState), "", false}
	}
	if s.Status.CurrentState == updatesv1alpha1.StateErrorReset {
		if rollingBack(s) {
			// A failed rollback halts, whatever failed; no back-off and
			// no second try.
			return &failure{ReasonRollbackFailed, fmt.Sprintf("%s: the agent reported a failure of the rollback to %s in %s: %s",
				ReasonRollbackFailed, s.Spec.Version, spec, updateFailedMessage(s)), "", false}
		}
		return nil
	}
	if !now.Before(c.deadline(s)) && !soakPausedNow(s) && !c.soakEndedInTime(s, node) {
		return &failure{ReasonDeadlineExceeded, fmt.Sprintf("%s: the node was in %s for longer than %s (agent reports %q)",
			ReasonDeadlineExceeded, spec, c.opts.Deadlines.of(spec), s.Status.CurrentState), string(spec), spec == updatesv1alpha1.StateMonitoringUpdate}
	}
	if spec == updatesv1alpha1.StateRebootedIntoUpdate && s.Status.CurrentState == spec && !brapi.SameVersion(s.Status.CurrentVersion, s.Spec.Version) {
		return &failure{ReasonWrongVersion, fmt.Sprintf("%s: the node rebooted into %q, not %q",
			ReasonWrongVersion, s.Status.CurrentVersion, s.Spec.Version), "", false}
	}
	return nil
}

// soakEndedInTime says whether the node's soak ended before its
// MonitoringUpdate deadline and the node is fully ready now: a running
// operator passed it at the soak's end, and one that was down or failing over
// then (and still at the deadline) passes it now instead of failing it — and,
// with Rollback, rolling back an update that passed — for its own absence.
// The health gate then judges it as at the soak's end, on what it sees now.
func (c *Controller) soakEndedInTime(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	if s.Spec.State != updatesv1alpha1.StateMonitoringUpdate || s.Status.CurrentState != updatesv1alpha1.StateMonitoringUpdate || !healthy(node) {
		return false
	}
	start, soaking := c.soakStart(s)
	if !soaking {
		return false
	}
	end := start.Add(soakOfPolicy(c.policyOf(s, node)) + soakPaused(s))
	return end.Before(c.deadline(s))
}

// recordFailure marks the shadow failed. The caller holds countMu.
func (c *Controller) recordFailure(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, f *failure) error {
	if err := c.failWith(ctx, s, f.reason, f.message, c.rollbackAnnotations(ctx, s, f)); err != nil {
		return err
	}
	if f.state != "" {
		c.metrics.DeadlineExpiries.WithLabelValues(f.state).Inc()
	}
	return nil
}

// StateReturnToIdle labels the ReturnToIdle deadline in the metrics.
const StateReturnToIdle = "ReturnToIdle"

// healthGate passes the node after postRebootSoak of continuous readiness
// once its agent reports MonitoringUpdate; any lapse starts the soak over.
// The soak's start is kept in the shadow (healthy-since), as the deadline's
// is, so a restart or failover late in MonitoringUpdate continues the soak
// instead of starting it over past the deadline.
func (c *Controller) healthGate(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, now time.Time) error {
	start, soaking := c.soakStart(s)
	if !healthy(node) {
		return c.soakLapsed(ctx, s, soaking, now)
	}
	if !soaking {
		start = now
		if !c.opts.DryRun {
			// The write's event brings the shadow back here. Nothing is
			// remembered before the write succeeded: a failed write must
			// be made again, or the soak would live in memory only.
			return c.setHealthySince(ctx, s, now.UTC().Format(time.RFC3339))
		}
		c.mu.Lock()
		c.soakSince[s.Name] = now
		c.mu.Unlock()
	}
	if s.Status.CurrentState != updatesv1alpha1.StateMonitoringUpdate {
		return nil
	}
	pol := c.policyOf(s, node)
	soak := soakOfPolicy(pol)
	end := start.Add(soak + soakPaused(s))
	if held, err := c.soakAlerts(ctx, s, pol, now, end); held || err != nil {
		return err
	}
	// The update passes only once its afterReboot hook succeeded.
	if done, err := c.runHook(ctx, s, node, pol, updatesv1alpha1.HookAfterReboot); !done || err != nil {
		return err
	}
	if left := end.Sub(now); left > 0 {
		c.after(s.Name, left)
		return nil
	}
	if err := c.succeed(ctx, s, now); err != nil {
		return err
	}
	c.passedHealthGate(klog.FromContext(ctx), s, soak, now)
	return nil
}

// soakLapsed handles a node that is not fully ready in its health gate: a
// soak under way starts over, and a paused soak has nothing left to pause.
func (c *Controller) soakLapsed(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, soaking bool, now time.Time) error {
	c.mu.Lock()
	delete(c.soakSince, s.Name)
	c.mu.Unlock()
	if soakPausedNow(s) {
		// No soak to pause: the deadline runs again (the write brings the
		// shadow back to end the soak too).
		return c.resumeSoak(ctx, s, now)
	}
	if !soaking {
		return nil
	}
	klog.FromContext(ctx).Info("Node lost full readiness during its soak; the soak starts over", "node", s.Name)
	return c.setHealthySince(ctx, s, "")
}

// passedHealthGate forgets the soak of a node whose update (or rollback)
// succeeded, and tells it: an event, the update's duration, a log line.
func (c *Controller) passedHealthGate(logger klog.Logger, s *updatesv1alpha1.BottlerocketShadow, soak time.Duration, now time.Time) {
	c.mu.Lock()
	delete(c.soakSince, s.Name)
	c.lastHealthyEnd = c.clock.Now()
	c.mu.Unlock()
	if rollingBack(s) {
		c.event(s, v1.EventTypeNormal, "RollbackSucceeded", "Node runs %s again and stayed fully ready for %s; the failure of %s still halts the rollout",
			s.Status.CurrentVersion, soak, s.Annotations[updatesv1alpha1.FromVersionAnnotation])
		logger.Info("Rollback passed its health gate", "node", s.Name, "version", s.Status.CurrentVersion)
		return
	}
	c.event(s, v1.EventTypeNormal, "UpdateSucceeded", "Node runs %s and stayed fully ready for %s", s.Status.CurrentVersion, soak)
	if t := s.Annotations[startedAnnotation]; t != "" {
		if started, err := time.Parse(time.RFC3339, t); err == nil {
			c.metrics.UpdateDuration.Observe(now.Sub(started).Seconds())
		}
	}
	logger.Info("Update passed its health gate", "node", s.Name, "version", s.Status.CurrentVersion)
}

// succeed ends an update that passed its health gate. The policy that
// started it records the success first, in its status (delayBetweenNodes
// is measured from it, by this leader and the next): a success whose
// shadow write then fails is recorded too early rather than not at all,
// which only delays the next start. Serialized with the start pass, so no
// start decided before the success follows it.
func (c *Controller) succeed(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, now time.Time) error {
	c.countMu.Lock()
	defer c.countMu.Unlock()
	// A rollback is no update that passed: delayBetweenNodes does not
	// count from it (the policy is halted anyway).
	if rollingBack(s) {
		return c.writeSpec(ctx, s, updatesv1alpha1.StateIdle, "", nil)
	}
	if err := c.recordSuccess(ctx, s.Annotations[updatesv1alpha1.PolicyAnnotation], now); err != nil {
		return err
	}
	return c.writeSpecWith(ctx, c.startClient, s, updatesv1alpha1.StateIdle, "", nil)
}

// recordSuccess sets the policy's status.lastUpdateSucceeded to now, before
// the success frees the node's slot: a start pass that sees the slot free
// also sees the record a delayBetweenNodes counts from. A merge patch of
// that one field needs no read of the policy and cannot conflict with the
// start pass's status writes, which carry the field over. Successes are
// serialized (countMu) and only the leader records them, so the record
// only moves forward.
func (c *Controller) recordSuccess(ctx context.Context, name string, now time.Time) error {
	if name == "" || c.opts.DryRun {
		return nil
	}
	cached, err := c.policyLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // a policy the cache does not know started nothing since
	}
	if err == nil {
		if t := cached.Status.LastUpdateSucceeded; t != nil && !t.Time.Before(now) {
			return nil
		}
	}
	// Recorded whether or not the policy sets delayBetweenNodes now: a delay
	// set later counts from the last success, which only a record made
	// every time can tell (one status write per update).
	patch := fmt.Sprintf(`{"status":{"lastUpdateSucceeded":%q}}`, now.UTC().Format(time.RFC3339))
	_, err = c.startClient.UpdatesV1alpha1().UpdatePolicies().Patch(ctx, name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "update-operator"}, "status")
	if apierrors.IsNotFound(err) {
		return nil // no policy left to pace
	}
	if err != nil {
		return fmt.Errorf("recording a success in the status of UpdatePolicy %s: %w", name, err)
	}
	return nil
}

// soakOfPolicy is the postRebootSoak of the policy the node's update
// belongs to (policyOf), else DefaultPostRebootSoak.
func soakOfPolicy(p *policy) time.Duration {
	if p != nil {
		return p.soak
	}
	return DefaultPostRebootSoak
}

// policyOf is the policy the node's update belongs to: the one that started
// it while it exists, else the one that alone governs the node now; nil
// when none.
func (c *Controller) policyOf(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) *policy {
	if name := s.Annotations[updatesv1alpha1.PolicyAnnotation]; name != "" {
		if p, err := c.policyLister.Get(name); err == nil {
			return parsePolicy(p, c.opts.Deadlines)
		}
	}
	if node != nil {
		if list, err := c.policyLister.List(labels.Everything()); err == nil {
			var found *policy
			for _, p := range list {
				if pol := parsePolicy(p, c.opts.Deadlines); pol.selector.Matches(labels.Set(node.Labels)) {
					if found != nil {
						found = nil
						break
					}
					found = pol
				}
			}
			return found
		}
	}
	return nil
}

// soakStart is when the node's soak started: the healthy-since annotation,
// or in a dry run (which writes nothing) what this process saw.
func (c *Controller) soakStart(s *updatesv1alpha1.BottlerocketShadow) (time.Time, bool) {
	if v, ok := s.Annotations[updatesv1alpha1.HealthySinceAnnotation]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.soakSince[s.Name]
	return t, ok
}

// setHealthySince writes (value non-empty) or removes the healthy-since
// annotation, guarded by the resourceVersion it was judged on.
func (c *Controller) setHealthySince(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, value string) error {
	if _, ok := s.Annotations[updatesv1alpha1.HealthySinceAnnotation]; !ok && value == "" {
		return nil
	}
	if c.opts.DryRun {
		klog.FromContext(ctx).Info("Dry run: would record the soak's start", "node", s.Name, "healthySince", value)
		return nil
	}
	n := s.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	if value == "" {
		delete(n.Annotations, updatesv1alpha1.HealthySinceAnnotation)
	} else {
		n.Annotations[updatesv1alpha1.HealthySinceAnnotation] = value
	}
	if _, err := c.client.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"}); err != nil {
		return fmt.Errorf("recording the soak's start on shadow %s: %w", s.Name, err)
	}
	return nil
}

// fail records a failure after the reboot: the failed annotations halt the
// rollout, spec returns to Idle (keeping spec.version, as an abort does) and
// the slot is freed, in one write.
func (c *Controller) fail(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, reason, msg string) error {
	return c.failWith(ctx, s, reason, msg, nil)
}

// failWith is fail with more annotations in the same write (the rollback's).
func (c *Controller) failWith(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, reason, msg string, also map[string]string) error {
	klog.FromContext(ctx).Info("Update failed; halting the rollout", "node", s.Name, "reason", reason, "message", msg, "rollback", also[updatesv1alpha1.RollbackAnnotation])
	annotations := map[string]string{
		updatesv1alpha1.FailedAnnotation:        c.now().UTC().Format(time.RFC3339),
		updatesv1alpha1.FailureReasonAnnotation: msg,
	}
	for k, v := range also {
		annotations[k] = v
	}
	if err := c.writeSpec(ctx, s, updatesv1alpha1.StateIdle, s.Spec.Version, annotations); err != nil {
		return err
	}
	if rollingBack(s) {
		c.event(s, v1.EventTypeWarning, "RollbackFailed", "The rollback from %s to %s failed; no further action is taken: the node stays as it is",
			s.Annotations[updatesv1alpha1.FromVersionAnnotation], s.Spec.Version)
	}
	next := ""
	if v := also[updatesv1alpha1.RollbackAnnotation]; v != "" {
		next = fmt.Sprintf("; the node is rolled back to %s once its agent reports Idle", s.Annotations[updatesv1alpha1.FromVersionAnnotation])
	}
	c.event(s, v1.EventTypeWarning, "UpdateFailed", "%s; the rollout is halted until `kubectl nodehealth update resume %s`%s", msg, s.Name, next)
	return nil
}

// startedAnnotation remembers when the node's current update started, for
// the duration histogram across operator restarts. It is informational.
const startedAnnotation = "updates.nodehealth.io/started"

// writeSpec moves a shadow's spec with an update guarded by the
// resourceVersion the decision was made on: if the agent or a user changed
// the shadow meanwhile, the write fails and the shadow is judged again.
func (c *Controller) writeSpec(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, state updatesv1alpha1.ShadowState,
	version string, annotations map[string]string) error {
	return c.writeSpecWith(ctx, c.client, s, state, version, annotations)
}

// writeSpecWith is writeSpec through client: the start and the success,
// which hand a slot from one node to the next, go through startClient.
func (c *Controller) writeSpecWith(ctx context.Context, client versioned.Interface, s *updatesv1alpha1.BottlerocketShadow,
	state updatesv1alpha1.ShadowState, version string, annotations map[string]string) error {
	n := s.DeepCopy()
	n.Spec = updatesv1alpha1.BottlerocketShadowSpec{State: state, Version: version, StateTransitionTimestamp: &metav1.Time{Time: c.now()}}
	if state != updatesv1alpha1.StateIdle {
		// Set at the start, with the version: the agent needs it until the
		// update ends; its own status tells it what to restore after.
		n.Spec.IgnoreWaves = s.Spec.IgnoreWaves
	}
	// A soak belongs to one MonitoringUpdate and a drain to one
	// RebootedIntoUpdate: every transition ends them. A drained annotation
	// left from an attempt called off before its reboot would let the next
	// attempt in the same boot reboot undrained.
	delete(n.Annotations, updatesv1alpha1.HealthySinceAnnotation)
	delete(n.Annotations, updatesv1alpha1.SoakPausedSinceAnnotation)
	delete(n.Annotations, updatesv1alpha1.SoakPausedAnnotation)
	delete(n.Annotations, updatesv1alpha1.DrainedAnnotation)
	if len(annotations) > 0 && n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		n.Annotations[k] = v
	}
	if c.opts.DryRun {
		c.metrics.DryRunActions.WithLabelValues(string(state)).Inc()
		klog.FromContext(ctx).Info("Dry run: would set the shadow's state", "node", s.Name, "from", s.Spec.State, "to", state, "version", version, "annotations", annotations)
		return nil
	}
	_, err := client.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"})
	if err != nil {
		return fmt.Errorf("setting shadow %s to %s: %w", s.Name, state, err)
	}
	c.metrics.Transitions.WithLabelValues(string(state)).Inc()
	return nil
}
