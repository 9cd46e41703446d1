package v1alpha1

// Names the update operator, the update agent, the kubectl plugin and users
// share (docs/system-extensions.md and docs/updater.md). Changing one is a breaking change of the contract.
const (
	// FailedAnnotation, written by the operator, holds the RFC 3339 time an
	// update of this node failed after its reboot. The rollout is halted while
	// any shadow carries a failed value its ResumeAnnotation does not repeat.
	FailedAnnotation = "updates.nodehealth.io/failed"
	// FailureReasonAnnotation, written by the operator with FailedAnnotation,
	// says what failed.
	FailureReasonAnnotation = "updates.nodehealth.io/failure-reason"
	// ResumeAnnotation, written by a user or `kubectl nodehealth update
	// resume`, repeats the FailedAnnotation value it resumes: that failure no
	// longer halts the rollout. No clocks are compared, so a resume written
	// from a machine whose clock is off still resumes exactly that failure,
	// and a later failure (another value) halts again.
	ResumeAnnotation = "updates.nodehealth.io/resume"
	// NodeUIDAnnotation, written by the operator when it creates the shadow,
	// is the UID of the Node the shadow describes. A Node re-created with the
	// same name has another UID.
	NodeUIDAnnotation = "updates.nodehealth.io/node-uid"
	// HealthySinceAnnotation, written by the operator during MonitoringUpdate,
	// is the RFC 3339 time the node was last seen become fully ready: the
	// start of its post-reboot soak, kept across operator restarts and
	// failovers. It is removed when readiness lapses and when the node
	// leaves MonitoringUpdate.
	HealthySinceAnnotation = "updates.nodehealth.io/healthy-since"
	// SoakPausedSinceAnnotation, written by the operator during
	// MonitoringUpdate, is the RFC 3339 time an alert source of the node's
	// policy (spec.gates.alerts) became unreachable during the soak: while
	// it is set, neither the soak nor the MonitoringUpdate deadline runs.
	SoakPausedSinceAnnotation = "updates.nodehealth.io/soak-paused-since"
	// SoakPausedAnnotation is how long, in whole seconds, the soak was
	// paused in earlier pauses of this MonitoringUpdate: the soak and the
	// deadline both end that much later. Both are removed when the node
	// leaves MonitoringUpdate.
	SoakPausedAnnotation = "updates.nodehealth.io/soak-paused"
	// DrainedAnnotation, written by the operator in RebootedIntoUpdate, is
	// the Node's bootID when the operator finished draining it (the last
	// pass before the reboot included). The agent reboots only once it
	// carries the bootID it runs in: the drain of an earlier boot or of an
	// earlier attempt never lets a node reboot undrained. The operator
	// removes it with every change of spec.
	DrainedAnnotation = "updates.nodehealth.io/drained"
	// FromVersionAnnotation, written by the operator when it starts the
	// node's update, is the version the node ran then (status.currentVersion):
	// the version a rollback returns to, kept in the shadow so that a
	// restarted or new leader knows it.
	FromVersionAnnotation = "updates.nodehealth.io/from-version"
	// RollbackAnnotation, written by the operator when a node whose policy
	// sets onHealthGateFailure: Rollback fails its health gate, names the
	// version that failed. The operator then updates the node back to its
	// FromVersionAnnotation once (spec.version older than the running
	// version: the one downgrade there is), the agent locks an older
	// version only while this annotation names the version the node runs,
	// and no update to the named version starts on the node again until a
	// person removes the annotation (a resume does not).
	RollbackAnnotation = "updates.nodehealth.io/rollback"

	// UpdaterExtension is the system extension the update agent registers
	// itself as; its Lease is "bottlerocket-updater.<node>".
	UpdaterExtension = "bottlerocket-updater"

	// ManagedNodeLabel and ManagedNodeLabelValue select the nodes the updater
	// manages by default: the label existing Bottlerocket update operator
	// users already set.
	ManagedNodeLabel      = "bottlerocket.aws/updater-interface-version"
	ManagedNodeLabelValue = "2.0.0"
)

// Halting reports whether a shadow's annotations record a failure that
// halts the rollout: a FailedAnnotation value its ResumeAnnotation does not
// repeat (an empty value records nothing). The operator and the kubectl
// plugin call it; the admission policy that refuses a person's deletion of
// a halting shadow writes the same rule in CEL.
func Halting(annotations map[string]string) bool {
	failed := annotations[FailedAnnotation]
	return failed != "" && annotations[ResumeAnnotation] != failed
}

// Condition types of BottlerocketShadowStatus.Conditions.
const (
	// ConditionDrainBlocked was written by agents that drained their own
	// node. The operator drains now and names what blocks a drain in
	// DrainBlocked Events and, past its timeout, in the failure-reason
	// annotation; agents only remove a condition an older agent left.
	ConditionDrainBlocked = "DrainBlocked"
	// ConditionUpdateFailed is True after the agent saw the update fail; its
	// reason and message say which step failed.
	ConditionUpdateFailed = "UpdateFailed"
)

// ReasonVersionNotOffered is the UpdateFailed reason of an update whose
// version the node's Bottlerocket is not offered yet (Bottlerocket releases
// in waves). It is not a failure: the agent reports ErrorReset without
// counting a crash, and the operator tries the node again after its next
// refresh.
const ReasonVersionNotOffered = "VersionNotOffered"
