package v1alpha1

// Names the update operator, the update agent, the kubectl plugin and users
// share (DESIGN §3 and §7). Changing one is a breaking change of the contract.
const (
	// FailedAnnotation, written by the operator, holds the RFC 3339 time an
	// update of this node failed after its reboot. The rollout is halted while
	// any shadow's failed time is newer than its ResumeAnnotation.
	FailedAnnotation = "updates.nodehealth.io/failed"
	// FailureReasonAnnotation, written by the operator with FailedAnnotation,
	// says what failed.
	FailureReasonAnnotation = "updates.nodehealth.io/failure-reason"
	// ResumeAnnotation, written by a user or `kubectl nodehealth update
	// resume`, holds an RFC 3339 time; a failure older than it no longer halts
	// the rollout.
	ResumeAnnotation = "updates.nodehealth.io/resume"

	// UpdaterExtension is the system extension the update agent registers
	// itself as; its Lease is "bottlerocket-updater.<node>".
	UpdaterExtension = "bottlerocket-updater"

	// ManagedNodeLabel and ManagedNodeLabelValue select the nodes the updater
	// manages by default: the label existing Bottlerocket update operator
	// users already set.
	ManagedNodeLabel      = "bottlerocket.aws/updater-interface-version"
	ManagedNodeLabelValue = "2.0.0"
)

// Condition types of BottlerocketShadowStatus.Conditions.
const (
	// ConditionDrainBlocked is True while a PodDisruptionBudget or a pod keeps
	// the agent from draining the node; its message names them.
	ConditionDrainBlocked = "DrainBlocked"
	// ConditionUpdateFailed is True after the agent saw the update fail; its
	// reason and message say which step failed.
	ConditionUpdateFailed = "UpdateFailed"
)
