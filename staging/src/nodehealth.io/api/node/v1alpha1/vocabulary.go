package v1alpha1

import "time"

// Reasons of the SystemExtensionsReady node condition, as the node-health
// controller writes them (docs/controller.md). The kubectl plugin, the update operator
// and anything else that reads the condition import these instead of retyping
// them. The False reasons are also the values of the reason label of the
// controller's nodehealth_gated_nodes metric.
const (
	// ReasonExtensionsReady (True): every extension that affects readiness is
	// ready.
	ReasonExtensionsReady = "ExtensionsReady"
	// ReasonNoRequiredExtensions (True): the node lists no extension that
	// affects readiness, so it is never gated.
	ReasonNoRequiredExtensions = "NoRequiredExtensions"

	// ReasonNodeRegistered (False): the node is new and waits until every
	// extension that affects readiness has renewed its Lease.
	ReasonNodeRegistered = "NodeRegistered"
	// ReasonNodeRebooted (False): the node's bootID changed; every extension
	// must renew its Lease again.
	ReasonNodeRebooted = "NodeRebooted"
	// ReasonNodeRecreated (False): the node was deleted and created again
	// under the same name (its UID changed).
	ReasonNodeRecreated = "NodeRecreated"
	// ReasonControllerStarted (False): the controller started or became leader
	// and found the node gated; every extension must renew again.
	ReasonControllerStarted = "ControllerStarted"
	// ReasonExtensionsNotReady (False): an extension that affects readiness
	// stopped being ready after the node had been ready.
	ReasonExtensionsNotReady = "ExtensionsNotReady"
	// ReasonPlannedMaintenance (False): an extension released its Lease with a
	// maintenance reason (by default ReasonUpdating); never escalates.
	ReasonPlannedMaintenance = "PlannedMaintenance"
	// ReasonStartupTimeout (False): an extension did not become ready within
	// its rule's startup timeout, and the rule keeps the node gated.
	ReasonStartupTimeout = "StartupTimeout"
	// ReasonExtensionsFailedOpen (True): the node is not gated, but an
	// extension it requires is not ready: it missed its startup timeout in
	// this boot and its rule's failurePolicy is Ungate. Readers that need
	// every extension running (the update operator's health gate) must not
	// take it for ExtensionsReady.
	ReasonExtensionsFailedOpen = "ExtensionsFailedOpen"
	// ReasonGatingSuspended (False): extensions are not ready but the
	// controller is withholding the failure taint (blast radius reached, or
	// it cannot observe its own writes).
	ReasonGatingSuspended = "GatingSuspended"
	// ReasonNodeExcluded (Unknown): the node carries ExcludeLabel=true and the
	// controller no longer evaluates it.
	ReasonNodeExcluded = "NodeExcluded"
	// ReasonNodeLeaving (False): the node is gated, but it is leaving the
	// cluster or under someone else's maintenance (a deletionTimestamp, a
	// taint of the controller's leavingNodeTaints, or a foreign KEP-5683
	// lifecycle condition): it is never escalated and not counted in the
	// blast radius. The message names the signal.
	ReasonNodeLeaving = "NodeLeaving"
)

// States of one extension on one node, as the controller reports them in the
// condition message and the kubectl plugin shows them.
const (
	// ExtensionReady: the Lease has a holder and a renewal was observed
	// within its duration plus the controller's renewal grace.
	ExtensionReady = "Ready"
	// ExtensionLeaseMissing: the Lease does not exist.
	ExtensionLeaseMissing = "LeaseMissing"
	// ExtensionLeaseReleased: the Lease's holderIdentity is empty; the
	// extension asked to be treated as not ready.
	ExtensionLeaseReleased = "LeaseReleased"
	// ExtensionLeaseExpired: no renewal observed within the Lease duration
	// plus the renewal grace.
	ExtensionLeaseExpired = "LeaseExpired"
	// ExtensionNeverRenewed: the Lease exists but has never been renewed.
	ExtensionNeverRenewed = "NeverRenewed"
	// ExtensionStartupTimeout: not ready within the rule's startup timeout
	// after the node was gated, and the rule keeps the node gated.
	ExtensionStartupTimeout = "StartupTimeout"
)

// Lease timing defaults, those of the kubelet's node Lease.
const (
	// DefaultLeaseDuration applies to Leases without
	// spec.leaseDurationSeconds, and is what the heartbeat writes by default.
	DefaultLeaseDuration = 40 * time.Second
	// DefaultRenewInterval is the heartbeat's default time between renewals.
	DefaultRenewInterval = 10 * time.Second
)
