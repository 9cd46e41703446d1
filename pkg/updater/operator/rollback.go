package operator

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// The rollback of a node that failed its health gate, for a policy with
// onHealthGateFailure: Rollback (docs/updater.md). It is the one downgrade
// the operator asks for, and it is told apart by that alone: a rollback's
// spec.version is older than the version its update leaves (the
// from-version annotation, which every start records). Everything it needs
// lives in the shadow, so a restarted or new leader carries it on.

// rollingBack reports whether the shadow's update is a rollback.
func rollingBack(s *updatesv1alpha1.BottlerocketShadow) bool {
	return olderVersion(s.Spec.Version, s.Annotations[updatesv1alpha1.FromVersionAnnotation])
}

// olderVersion reports whether a is older than b; false when either is
// empty or unparsable, so that nothing unclear is rolled back.
func olderVersion(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	c, err := brapi.CompareVersions(a, b)
	return err == nil && c < 0
}

// rollbackAnnotations are what a failure adds to the shadow to have the
// node rolled back: the rollback annotation, naming the version that
// failed. Only the health gate's failure (the MonitoringUpdate deadline)
// rolls back, and only when the policy that started the update asks for it,
// the update recorded an older version it left, and it is no rollback
// itself: a failed rollback halts with no further action.
func (c *Controller) rollbackAnnotations(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, f *failure) map[string]string {
	if !f.healthGate || rollingBack(s) {
		return nil
	}
	if p := c.policyOf(s, nil); p == nil || !p.rollback {
		return nil
	}
	from := s.Annotations[updatesv1alpha1.FromVersionAnnotation]
	if !olderVersion(from, s.Spec.Version) {
		klog.FromContext(ctx).Info("Not rolling the node back: its update recorded no older version it left", "node", s.Name,
			"version", s.Spec.Version, "fromVersion", from)
		return nil
	}
	return map[string]string{updatesv1alpha1.RollbackAnnotation: s.Spec.Version}
}

// rollbackPending reports whether the node's failed update still holds its
// slot for the rollback that follows it: the health gate's failure named
// the version that failed, spec is back at Idle keeping it, the attempt is
// still the failed one, and the agent either still completes or aborts
// that update (the rollback waits for its Idle) or reports Idle on the
// failed version (the rollback is due, or waits for the failure's second
// to pass). The rollback takes this slot when it starts, so nothing else
// may take it in between, after a resume either. Anything else means no
// rollback will start (no older version recorded, another failure, the
// host back on another version on its own, the annotation removed), and
// the slot is free. Written from the shadow only: a new leader counts it
// the same.
func rollbackPending(s *updatesv1alpha1.BottlerocketShadow) bool {
	failed := s.Annotations[updatesv1alpha1.RollbackAnnotation]
	if failed == "" || s.Spec.State != updatesv1alpha1.StateIdle || !shadow.MarkedFailed(s) || !brapi.SameVersion(s.Spec.Version, failed) {
		return false
	}
	if !olderVersion(s.Annotations[updatesv1alpha1.FromVersionAnnotation], failed) {
		return false
	}
	return returning(s) || (s.Status.CurrentState == updatesv1alpha1.StateIdle && brapi.SameVersion(s.Status.CurrentVersion, failed))
}

// rollbackDue is the version to roll the node back to now, "" when none:
// the health gate's failure named the version that failed, the operator
// returned spec to Idle (keeping spec.version, the failed version) and the
// agent reports Idle on it. Once the rollback starts, spec.version is the
// older version and the transition time is past the failure: at most one
// rollback per failure, and none after the rollback itself failed.
func rollbackDue(s *updatesv1alpha1.BottlerocketShadow) string {
	if !rollbackPending(s) || s.Status.CurrentState != updatesv1alpha1.StateIdle {
		return ""
	}
	return s.Annotations[updatesv1alpha1.FromVersionAnnotation]
}

// rollbackWait is how long a due rollback waits so that its transition time
// (whole seconds, as the API stores it) is after the failure's: written in
// the failure's second, the attempt would still be marked failed
// (shadow.MarkedFailed) and the rollback would count neither toward the
// limits nor as in flight.
func rollbackWait(s *updatesv1alpha1.BottlerocketShadow, now time.Time) time.Duration {
	failed, err := time.Parse(time.RFC3339, s.Annotations[updatesv1alpha1.FailedAnnotation])
	if err != nil {
		return 0
	}
	return failed.Add(time.Second).Sub(now)
}

// startRollback moves the node into the usual states towards the version it
// ran before. It takes the slot its failed update had, which the failed
// update held until now (rollbackPending): a resume written before the
// agent reported Idle let no other node take it. The failure record stays,
// so the policy stays halted unless it was resumed. Serialized with the
// start pass, as a start is.
func (c *Controller) startRollback(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, to string) error {
	c.countMu.Lock()
	defer c.countMu.Unlock()
	failed := s.Spec.Version
	klog.FromContext(ctx).Info("Rolling the node back after its failed health gate", "node", s.Name, "from", failed, "to", to)
	if err := c.writeSpec(ctx, s, updatesv1alpha1.StateStagedAndPerformedUpdate, to, map[string]string{
		startedAnnotation: c.now().UTC().Format(time.RFC3339),
		// The version the rollback leaves: what tells it from an update.
		updatesv1alpha1.FromVersionAnnotation: failed,
	}); err != nil {
		return err
	}
	c.event(s, v1.EventTypeWarning, "RollbackStarted", "The update to %s failed its health gate; rolling the node back to %s (onHealthGateFailure: Rollback). The rollout stays halted; %s is not started on this node again while annotation %s names it",
		failed, to, failed, updatesv1alpha1.RollbackAnnotation)
	return nil
}
