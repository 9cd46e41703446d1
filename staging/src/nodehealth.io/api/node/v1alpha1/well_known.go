package v1alpha1

import "time"

// Names every nodehealth component, manifest and tool shares (docs/system-extensions.md).
// Changing one of these is a breaking change of the wire contract.
const (
	// Domain is the API domain all nodehealth names live under.
	Domain = "nodehealth.io"

	// SystemExtensionsAnnotation holds the JSON of a node's []SystemExtension.
	SystemExtensionsAnnotation = "nodehealth.io/system-extensions"

	// BootAnnotation is written by the node-health controller only, in the same
	// patch that removes the readiness taint. It records the bootID and UID the
	// node was last seen ready with, so that a reboot or a re-creation that
	// happened while the controller was down is still caught.
	BootAnnotation = "nodehealth.io/boot"

	// ExcludeLabel, set to "true" on a node, opts that node out: the controller
	// removes its taint once and leaves the node alone.
	ExcludeLabel = "nodehealth.io/exclude"

	// DefaultReadinessTaintKey is the default key of the one aggregated
	// readiness taint; its default effect is NoSchedule.
	DefaultReadinessTaintKey = "nodehealth.io/not-ready"

	// SystemExtensionsReadyCondition is the node condition type the controller
	// keeps current (True, False or Unknown).
	SystemExtensionsReadyCondition = "SystemExtensionsReady"

	// DefaultLeaseNamespace is the default namespace of extension Leases.
	DefaultLeaseNamespace = "node-extension-lease"

	// ControllerCanaryLease is the name of the Lease the controller renews in the
	// extension namespace to check that it still observes its own writes.
	ControllerCanaryLease = "nodehealth-controller-canary"
)

// Labels and annotations on extension Leases.
const (
	// ExtensionLabel names the extension a Lease belongs to.
	ExtensionLabel = "nodehealth.io/extension"
	// NodeLabel names the node a Lease belongs to. It is set only when the node
	// name fits a label value (63 characters); the Lease name is authoritative.
	NodeLabel = "nodehealth.io/node"
	// RegisterLabel set to "true" asks the controller to add the extension to
	// the node's list (source "lease") and to remove it when the Lease goes.
	RegisterLabel = "nodehealth.io/register"
	// AffectsReadinessLabel set to "false" on a self-registering Lease makes
	// the registered entry tracked and reported but never gating.
	AffectsReadinessLabel = "nodehealth.io/affects-readiness"

	// ReasonAnnotation and MessageAnnotation on a Lease say why its extension
	// is not ready, typically set together with releasing the Lease.
	ReasonAnnotation  = "nodehealth.io/reason"
	MessageAnnotation = "nodehealth.io/message"

	// ReasonUpdating is the default planned-maintenance release reason: the
	// node is gated at once but never escalated to eviction.
	ReasonUpdating = "Updating"
)

// Values of SystemExtension.Source.
const (
	// SourceManual (empty) marks entries written by a person or by tooling.
	SourceManual = ""
	// SourceLease marks entries added because a Lease self-registered.
	SourceLease = "lease"
	// SourceRulePrefix prefixes the rule name in entries injected by a rule of
	// the controller's configuration: "rule/<rule>".
	SourceRulePrefix = "rule/"
)

// Taints that say a node is being removed or replaced: the default of the
// controller's leavingNodeTaints.
const (
	// TaintToBeDeletedByClusterAutoscaler is cluster-autoscaler's scale-down
	// taint (since Kubernetes 1.28 kube-proxy's /healthz fails on a node
	// carrying it).
	TaintToBeDeletedByClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// TaintKarpenterDisrupted is Karpenter's disruption taint.
	TaintKarpenterDisrupted = "karpenter.sh/disrupted"
	// TaintOutOfService is the non-graceful node shutdown taint.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
)

// DefaultLeavingNodeTaints are the taint keys that make a node leaving unless
// the configuration lists others.
func DefaultLeavingNodeTaints() []string {
	return []string{TaintToBeDeletedByClusterAutoscaler, TaintKarpenterDisrupted, TaintOutOfService}
}

// KEP-5683 ("Node Lifecycle Conditions") Node condition types. A True one of
// those below, written by someone other than nodehealth, makes a node
// leaving (docs/controller.md).
const (
	LifecycleConditionMaintenancePlanned    = "MaintenancePlanned"
	LifecycleConditionMaintenanceInProgress = "MaintenanceInProgress"
	LifecycleConditionDrainInProgress       = "DrainInProgress"
	LifecycleConditionDrained               = "Drained"
)

// Reasons nodehealth writes on KEP-5683 lifecycle conditions; a lifecycle
// condition with one of them is nodehealth's own and never makes a node
// leaving.
const (
	LifecycleReasonBottlerocketUpdate = "BottlerocketUpdate"
	LifecycleReasonUpdateFailed       = "UpdateFailed"
	LifecycleReasonExtensionFailed    = "ExtensionFailed"
)

// OwnLifecycleReason reports whether reason is one nodehealth writes on a
// lifecycle condition.
func OwnLifecycleReason(reason string) bool {
	switch reason {
	case LifecycleReasonBottlerocketUpdate, LifecycleReasonUpdateFailed, LifecycleReasonExtensionFailed:
		return true
	}
	return false
}

// DefaultLifecycleConditionMaxAge is how long a foreign lifecycle condition
// makes a schedulable node leaving after its lastTransitionTime.
const DefaultLifecycleConditionMaxAge = 2 * time.Hour
