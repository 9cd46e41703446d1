package operator

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// maxBackoff caps the retry delay after failures before the reboot.
const maxBackoff = 24 * time.Hour

// next is the state the operator moves spec to once the agent reached the
// current one.
var next = map[updatesv1alpha1.ShadowState]updatesv1alpha1.ShadowState{
	updatesv1alpha1.StateStagedAndPerformedUpdate: updatesv1alpha1.StateRebootedIntoUpdate,
	updatesv1alpha1.StateRebootedIntoUpdate:       updatesv1alpha1.StateMonitoringUpdate,
	updatesv1alpha1.StateMonitoringUpdate:         updatesv1alpha1.StateIdle,
}

func inFlight(s updatesv1alpha1.ShadowState) bool {
	return s == updatesv1alpha1.StateStagedAndPerformedUpdate || s == updatesv1alpha1.StateRebootedIntoUpdate ||
		s == updatesv1alpha1.StateMonitoringUpdate
}

func (d Deadlines) of(s updatesv1alpha1.ShadowState) time.Duration {
	switch s {
	case updatesv1alpha1.StateStagedAndPerformedUpdate:
		return d.StagedAndPerformedUpdate
	case updatesv1alpha1.StateRebootedIntoUpdate:
		return d.RebootedIntoUpdate
	case updatesv1alpha1.StateMonitoringUpdate:
		return d.MonitoringUpdate
	}
	return 0
}

// counts reports whether a shadow counts toward the concurrency limits,
// docs/updater.md's table: spec not Idle, or the agent still reports an update
// state (ErrorReset included: a node aborting may still be tainted and
// drained) until it reports Idle or the ReturnToIdle deadline marks it
// failed; a node marked failed for this attempt counts only while its
// rollback is still to start, whose slot it holds.
func counts(s *updatesv1alpha1.BottlerocketShadow) bool {
	if shadow.MarkedFailed(s) {
		return rollbackPending(s)
	}
	return s.Spec.State != updatesv1alpha1.StateIdle || returning(s)
}

// returning reports whether the agent still reports an update state, or the
// failure it aborts, while spec is Idle.
func returning(s *updatesv1alpha1.BottlerocketShadow) bool {
	return inFlight(s.Status.CurrentState) || s.Status.CurrentState == updatesv1alpha1.StateErrorReset
}

// notOfferedRetry is how long after its agent found the version not offered
// a node is tried again: the agent's default updateCheckInterval, so its
// next refresh has happened.
const notOfferedRetry = 2 * time.Minute

// waitingForWave reports whether the agent's last attempt ended because the
// version is not offered to the node yet (Bottlerocket releases in waves).
func waitingForWave(s *updatesv1alpha1.BottlerocketShadow) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == updatesv1alpha1.ReasonVersionNotOffered
}

// waitBegan reports whether the agent's try that found the version not
// offered began the node's wait: the agent keeps the condition True across
// the tries, so its lastTransitionTime is when the wait began, and each try
// stamps stateTransitionFailureTimestamp.
func waitBegan(s *updatesv1alpha1.BottlerocketShadow) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	return c != nil && s.Status.StateTransitionFailureTimestamp != nil && !c.LastTransitionTime.Before(s.Status.StateTransitionFailureTimestamp)
}

// backoffUntil is when a node that failed before its reboot may retry:
// 2^crashCount minutes after the failure, at most 24 hours; a node whose
// version was not offered yet is tried again after its next refresh.
func backoffUntil(s *updatesv1alpha1.BottlerocketShadow) time.Time {
	if s.Status.StateTransitionFailureTimestamp != nil && waitingForWave(s) {
		return s.Status.StateTransitionFailureTimestamp.Add(notOfferedRetry)
	}
	if s.Status.CrashCount <= 0 || s.Status.StateTransitionFailureTimestamp == nil {
		return time.Time{}
	}
	d := maxBackoff
	if s.Status.CrashCount < 11 { // 2^11 minutes > 24h
		d = min(time.Duration(1<<s.Status.CrashCount)*time.Minute, maxBackoff)
	}
	return s.Status.StateTransitionFailureTimestamp.Add(d)
}

// healthy reports the health gate's signal: SystemExtensionsReady True with
// reason ExtensionsReady, which the node-health controller sets only after
// every gating extension renewed after the reboot, or NoRequiredExtensions
// for a node that lists none — and the Node's Ready condition True, which
// SystemExtensionsReady says nothing about.
func healthy(n *v1.Node) bool {
	if n == nil {
		return false
	}
	c := nodeutil.Condition(n, nodev1alpha1.SystemExtensionsReadyCondition)
	if c == nil || c.Status != v1.ConditionTrue ||
		(c.Reason != nodev1alpha1.ReasonExtensionsReady && c.Reason != nodev1alpha1.ReasonNoRequiredExtensions) {
		return false
	}
	r := nodeutil.Condition(n, v1.NodeReady)
	return r != nil && r.Status == v1.ConditionTrue
}
