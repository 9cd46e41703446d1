package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

// syncIdle keeps the offered version current, completes a successful update
// (MonitoringUpdate → Idle) and aborts an update the operator called off.
//
// An abort converges the host whenever spec is Idle, whatever the status
// says (docs/updater.md): the operator may call an update off while the agent
// still waits on a Bottlerocket command, so the status may never have left
// Idle although the lock is pinned (previousVersionLock is recorded first)
// or the update got activated (seen on the periodic refresh).
func (a *Agent) syncIdle(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) (time.Duration, error) {
	switch shadow.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateErrorReset:
		return a.abort(ctx, shadow, node)
	case updatesv1alpha1.StateMonitoringUpdate:
		return a.complete(ctx, shadow)
	}
	if shadow.Status.PreviousVersionLock != "" || shadow.Status.IgnoringWaves {
		return a.abort(ctx, shadow, node)
	}
	a.hold()
	now := a.opts.Clock.Now()
	if shadow.Status.CurrentState != "" && shadow.Status.CurrentVersion != "" && now.Before(a.nextCheck) {
		return a.nextCheck.Sub(now), nil
	}
	current, target, s, err := a.refresh(ctx)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("checking for updates: %w", err)
	}
	if v := s.ActivatedVersion(); v != "" {
		// Activated with spec Idle: nobody asked for it, and the next
		// unplanned reboot would boot it without a drain or a health gate.
		klog.FromContext(ctx).Info("An update is activated but the operator asks for Idle; deactivating it", "version", v)
		if _, err := a.c.API.DeactivateUpdate(ctx); err != nil {
			return a.opts.RetryInterval, fmt.Errorf("deactivating update %s: %w", v, err)
		}
		a.c.Events.Event(shadow, v1.EventTypeNormal, ReasonAborted, fmt.Sprintf("Update %s was activated on node %s while no update was asked for; deactivated", v, a.opts.NodeName))
	}
	if _, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateIdle
		st.CurrentVersion, st.TargetVersion = current, target
	}); err != nil {
		return a.opts.RetryInterval, err
	}
	a.nextCheck = now.Add(a.opts.UpdateCheckInterval)
	return a.opts.UpdateCheckInterval, nil
}

// complete ends a successful update: crashCount resets (only here), the
// update's bookkeeping is cleared. A MonitoringUpdate the operator failed
// (the shadow is marked failed, not resumed) is not a success.
func (a *Agent) complete(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	a.hold()
	success := !updatesv1alpha1.Halting(shadow.Annotations)
	current, target, err := a.runningVersion(ctx)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("after the update: %w", err)
	}
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateIdle
		st.CurrentVersion, st.TargetVersion = current, target
		// The marker belongs to this attempt: a stale rebootRequestedAt
		// would put the next attempt past its drain before it drained.
		st.RebootFromBootID, st.RebootRequestedAt, st.PreviousVersionLock, st.PinnedVersionLock = "", nil, "", ""
		meta.RemoveStatusCondition(&st.Conditions, updatesv1alpha1.ConditionDrainBlocked)
		if success {
			st.CrashCount = 0
			meta.RemoveStatusCondition(&st.Conditions, updatesv1alpha1.ConditionUpdateFailed)
		}
	})
	if err != nil {
		return a.opts.RetryInterval, err
	}
	if success {
		a.c.Events.Event(out, v1.EventTypeNormal, ReasonUpdated, fmt.Sprintf("Node %s runs Bottlerocket %s", a.opts.NodeName, current))
	}
	a.nextCheck = a.opts.Clock.Now().Add(a.opts.UpdateCheckInterval)
	return 0, nil
}

// abort rolls back an update that will not go on (docs/updater.md): deactivate the
// update when it was activated but not booted into, restore the version
// lock, renew the Lease, report Idle. Each step is idempotent, so a restart
// in the middle repeats it harmlessly.
func (a *Agent) abort(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if !rebooted(shadow, node) {
		s, err := a.c.API.UpdateStatus(ctx)
		if err != nil && !brapi.IsNotFound(err) {
			return a.opts.RetryInterval, fmt.Errorf("aborting the update: %w", err)
		}
		if v := s.ActivatedVersion(); v != "" {
			logger.Info("Aborting the update: deactivating it", "version", v)
			if _, err := a.c.API.DeactivateUpdate(ctx); err != nil {
				return a.opts.RetryInterval, fmt.Errorf("aborting the update: %w", err)
			}
		}
	}
	if lock := shadow.Status.PreviousVersionLock; lock != "" {
		if _, err := a.restoreVersionLock(ctx, shadow, lock); err != nil {
			return a.opts.RetryInterval, fmt.Errorf("aborting the update: %w", err)
		}
	}
	if err := a.restoreIgnoreWaves(ctx, shadow); err != nil {
		return a.opts.RetryInterval, fmt.Errorf("aborting the update: %w", err)
	}
	a.hold()
	current, target, err := a.runningVersion(ctx)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("aborting the update: %w", err)
	}
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateIdle
		st.CurrentVersion, st.TargetVersion = current, target
		// The marker belongs to this attempt: a stale rebootRequestedAt
		// would put the next attempt past its drain before it drained.
		st.RebootFromBootID, st.RebootRequestedAt, st.PreviousVersionLock, st.PinnedVersionLock = "", nil, "", ""
		st.IgnoringWaves = false
		meta.RemoveStatusCondition(&st.Conditions, updatesv1alpha1.ConditionDrainBlocked)
	})
	if err != nil {
		return a.opts.RetryInterval, err
	}
	logger.Info("Update aborted; the node is Idle", "running", current)
	// Calling off a try that found its version not offered yet (the
	// ErrorReset notOffered reported) ends a re-check of a wait the
	// VersionNotOffered Event announced: no Event of its own.
	if shadow.Status.CurrentState != updatesv1alpha1.StateErrorReset || !waitingForWave(shadow, shadow.Spec.Version) {
		a.c.Events.Event(out, v1.EventTypeNormal, ReasonAborted, fmt.Sprintf("Update to %s called off; node %s stays on %s", shadow.Spec.Version, a.opts.NodeName, current))
	}
	a.nextCheck = a.opts.Clock.Now().Add(a.opts.UpdateCheckInterval)
	return 0, nil
}

// restoreVersionLock puts back the lock the agent recorded before pinning,
// but only while the host's lock is still the agent's pin (isPin): a lock
// someone changed since is theirs, and a stale previousVersionLock must not
// overwrite it. It reports kept when it left a lock someone else set:
// previousVersionLock is then no longer the agent's to restore.
func (a *Agent) restoreVersionLock(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, previous string) (kept bool, err error) {
	current, err := a.c.API.VersionLock(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the version lock: %w", err)
	}
	pin := recordedPin(shadow)
	switch {
	case current == previous:
		return false, nil
	case isPin(current, shadow):
		if err := a.c.API.SetVersionLock(ctx, previous); err != nil {
			return false, fmt.Errorf("restoring the version lock %q: %w", previous, err)
		}
		return false, nil
	}
	klog.FromContext(ctx).Info("The version lock changed since the agent pinned it; leaving it alone",
		"versionLock", current, "pinned", pin, "previousVersionLock", previous)
	a.c.Events.Event(shadow, v1.EventTypeNormal, ReasonVersionLockChanged,
		fmt.Sprintf("The version lock of node %s is %q, not the %q the agent pinned: left as it is (the agent would have restored %q)",
			a.opts.NodeName, current, pin, previous))
	return true, nil
}

// restoreIgnoreWaves turns settings.updates.ignore-waves off again when the
// agent turned it on (status.ignoringWaves), only while it is still on:
// someone who turned it off since has nothing left to restore. The caller
// clears ignoringWaves in its status write.
func (a *Agent) restoreIgnoreWaves(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) error {
	if !shadow.Status.IgnoringWaves {
		return nil
	}
	on, err := a.c.API.IgnoreWaves(ctx)
	if err != nil {
		return fmt.Errorf("reading settings.updates.ignore-waves: %w", err)
	}
	if !on {
		return nil
	}
	if err := a.c.API.SetIgnoreWaves(ctx, false); err != nil {
		return fmt.Errorf("turning settings.updates.ignore-waves off again: %w", err)
	}
	return nil
}

// recordedPin is the lock the agent last pinned, as its status records it
// (pinnedVersionLock). A shadow written by an agent from before that field
// has only spec.version to go by, which is what that agent pinned.
func recordedPin(shadow *updatesv1alpha1.BottlerocketShadow) string {
	if pin := shadow.Status.PinnedVersionLock; pin != "" {
		return pin
	}
	return shadow.Spec.Version
}

// pinOf reports whether lock is a pin of version v ("latest" never is).
func pinOf(lock, v string) bool {
	return v != "" && lock != brapi.VersionLockLatest && brapi.SameVersion(lock, v)
}

// isPin reports whether the host's version lock is the agent's pin: the one
// its status records, or spec.version's. The record lives in the shadow, not
// in the process, so an agent restarted between two attempts knows it as
// well as the process that pinned; it is what tells the pin of an earlier
// attempt towards another version (spec.version moved since) from a
// version a user pinned in the gap. spec.version's pin counts too: a re-pin
// is recorded after the host took it (so that a kill in between never
// leaves the old pin unrecognised), and a user who pins exactly
// spec.version cannot be told from the agent anyway.
func isPin(lock string, shadow *updatesv1alpha1.BottlerocketShadow) bool {
	return pinOf(lock, recordedPin(shadow)) || pinOf(lock, shadow.Spec.Version)
}

// lockIsOurs reports whether the host's version lock, on a later attempt of
// StagedAndPerformedUpdate, is the agent's: the lock it recorded before
// pinning, or its pin (isPin). Anything else someone changed during the
// update, whatever version it names.
func lockIsOurs(lock string, shadow *updatesv1alpha1.BottlerocketShadow) bool {
	return lock == shadow.Status.PreviousVersionLock || isPin(lock, shadow)
}

// lockChanged fails an attempt whose version lock someone changed since the
// agent pinned it: the lock is left as it is and previousVersionLock is
// cleared in the same write, so that the abort restores nothing; the
// operator records the failure like any other before the reboot.
func (a *Agent) lockChanged(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, lock string) (time.Duration, error) {
	cause := fmt.Errorf("the version lock of node %s was changed to %q during the update to %s (the agent had pinned %s over %q): not pinning over it; the lock is left as it is",
		a.opts.NodeName, lock, shadow.Spec.Version, recordedPin(shadow), shadow.Status.PreviousVersionLock)
	return a.failWith(ctx, shadow, ReasonVersionLockChanged, cause, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.PreviousVersionLock, st.PinnedVersionLock = "", ""
	})
}

// stepError is a failed step: definite (the update fails now) or transient
// (tried again, at most TransientAttempts times).
type stepError struct {
	reason    string
	err       error
	transient bool
}

func (e *stepError) Error() string { return e.err.Error() }

func stepFailed(reason string, err error) *stepError {
	return &stepError{reason: reason, err: err, transient: isTransient(err)}
}

// isTransient: the API could not be reached or answered 5xx even after the
// client's own retries — it may be restarting. A command that ran and
// failed, a 4xx or a malformed answer will not change by trying again. (A
// 423 is neither: handle waits for the command in progress.)
func isTransient(err error) bool {
	if brapi.IsCommandFailed(err) || errors.Is(err, brapi.ErrMalformed) {
		return false
	}
	code := brapi.StatusCode(err)
	return code == 0 || code >= 500
}

// handle turns a step error into a retry or a failure report.
func (a *Agent) handle(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, serr *stepError) (time.Duration, error) {
	if brapi.IsLocked(serr.err) {
		// A command in progress is not a failure. Bottlerocket answers 423
		// to /updates/status and to every update action while its update
		// dispatcher's child holds the update lock (thar-be-updates), and
		// a prepare downloads an image for minutes: an agent restarted
		// meanwhile finds the command its earlier process started still
		// running. It looks again at its usual interval, counting neither
		// an attempt nor a crash, and reads the result once the command
		// ended. Staging has no timeout of its own: the operator's
		// StagedAndPerformedUpdate deadline bounds this wait as it bounds a
		// prepare the agent waits on itself, and the abort then waits for
		// the command the same way before it deactivates.
		klog.FromContext(ctx).Info("A Bottlerocket update command is in progress; waiting for it to finish",
			"step", serr.reason, "retryIn", a.opts.RetryInterval, "answer", serr.err.Error())
		return a.opts.RetryInterval, nil
	}
	if serr.transient {
		a.transient++
		if a.transient < a.opts.TransientAttempts {
			return a.opts.RetryInterval, fmt.Errorf("%s (attempt %d of %d): %w", serr.reason, a.transient, a.opts.TransientAttempts, serr.err)
		}
	}
	return a.fail(ctx, shadow, serr.reason, serr.err)
}

// fail reports a failure before the reboot: ErrorReset, crashCount+1, the
// failure time and an UpdateFailed condition saying what failed. The
// operator then asks for Idle and the agent aborts.
func (a *Agent) fail(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, reason string, cause error) (time.Duration, error) {
	return a.failWith(ctx, shadow, reason, cause, func(*updatesv1alpha1.BottlerocketShadowStatus) {})
}

// failWith is fail with more to change in the same status write.
func (a *Agent) failWith(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, reason string, cause error, also func(*updatesv1alpha1.BottlerocketShadowStatus)) (time.Duration, error) {
	klog.FromContext(ctx).Error(cause, "Update failed before the reboot", "reason", reason, "version", shadow.Spec.Version)
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		also(st)
		st.CurrentState = updatesv1alpha1.StateErrorReset
		st.CrashCount++
		now := a.now()
		st.StateTransitionFailureTimestamp = &now
		a.setCondition(st, updatesv1alpha1.ConditionUpdateFailed, metav1.ConditionTrue, reason, cause.Error())
	})
	if err != nil {
		return a.opts.RetryInterval, err
	}
	a.c.Events.Event(out, v1.EventTypeWarning, reason, fmt.Sprintf("Update to %s failed: %v", shadow.Spec.Version, cause))
	a.resetAttempt()
	return a.opts.UpdateCheckInterval, nil
}

// notOffered calls off an attempt whose version the node is not offered
// yet: Bottlerocket releases in waves, so this is waiting, not a failure. It
// reports ErrorReset like fail, so the operator returns spec to Idle and the
// abort restores the lock, but counts no crash; the operator tries the node
// again after its next refresh.
//
// The operator tries the node again after every refresh, for as long as the
// wave takes (days, at times): only the first try for a version sends an
// Event; the others re-check quietly, and the UpdateFailed condition
// (True/VersionNotOffered, its lastTransitionTime when the wait began) says
// that the node waits and for what.
func (a *Agent) notOffered(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, cause error) (time.Duration, error) {
	klog.FromContext(ctx).Info("The version is not offered to this node yet; waiting for its wave", "version", shadow.Spec.Version, "cause", cause.Error())
	rechecking := waitingForWave(shadow, shadow.Spec.Version)
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateErrorReset
		now := a.now()
		st.StateTransitionFailureTimestamp = &now
		a.setCondition(st, updatesv1alpha1.ConditionUpdateFailed, metav1.ConditionTrue, ReasonNotOffered, cause.Error())
	})
	if err != nil {
		return a.opts.RetryInterval, err
	}
	if !rechecking {
		a.c.Events.Event(out, v1.EventTypeNormal, ReasonNotOffered, fmt.Sprintf("Not updating to %s yet: %v", shadow.Spec.Version, cause))
	}
	a.resetAttempt()
	return a.opts.UpdateCheckInterval, nil
}

// notOfferedMessage begins the message of the VersionNotOffered condition,
// so that waitingForWave can tell which version the node waits for.
func notOfferedMessage(version string) string {
	return fmt.Sprintf("version %s is not offered to this node", version)
}

// waitingForWave reports whether the shadow's UpdateFailed condition says
// the node waits for its wave: for version, or for any version when
// version is empty.
func waitingForWave(shadow *updatesv1alpha1.BottlerocketShadow, version string) bool {
	c := meta.FindStatusCondition(shadow.Status.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonNotOffered {
		return false
	}
	return version == "" || strings.HasPrefix(c.Message, notOfferedMessage(version)+" ")
}

// syncStage stages and activates spec.version while the node keeps serving.
func (a *Agent) syncStage(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	switch shadow.Status.CurrentState {
	case updatesv1alpha1.StateIdle, "":
	case updatesv1alpha1.StateStagedAndPerformedUpdate:
		a.hold()
		return a.opts.UpdateCheckInterval, nil
	default:
		// ErrorReset: waiting for the operator to ask for Idle.
		return a.opts.UpdateCheckInterval, nil
	}
	a.hold()
	version := shadow.Spec.Version
	if version == "" {
		return a.fail(ctx, shadow, ReasonNoVersion, errors.New("spec.version is empty: the operator did not say which version to stage"))
	}
	logger := klog.FromContext(ctx).WithValues("version", version)

	os, err := a.c.API.OS(ctx)
	if err != nil {
		return a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("reading the running version: %w", err)))
	}
	if brapi.SameVersion(os.VersionID, version) {
		// The host booted the update already: an activation whose report
		// never landed, then a reboot for another reason. Nothing is left
		// to stage, and nothing must fail the attempt (a lock changed
		// meanwhile, an updater that chooses nothing now): an abort cannot
		// take a booted release back, and would leave the node on it
		// without a health gate. It goes on from here; the reboot step
		// finds the host on the update and reports it booted.
		logger.Info("The host already runs the update (it rebooted for another reason after the activation); reporting it staged", "running", os.VersionID)
		return a.finishStaging(ctx, logger, shadow)
	}
	if end := a.refuseDowngrade(ctx, logger, shadow, version, os.VersionID); end != nil {
		return end.after, end.err
	}
	shadow, end := a.pinVersion(ctx, shadow, version)
	if end != nil {
		return end.after, end.err
	}
	if shadow, end = a.ignoreWavesOn(ctx, shadow); end != nil {
		return end.after, end.err
	}
	activated, end := a.activateStaged(ctx, logger, shadow, version)
	if end != nil {
		return end.after, end.err
	}
	if !activated {
		if end := a.prepareAndActivate(ctx, logger, shadow, version); end != nil {
			return end.after, end.err
		}
	}
	return a.finishStaging(ctx, logger, shadow)
}

// refuseDowngrade fails an update to a version older than the running one
// before the lock is touched, unless it is the rollback of the running
// version: the operator downgrades only to roll back a version that failed
// its health gate, and says so with the rollback annotation naming it
// (docs/updater.md). Anything else older is a mistake, and updog would take
// it (a locked version is chosen whether newer or older).
func (a *Agent) refuseDowngrade(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, version, running string) *stageEnd {
	c, err := brapi.CompareVersions(version, running)
	if err != nil {
		return endStage(a.fail(ctx, shadow, ReasonDowngradeRefused, fmt.Errorf("cannot compare spec.version %q with the running version %q: %w", version, running, err)))
	}
	if c >= 0 {
		return nil
	}
	if rb := shadow.Annotations[updatesv1alpha1.RollbackAnnotation]; rb != "" && brapi.SameVersion(rb, running) {
		logger.Info("Rolling back: the running version failed its health gate", "running", running)
		return nil
	}
	return endStage(a.fail(ctx, shadow, ReasonDowngradeRefused, fmt.Errorf("spec.version %s is older than the running version %s and annotation %s does not name %s: only a rollback of the running version downgrades",
		version, running, updatesv1alpha1.RollbackAnnotation, running)))
}

// stageEnd is how a step of syncStage or syncReboot ends the sync early: with what the
// sync then returns.
type stageEnd struct {
	after time.Duration
	err   error
}

// endStage takes the two results of handle, fail and the like, so that a
// step ends the sync with exactly what they return.
func endStage(after time.Duration, err error) *stageEnd {
	return &stageEnd{after: after, err: err}
}

// recordLock reads the host's version lock before staging pins it; on the
// first attempt it records that lock and the pin in the shadow's status.
func (a *Agent) recordLock(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, version string) (string, *updatesv1alpha1.BottlerocketShadow, *stageEnd) {
	// Record the lock before changing it, so that a restart restores the
	// user's value and never our pin, and record the pin with it, so that a
	// restart knows which lock is ours.
	var lock string
	if shadow.Status.PreviousVersionLock == "" {
		var err error
		lock, err = a.c.API.VersionLock(ctx)
		if err != nil {
			return "", nil, endStage(a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("reading the version lock: %w", err))))
		}
		out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
			st.PreviousVersionLock, st.PinnedVersionLock = lock, version
		})
		if err != nil {
			return "", nil, endStage(a.opts.RetryInterval, err)
		}
		shadow = out
	} else {
		// A later attempt (a transient failure, a restart): the lock is
		// still the pin, or the lock recorded before it. Anything else
		// someone set since the update began, and it is theirs: the agent
		// does not pin over it, and its record is no longer its to
		// restore (docs/updater.md).
		var err error
		lock, err = a.c.API.VersionLock(ctx)
		if err != nil {
			return "", nil, endStage(a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("reading the version lock: %w", err))))
		}
		if !lockIsOurs(lock, shadow) {
			return "", nil, endStage(a.lockChanged(ctx, shadow, lock))
		}
	}
	return lock, shadow, nil
}

// pinVersion pins the host's version lock to version and records the pin.
func (a *Agent) pinVersion(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, version string) (*updatesv1alpha1.BottlerocketShadow, *stageEnd) {
	lock, shadow, end := a.recordLock(ctx, shadow, version)
	if end != nil {
		return nil, end
	}
	// A pin already committed is not committed again: each commit starts
	// another asynchronous apply, and the agent may be back only to see
	// whether the last one reached the updater.
	if !pinOf(lock, version) {
		if err := a.c.API.SetVersionLock(ctx, version); err != nil {
			return nil, endStage(a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("pinning the version lock to %s: %w", version, err))))
		}
	}
	if shadow.Status.PinnedVersionLock != version {
		// A later attempt towards another version (spec.version moved
		// while the earlier pin was on the host), or a shadow from an agent
		// before pinnedVersionLock. Recorded after the host took the pin:
		// until then the host holds the earlier pin, which the record
		// still names, and from then on spec.version's (isPin).
		out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) { st.PinnedVersionLock = version })
		if err != nil {
			return nil, endStage(a.opts.RetryInterval, err)
		}
		shadow = out
	}
	return shadow, nil
}

// ignoreWavesOn turns settings.updates.ignore-waves on when spec.ignoreWaves
// asks for it.
func (a *Agent) ignoreWavesOn(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (*updatesv1alpha1.BottlerocketShadow, *stageEnd) {
	if !shadow.Spec.IgnoreWaves {
		return shadow, nil
	}
	// The pin alone does not take a version before the node's wave
	// reaches it: settings.updates.ignore-waves does. Turned on only
	// when off, and recorded first, as the lock is, so that a restart
	// turns it off again; one that was on is the user's.
	on, err := a.c.API.IgnoreWaves(ctx)
	if err != nil {
		return nil, endStage(a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("reading settings.updates.ignore-waves: %w", err))))
	}
	if !on {
		if !shadow.Status.IgnoringWaves {
			out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) { st.IgnoringWaves = true })
			if err != nil {
				return nil, endStage(a.opts.RetryInterval, err)
			}
			shadow = out
		}
		if err := a.c.API.SetIgnoreWaves(ctx, true); err != nil {
			return nil, endStage(a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, fmt.Errorf("turning settings.updates.ignore-waves on: %w", err))))
		}
	}
	return shadow, nil
}

// activateStaged says whether version is activated on the host already,
// activating it first when a prepare of this version staged it.
func (a *Agent) activateStaged(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, version string) (bool, *stageEnd) {
	s, err := a.c.API.UpdateStatus(ctx)
	if err != nil && !brapi.IsNotFound(err) {
		return false, endStage(a.handle(ctx, shadow, stepFailed(ReasonPrepareFailed, err)))
	}
	activated := false
	switch {
	case brapi.SameVersion(s.ActivatedVersion(), version):
		logger.Info("Update already staged and activated")
		activated = true
	case brapi.SameVersion(s.StagedVersion(), version) && preparedIs(s, version):
		// Bottlerocket's status names the last refresh's choice as staged
		// whatever the prepare wrote: only a status whose last command is
		// the prepare that wrote this version is taken at its word.
		logger.Info("Update already staged; activating it")
		_, err := a.c.API.ActivateUpdate(ctx)
		switch {
		case err == nil:
			activated = true
		case brapi.IsCommandFailed(err):
			// updog update-apply refuses an inactive partition set that
			// no prepare made valid: a failed prepare since cleared it,
			// while the status still says Staged. Prepared again below,
			// once: activating again would fail the same way.
			logger.Info("Activating the staged update failed; preparing it again", "cause", err.Error())
		default:
			return false, endStage(a.handle(ctx, shadow, stepFailed(ReasonActivateFailed, err)))
		}
	}
	return activated, nil
}

// choosePinned refreshes the updater's list and sees that it chose version:
// a version not offered yet is waited for, a pin the updater does not have
// yet is refreshed again, up to PinRefreshes times.
func (a *Agent) choosePinned(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, version string) *stageEnd {
	s, err := a.c.API.RefreshUpdates(ctx)
	if err != nil {
		return endStage(a.handle(ctx, shadow, stepFailed(ReasonPrepareFailed, err)))
	}
	if chosen := s.ChosenVersion(); !brapi.SameVersion(chosen, version) {
		if chosen == "" {
			chosen = "none"
		}
		offered := slices.ContainsFunc(s.AvailableUpdates, func(v string) bool { return brapi.SameVersion(v, version) })
		if !offered && shadow.Spec.IgnoreWaves && a.pinRefreshes+1 < a.opts.PinRefreshes {
			// ignore-waves, committed like the lock, may not have
			// reached the updater yet either.
			a.pinRefreshes++
			logger.Info("The pinned version is not listed yet; ignore-waves may not be applied yet, refreshing again", "refresh", a.pinRefreshes, "retryIn", a.opts.RetryInterval)
			return endStage(a.opts.RetryInterval, nil)
		}
		if !offered {
			return endStage(a.notOffered(ctx, shadow, fmt.Errorf("%s (with the lock pinned to it the updater chose %s; offered: %s)",
				notOfferedMessage(version), chosen, strings.Join(s.AvailableUpdates, ", "))))
		}
		// Offered, yet chosen under another lock: Bottlerocket applies
		// a settings commit asynchronously (thar-be-settings --daemon),
		// so the updater may not have the pin yet.
		a.pinRefreshes++
		if a.pinRefreshes < a.opts.PinRefreshes {
			logger.Info("The updater does not choose the pinned version yet; refreshing again", "chosen", chosen, "refresh", a.pinRefreshes, "retryIn", a.opts.RetryInterval)
			return endStage(a.opts.RetryInterval, nil)
		}
		return endStage(a.fail(ctx, shadow, ReasonVersionLockNotApplied, fmt.Errorf("the updater still chose %s after %d refreshes %v apart with the version lock committed as %s: the setting has not reached it",
			chosen, a.pinRefreshes, a.opts.RetryInterval, version)))
	}
	a.pinRefreshes = 0
	return nil
}

// prepareAndActivate has the host download and stage version, then
// activates it unless the update was called off meanwhile.
func (a *Agent) prepareAndActivate(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, version string) *stageEnd {
	if end := a.choosePinned(ctx, logger, shadow, version); end != nil {
		return end
	}
	logger.Info("Preparing the update")
	s, err := a.c.API.PrepareUpdate(ctx)
	if err != nil {
		return endStage(a.handle(ctx, shadow, stepFailed(ReasonPrepareFailed, err)))
	}
	if !preparedIs(s, version) {
		return endStage(a.fail(ctx, shadow, ReasonStagedVersionMismatch, fmt.Errorf("the status says %q staged, but the prepare wrote %s, not %s: updog chose again under the settings it read then",
			s.StagedVersion(), describePrepared(s), version)))
	}
	if !brapi.SameVersion(s.StagedVersion(), version) {
		return endStage(a.fail(ctx, shadow, ReasonPrepareFailed, fmt.Errorf("prepare staged %q, not %s", s.StagedVersion(), version)))
	}
	// Prepare downloads an image and may outlast the operator's
	// deadline: activate only what is still asked for.
	if fresh, err := a.c.Shadows.GetShadow(ctx, shadow.Name); err != nil {
		return endStage(a.opts.RetryInterval, fmt.Errorf("reading shadow %s before activating: %w", shadow.Name, err))
	} else if fresh.Spec.State != updatesv1alpha1.StateStagedAndPerformedUpdate || fresh.Spec.Version != version {
		logger.Info("The update was called off while the host prepared it; not activating", "desired", fresh.Spec.State)
		return endStage(0, nil)
	}
	logger.Info("Activating the update")
	if _, err := a.c.API.ActivateUpdate(ctx); err != nil {
		return endStage(a.handle(ctx, shadow, stepFailed(ReasonActivateFailed, err)))
	}
	return nil
}

// finishStaging puts back what staging changed on the host and reports
// StagedAndPerformedUpdate.
func (a *Agent) finishStaging(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	// The lock from before the update goes back only while the host's lock
	// is still the agent's pin: a user may have changed it while the host
	// prepared, and that lock is theirs (docs/updater.md). The update was
	// chosen under the pin and is activated, so staging goes on.
	// Nothing recorded, nothing to restore: a host found on the update
	// already may have been updated by someone else, pin and all.
	kept := false
	if prev := shadow.Status.PreviousVersionLock; prev != "" {
		var err error
		if kept, err = a.restoreVersionLock(ctx, shadow, prev); err != nil {
			return a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, err))
		}
	}
	if err := a.restoreIgnoreWaves(ctx, shadow); err != nil {
		return a.handle(ctx, shadow, stepFailed(ReasonVersionLockFailed, err))
	}
	if _, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateStagedAndPerformedUpdate
		st.IgnoringWaves = false
		if kept {
			// Not the agent's to restore any more: an abort must not
			// put it back over the user's lock either.
			st.PreviousVersionLock, st.PinnedVersionLock = "", ""
		}
		meta.RemoveStatusCondition(&st.Conditions, updatesv1alpha1.ConditionDrainBlocked)
	}); err != nil {
		return a.opts.RetryInterval, err
	}
	logger.Info("Update staged and activated; the node keeps serving until it reboots")
	a.transient = 0
	return a.opts.UpdateCheckInterval, nil
}

// preparedIs reports whether the status's last command is the prepare that
// wrote version (brapi.UpdateStatus.PreparedVersion).
func preparedIs(s *brapi.UpdateStatus, version string) bool {
	v, ok := s.PreparedVersion()
	return ok && v != "" && brapi.SameVersion(v, version)
}

// describePrepared says what the last prepare wrote, for a failure message.
func describePrepared(s *brapi.UpdateStatus) string {
	v, ok := s.PreparedVersion()
	switch {
	case !ok:
		stderr := ""
		if r := s.MostRecentCommand; r != nil && r.Stderr != nil {
			stderr = *r.Stderr
		}
		return fmt.Sprintf("an unknown version (updog's stderr %q names none)", truncate(stderr, 200))
	case v == "":
		return "nothing (No update required)"
	}
	return v
}

// syncReboot releases the Lease, waits for the readiness taint and for the
// operator's drain, records the bootID and reboots; after the boot it
// verifies the version and
// renews the Lease.
func (a *Agent) syncReboot(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) (time.Duration, error) {
	switch shadow.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate:
	case updatesv1alpha1.StateRebootedIntoUpdate:
		a.hold()
		return a.opts.UpdateCheckInterval, nil
	default:
		// ErrorReset: the Lease stays released until the abort.
		return a.opts.UpdateCheckInterval, nil
	}
	if rebooted(shadow, node) {
		return a.afterReboot(ctx, shadow, node)
	}
	logger := klog.FromContext(ctx).WithValues("version", shadow.Spec.Version)
	if err := a.release(ctx, fmt.Sprintf("rebooting into Bottlerocket %s", shadow.Spec.Version)); err != nil {
		return a.opts.RetryInterval, err
	}
	if shadow.Status.RebootFromBootID != "" {
		// The reboot was asked for in this boot, maybe by a process that
		// was killed right after, or the request got no answer.
		return a.rebootAgain(ctx, shadow)
	}

	// Before draining, once per process (a reboot restarts it) that found
	// the host on its old version: a node that rebooted for another reason
	// mid-drain may have booted the activated update already. Then it
	// reports that instead of rebooting again; otherwise it drains (again).
	if !a.hostChecked {
		if end := a.checkHostBeforeDrain(ctx, logger, shadow, node); end != nil {
			return end.after, end.err
		}
	}
	if end := a.waitForTaint(ctx, logger, shadow, node); end != nil {
		return end.after, end.err
	}

	bootID := node.Status.NodeInfo.BootID
	if bootID == "" {
		return a.fail(ctx, shadow, ReasonNoBootID, fmt.Errorf("node %s reports no bootID: the reboot could not be told from a restart", a.opts.NodeName))
	}
	if a.drainPending(logger, shadow, bootID) {
		return a.opts.RetryInterval, nil
	}
	// The marker first: from here on the Node's bootID, not the API's
	// answer, tells whether the node rebooted.
	shadow, err := a.writeRebootMarker(ctx, shadow, bootID)
	if err != nil {
		return a.opts.RetryInterval, err
	}
	return a.postReboot(ctx, shadow)
}

// checkHostBeforeDrain asks the host which version it runs; one that runs
// the update already is reported as rebooted into it, and the sync ends.
func (a *Agent) checkHostBeforeDrain(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) *stageEnd {
	os, err := a.c.API.OS(ctx)
	if err != nil {
		return endStage(a.opts.RetryInterval, fmt.Errorf("before draining: %w", err))
	}
	if brapi.SameVersion(os.VersionID, shadow.Spec.Version) {
		// Checked again at the next sync should the report fail: a
		// host that runs the update is never drained or rebooted.
		logger.Info("The host already runs the update (it rebooted for another reason); not draining or rebooting again", "running", os.VersionID)
		return endStage(a.afterReboot(ctx, shadow, node))
	}
	a.hostChecked = true
	return nil
}

// waitForTaint ends the sync until the readiness taint the release asks for
// is on the node, and fails the update when it is not there in time.
func (a *Agent) waitForTaint(ctx context.Context, logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) *stageEnd {
	// No cordon: the node-health controller's taint, asked for by the
	// release, is the one mechanism that keeps new pods off the node.
	now := a.opts.Clock.Now()
	if nodeutil.HasTaint(node, a.opts.ReadinessTaintKey, "") {
		return nil
	}
	if a.taintWaitStart.IsZero() {
		a.taintWaitStart = now
		logger.Info("Lease released; waiting for the readiness taint", "taint", a.opts.ReadinessTaintKey, "timeout", a.opts.TaintTimeout)
	}
	if waited := now.Sub(a.taintWaitStart); waited >= a.opts.TaintTimeout {
		return endStage(a.fail(ctx, shadow, ReasonTaintNotApplied, fmt.Errorf("the readiness taint %s did not appear on node %s within %s of releasing the %s Lease: is the node-health controller running?",
			a.opts.ReadinessTaintKey, a.opts.NodeName, a.opts.TaintTimeout, updatesv1alpha1.UpdaterExtension)))
	}
	return endStage(min(a.opts.RetryInterval, a.opts.TaintTimeout-now.Sub(a.taintWaitStart)), nil)
}

// drainPending reports whether the agent still waits for the operator's
// drain of this boot, saying so in the log once.
func (a *Agent) drainPending(logger klog.Logger, shadow *updatesv1alpha1.BottlerocketShadow, bootID string) bool {
	// The operator drains the node (the agent holds no pod permissions)
	// and says so with the drained annotation, carrying the bootID it
	// drained in: a drain of an earlier boot or attempt is not this one's.
	// No timeout here: the operator's drain timeout and its
	// RebootedIntoUpdate deadline end the wait by calling the update off.
	if got := shadow.Annotations[updatesv1alpha1.DrainedAnnotation]; got != bootID {
		if !a.drainWaitLogged {
			a.drainWaitLogged = true
			logger.Info("Tainted; waiting for the operator to drain the node", "bootID", bootID, "drained", got)
		}
		return true
	}
	return false
}

// writeRebootMarker records rebootFromBootID and rebootRequestedAt. When the
// write's answer is lost, the shadow is read back: a write that committed
// must not leave the agent waiting for a reboot it never asked for.
func (a *Agent) writeRebootMarker(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, bootID string) (*updatesv1alpha1.BottlerocketShadow, error) {
	at := a.now()
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.RebootFromBootID, st.RebootRequestedAt = bootID, &at
	})
	if err == nil {
		return out, nil
	}
	fresh, gerr := a.c.Shadows.GetShadow(ctx, shadow.Name)
	if gerr != nil || fresh.Spec.State != shadow.Spec.State || fresh.Spec.Version != shadow.Spec.Version ||
		fresh.Status.RebootFromBootID != bootID || fresh.Status.RebootRequestedAt == nil || !fresh.Status.RebootRequestedAt.Equal(&at) {
		return nil, err
	}
	klog.FromContext(ctx).Info("The reboot marker's write committed although its answer was lost", "err", err)
	return fresh, nil
}

// postReboot asks the host to reboot. A refusal (an answer with an error
// status, e.g. Bottlerocket's shutdown inhibitor check) means the host is
// not going down: it is asked again after a back-off. No answer at all may
// mean the request reached the host: the Node's bootID tells, and after
// rebootGrace rebootAgain asks again if the update is still armed.
func (a *Agent) postReboot(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("version", shadow.Spec.Version)
	logger.Info("Rebooting", "bootID", shadow.Status.RebootFromBootID)
	a.c.Events.Event(shadow, v1.EventTypeNormal, ReasonRebooting, fmt.Sprintf("Node %s drained; rebooting into Bottlerocket %s", a.opts.NodeName, shadow.Spec.Version))
	err := a.c.API.Reboot(ctx)
	if err == nil {
		a.rebootRetryAt, a.rebootRefusals = time.Time{}, 0
		return a.opts.RetryInterval, nil
	}
	if brapi.StatusCode(err) != 0 {
		a.rebootRefusals++
		wait := a.opts.RetryInterval << min(a.rebootRefusals-1, 16)
		wait = min(wait, a.opts.RebootGrace)
		a.rebootRetryAt = a.opts.Clock.Now().Add(wait)
		logger.Error(err, "The host refused the reboot; asking again after a back-off", "refusals", a.rebootRefusals, "retryIn", wait)
		a.c.Events.Event(shadow, v1.EventTypeWarning, ReasonRebootRefused, fmt.Sprintf("Bottlerocket refused the reboot (%v); asking again in %s", err, wait))
		return wait, nil
	}
	// The request may have reached the host. Whether it rebooted is told
	// by the Node's bootID; a host that accepted a reboot goes down within
	// seconds, so after rebootGrace the agent asks again.
	logger.Error(err, "The reboot request got no answer; waiting for the Node's bootID to tell", "rebootGrace", a.opts.RebootGrace)
	a.c.Events.Event(shadow, v1.EventTypeWarning, ReasonRebootUncertain, fmt.Sprintf("Reboot request failed (%v); the agent waits for the node's bootID to change, and asks again after %s only if the update is still armed", err, a.opts.RebootGrace))
	return a.opts.RetryInterval, nil
}

// rebootAgain runs while the Node still shows the bootID the marker
// recorded. Never two boots into one update (docs/updater.md), but not never two
// requests: a host that accepted a reboot goes down within seconds, so after
// a refusal's back-off, or rebootGrace after the marker, the agent asks
// again — only while the update is still armed, i.e. activated for the next
// boot and not what the host runs. A host that already booted into it (the
// Node's bootID just not updated yet) runs spec.version, or shows no update
// status since its boot, and is never asked again.
func (a *Agent) rebootAgain(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("version", shadow.Spec.Version, "rebootFromBootID", shadow.Status.RebootFromBootID)
	now := a.opts.Clock.Now()
	due := a.rebootRetryAt
	if due.IsZero() {
		requested := shadow.Status.RebootRequestedAt
		if requested == nil { // written by an agent that did not record the time
			if a.markerSeen.IsZero() {
				a.markerSeen = now
			}
			requested = &metav1.Time{Time: a.markerSeen}
		}
		due = requested.Add(a.opts.RebootGrace)
	}
	if now.Before(due) {
		logger.V(2).Info("Reboot requested; waiting for the node to boot", "askAgainIn", due.Sub(now))
		return min(a.opts.RetryInterval, due.Sub(now)), nil
	}
	os, err := a.c.API.OS(ctx)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("before asking for the reboot again: %w", err)
	}
	if brapi.SameVersion(os.VersionID, shadow.Spec.Version) {
		logger.Info("The host runs the update already; waiting for the Node to show its new bootID")
		return a.opts.RetryInterval, nil
	}
	s, err := a.c.API.UpdateStatus(ctx)
	if brapi.IsNotFound(err) {
		logger.Info("No update status since the host's boot: it rebooted; waiting for the Node to show its new bootID")
		return a.opts.RetryInterval, nil
	}
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("before asking for the reboot again: %w", err)
	}
	if !brapi.SameVersion(s.ActivatedVersion(), shadow.Spec.Version) {
		logger.Info("The update is no longer activated; not asking for the reboot again", "activated", s.ActivatedVersion())
		return a.opts.RetryInterval, nil
	}
	logger.Info("Still on the recorded bootID with the update armed; asking for the reboot again", "requestedAt", shadow.Status.RebootRequestedAt)
	shadow, err = a.writeRebootMarker(ctx, shadow, shadow.Status.RebootFromBootID)
	if err != nil {
		return a.opts.RetryInterval, err
	}
	return a.postReboot(ctx, shadow)
}

// afterReboot runs once the Node shows a bootID other than rebootFromBootID.
func (a *Agent) afterReboot(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	os, err := a.c.API.OS(ctx)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("after the reboot: %w", err)
	}
	target := os.VersionID
	if s, err := a.c.API.RefreshUpdates(ctx); err == nil && s.ChosenVersion() != "" {
		target = s.ChosenVersion()
	} else if err != nil {
		logger.Error(err, "Refreshing the offered version after the reboot failed; reporting the running one")
	}
	// The Node shows the new bootID: renew, so the node-health controller
	// can ungate the node once every extension renewed after the boot.
	a.hold()
	wrong := !brapi.SameVersion(os.VersionID, shadow.Spec.Version)
	out, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateRebootedIntoUpdate
		st.CurrentVersion, st.TargetVersion = os.VersionID, target
		meta.RemoveStatusCondition(&st.Conditions, updatesv1alpha1.ConditionDrainBlocked)
		if wrong {
			now := a.now()
			st.StateTransitionFailureTimestamp = &now
			a.setCondition(st, updatesv1alpha1.ConditionUpdateFailed, metav1.ConditionTrue, ReasonWrongVersion,
				fmt.Sprintf("node booted %s (bootID %s) but runs Bottlerocket %s, not %s", node.Name, node.Status.NodeInfo.BootID, os.VersionID, shadow.Spec.Version))
		}
	})
	if err != nil {
		return a.opts.RetryInterval, err
	}
	if wrong {
		logger.Info("Rebooted, but into the wrong version", "running", os.VersionID, "wanted", shadow.Spec.Version)
		a.c.Events.Event(out, v1.EventTypeWarning, ReasonWrongVersion, fmt.Sprintf("Node %s rebooted but runs %s, not %s", a.opts.NodeName, os.VersionID, shadow.Spec.Version))
	} else {
		logger.Info("Rebooted into the update", "running", os.VersionID, "bootID", node.Status.NodeInfo.BootID)
		a.c.Events.Event(out, v1.EventTypeNormal, ReasonRebooted, fmt.Sprintf("Node %s rebooted into Bottlerocket %s", a.opts.NodeName, os.VersionID))
	}
	a.resetAttempt()
	return a.opts.UpdateCheckInterval, nil
}

// syncMonitoring reports MonitoringUpdate: the operator now watches the
// node's readiness and soaks.
func (a *Agent) syncMonitoring(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (time.Duration, error) {
	a.hold()
	if shadow.Status.CurrentState != updatesv1alpha1.StateRebootedIntoUpdate {
		return a.opts.UpdateCheckInterval, nil
	}
	if _, err := a.writeStatus(ctx, shadow, func(st *updatesv1alpha1.BottlerocketShadowStatus) {
		st.CurrentState = updatesv1alpha1.StateMonitoringUpdate
	}); err != nil {
		return a.opts.RetryInterval, err
	}
	return a.opts.UpdateCheckInterval, nil
}
