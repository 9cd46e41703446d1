package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShadowState is a step of a node's OS update. A node moves
// Idle → StagedAndPerformedUpdate → RebootedIntoUpdate → MonitoringUpdate → Idle;
// ErrorReset is reported by an agent whose update failed before the reboot.
type ShadowState string

const (
	// StateIdle: no update in flight; the agent keeps the offered version current.
	StateIdle ShadowState = "Idle"
	// StateStagedAndPerformedUpdate: the update is downloaded, staged and
	// activated for the next boot while the node keeps serving.
	StateStagedAndPerformedUpdate ShadowState = "StagedAndPerformedUpdate"
	// StateRebootedIntoUpdate: the agent released its Lease (reason Updating),
	// waited for the readiness taint, drained the node and rebooted it into the
	// new version.
	StateRebootedIntoUpdate ShadowState = "RebootedIntoUpdate"
	// StateMonitoringUpdate: the operator waits for the node's system
	// extensions to be ready again and for the post-reboot soak.
	StateMonitoringUpdate ShadowState = "MonitoringUpdate"
	// StateErrorReset is reported (status only, never desired in spec) by an
	// agent whose update failed before the reboot; the operator then asks for
	// Idle and the agent rolls the node back.
	StateErrorReset ShadowState = "ErrorReset"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=brs,categories=nodehealth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The state the node's agent reports"
// +kubebuilder:printcolumn:name="Desired",type=string,JSONPath=`.spec.state`,description="The state the operator asks for"
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.currentVersion`,description="The running OS version"
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.targetVersion`,description="The version the node is offered"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`,description="The version of the update in flight"
// +kubebuilder:printcolumn:name="Crash",type=integer,JSONPath=`.status.crashCount`,description="Failed updates since the last success"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BottlerocketShadow mirrors the update state of one Bottlerocket node. It is
// cluster-scoped and named after its node. It has no ownerReference: the
// shadow of a node deleted after its reboot was requested is the record of a
// failed update that halts the rollout, so the update operator deletes
// shadows itself; the node's UID is in the annotation
// updates.nodehealth.io/node-uid. The update operator writes spec and
// metadata; the node's update agent writes status only.
type BottlerocketShadow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the state the update operator asks the node to reach.
	// +optional
	Spec BottlerocketShadowSpec `json:"spec,omitempty"`

	// Status is what the node's update agent last reported.
	// +optional
	Status BottlerocketShadowStatus `json:"status,omitempty"`
}

// BottlerocketShadowSpec is written by the update operator only.
type BottlerocketShadowSpec struct {
	// State is the state the operator asks the node's agent to reach. It is
	// never ErrorReset.
	// +kubebuilder:validation:Enum=Idle;StagedAndPerformedUpdate;RebootedIntoUpdate;MonitoringUpdate
	// +kubebuilder:default=Idle
	State ShadowState `json:"state"`

	// StateTransitionTimestamp is when the operator last changed State; the
	// per-state deadlines are measured from it.
	// +optional
	StateTransitionTimestamp *metav1.Time `json:"stateTransitionTimestamp,omitempty"`

	// Version is the OS version the update in flight goes to. It is set when
	// the node leaves Idle and stays fixed until the node is Idle again. An
	// update called off (a failure before or after the reboot) keeps it at
	// Idle, so the agent restores the version lock only while the lock is
	// still the version it pinned.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// IgnoreWaves asks the agent to take Version ahead of its wave
	// (settings.updates.ignore-waves while it updates): the governing
	// policy's ignoreWaves with its pinned targetVersion. Set with Version.
	// +optional
	IgnoreWaves bool `json:"ignoreWaves,omitempty"`
}

// BottlerocketShadowStatus is written by the node's update agent only.
type BottlerocketShadowStatus struct {
	// CurrentState is the last state the agent reached.
	// +optional
	// +kubebuilder:validation:Enum=Idle;StagedAndPerformedUpdate;RebootedIntoUpdate;MonitoringUpdate;ErrorReset
	CurrentState ShadowState `json:"currentState,omitempty"`

	// CurrentVersion is the running OS version (the Bottlerocket API's
	// /os version_id).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CurrentVersion string `json:"currentVersion,omitempty"`

	// TargetVersion is the version the node is offered (the Bottlerocket
	// API's chosen_update); it equals CurrentVersion when nothing newer is
	// offered.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TargetVersion string `json:"targetVersion,omitempty"`

	// CrashCount is the number of failed updates since the last successful
	// one; the operator waits 2^CrashCount minutes (at most 24 h) before it
	// lets the node try again.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CrashCount int32 `json:"crashCount,omitempty"`

	// StateTransitionFailureTimestamp is when the last update attempt failed.
	// +optional
	StateTransitionFailureTimestamp *metav1.Time `json:"stateTransitionFailureTimestamp,omitempty"`

	// RebootFromBootID is the node's bootID the agent recorded right before
	// asking for the reboot; a different bootID afterwards proves the reboot
	// happened, so an agent restarted mid-update never reboots twice.
	// +optional
	RebootFromBootID string `json:"rebootFromBootID,omitempty"`

	// RebootRequestedAt is when the agent wrote RebootFromBootID, right
	// before it asked for the reboot. From then on the node is past its
	// drain: deleting it is an update failure. An agent that still finds the
	// node on that bootID RebootGrace after it asks for the reboot again (a
	// host that accepted a reboot goes down within seconds).
	// +optional
	RebootRequestedAt *metav1.Time `json:"rebootRequestedAt,omitempty"`

	// PreviousVersionLock is the node's updates.version-lock setting before
	// the agent pinned the update's version; it is restored after activation
	// or on abort.
	// +optional
	PreviousVersionLock string `json:"previousVersionLock,omitempty"`

	// PinnedVersionLock is the value the agent last set updates.version-lock
	// to (its pin), set only while PreviousVersionLock is. It is recorded,
	// rather than derived from spec.version, because spec.version may move
	// between two attempts while the pin of the earlier one is still on the
	// host, and an agent restarted in between must still tell its own pin
	// from a version a user pinned: only a lock that is still this pin (or
	// spec.version's) is restored or pinned over.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PinnedVersionLock string `json:"pinnedVersionLock,omitempty"`

	// IgnoringWaves is true while the agent has turned the node's
	// settings.updates.ignore-waves on for spec.ignoreWaves; it is recorded
	// before the setting changes and turned off again, only while it is
	// still on, where the version lock is restored.
	// +optional
	IgnoringWaves bool `json:"ignoringWaves,omitempty"`

	// Conditions are DrainBlocked (the PodDisruptionBudget or pod that blocks
	// the drain) and UpdateFailed (what the agent saw fail).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BottlerocketShadowList is a list of BottlerocketShadows.
type BottlerocketShadowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []BottlerocketShadow `json:"items"`
}
