package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeHealthControllerConfiguration configures nodehealth-controller, the
// controller that keeps one aggregated readiness taint on every node current
// from the Leases of the node's system extensions.
type NodeHealthControllerConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// LeaderElection configures leader election. Only the leader writes; the
	// default Lease lives in nodehealth-system and is named
	// nodehealth-controller.
	LeaderElection componentbaseconfigv1alpha1.LeaderElectionConfiguration `json:"leaderElection"`

	// ClientConnection configures the connection to the API server. The default
	// QPS 100 / burst 200 lets the controller taint or untaint 1,000 nodes (two
	// writes each: the taint patch and the condition patch) in about 20
	// seconds, measured in docs/benchmarks.md, which is what recovering from a
	// bad extension rollout needs, while steady state costs no writes at all.
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration `json:"clientConnection"`

	// Debugging configures profiling endpoints.
	Debugging componentbaseconfigv1alpha1.DebuggingConfiguration `json:"debugging"`

	// Logging configures klog through k8s.io/component-base/logs.
	Logging logsapi.LoggingConfiguration `json:"logging"`

	// FeatureGates enables or disables nodehealth (and logging) features by
	// name. --feature-gates on the command line is merged over it per key.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// Serving says where /metrics and /healthz are served.
	Serving ServingConfiguration `json:"serving"`

	// LeaseNamespace is the only namespace the controller watches for extension
	// Leases. A Lease reference outside it is invalid (the admission policy only
	// guards this namespace).
	LeaseNamespace string `json:"leaseNamespace,omitempty"`

	// Taint is the one aggregated readiness taint the controller owns.
	Taint TaintConfiguration `json:"taint"`

	// ExtensionRules inject system extensions into the list of every node they
	// select ("every node with label X requires kube-proxy"); an entry is
	// removed again when its rule stops matching. Rule names are unique.
	ExtensionRules []ExtensionRule `json:"extensionRules,omitempty"`

	// RenewalGrace is added to a Lease's leaseDurationSeconds before the
	// extension counts as not ready, to absorb API server and watch latency: the
	// default 40s Lease then expires after 50s of silence, like the
	// kube-controller-manager's node grace period.
	RenewalGrace *metav1.Duration `json:"renewalGrace,omitempty"`

	// CanaryInterval is how often the controller renews its canary Lease
	// (nodehealth-controller-canary in leaseNamespace) and expects to observe
	// that renewal through its own watch. After 3 intervals without observing
	// one it stops adding taints and evicting until it does again. It must
	// fire before a healthy Lease can expire in a stall; renewers renew at
	// least every quarter of their Lease's duration, so 3 × canaryInterval
	// must be less than 3/4 × minimumLeaseDuration + renewalGrace.
	CanaryInterval *metav1.Duration `json:"canaryInterval,omitempty"`

	// MinimumLeaseDuration is the shortest Lease duration the controller
	// honours: a Lease whose leaseDurationSeconds is shorter is treated as
	// this long, so that the canary always notices a stale view before such
	// a Lease could expire.
	MinimumLeaseDuration *metav1.Duration `json:"minimumLeaseDuration,omitempty"`

	// RegistrationGrace is how long a taint placed at node creation (kubelet
	// registerWithTaints or the admission policy) stays on a node that still
	// lists no required extension; the grace gives rules and self-registering
	// Leases time to add their entries.
	RegistrationGrace *metav1.Duration `json:"registrationGrace,omitempty"`

	// MaintenanceReasons are the Lease release reasons
	// (nodehealth.io/reason) that mark a planned release: the node is gated at
	// once, but never escalated to eviction and never counted toward the blast
	// radius. An empty list means the default.
	MaintenanceReasons []string `json:"maintenanceReasons,omitempty"`

	// LeavingNodeTaints are the taint keys that say a node is being removed
	// or replaced (cluster-autoscaler's scale-down, Karpenter's disruption,
	// a non-graceful shutdown). A node carrying one, a node with a
	// deletionTimestamp, and a node under someone else's KEP-5683 lifecycle
	// condition is leaving: it may be gated, but it is never escalated to
	// eviction and is counted on neither side of the blast radius. An empty
	// list means the default: ToBeDeletedByClusterAutoscaler,
	// karpenter.sh/disrupted and node.kubernetes.io/out-of-service.
	LeavingNodeTaints []string `json:"leavingNodeTaints,omitempty"`

	// LifecycleConditionMaxAge is how long after its lastTransitionTime a
	// KEP-5683 lifecycle condition (DrainInProgress, Drained or
	// MaintenanceInProgress True with a reason nodehealth does not write)
	// makes a schedulable node leaving; on an unschedulable node it counts
	// as long as it is True. A stale condition nobody cleared must not
	// exempt a node forever.
	LifecycleConditionMaxAge *metav1.Duration `json:"lifecycleConditionMaxAge,omitempty"`

	// Eviction configures what happens to the pods of a node whose required
	// extension failed after the node had been ready.
	Eviction EvictionConfiguration `json:"eviction"`

	// BlastRadius stops new failure taints and evictions when too many nodes
	// fail at once, which is the signature of a bad extension rollout rather
	// than of bad nodes.
	BlastRadius BlastRadiusConfiguration `json:"blastRadius"`

	// DryRun makes the controller compute, log and count every taint, untaint
	// and eviction without writing anything but its leader-election Lease.
	DryRun bool `json:"dryRun,omitempty"`

	// Workers is the number of nodes synced in parallel.
	Workers *int32 `json:"workers,omitempty"`
}

// TaintEffect is the effect of the readiness taint.
type TaintEffect string

const (
	// TaintEffectNoSchedule keeps new pods that do not tolerate the taint off
	// the node.
	TaintEffectNoSchedule TaintEffect = "NoSchedule"
	// TaintEffectPreferNoSchedule only discourages scheduling; gating is then
	// advisory.
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
)

// TaintConfiguration names the readiness taint.
type TaintConfiguration struct {
	// Key is the taint key. Every extension DaemonSet and the controller itself
	// must tolerate it, or a gated node can never become ready.
	Key string `json:"key,omitempty"`

	// Effect is NoSchedule or PreferNoSchedule. NoExecute is not allowed here:
	// evicting the pods of a failed node is eviction.mode NoExecute, which
	// respects the eviction timeout and the blast radius.
	Effect TaintEffect `json:"effect,omitempty"`
}

// FailurePolicy says what happens to a gated node whose extension did not come
// up within its startupTimeout.
type FailurePolicy string

const (
	// FailurePolicyKeepGated keeps the node gated and reports the timeout
	// (fail closed).
	FailurePolicyKeepGated FailurePolicy = "KeepGated"
	// FailurePolicyUngate ignores the extension for gating from then on until
	// it becomes ready (fail open).
	FailurePolicyUngate FailurePolicy = "Ungate"
)

// ExtensionRule makes every node selected by NodeSelector require one system
// extension.
type ExtensionRule struct {
	// Name is both the rule's name and the name of the extension it injects
	// (a DNS label, no dots, because the Lease name is <extension>.<node>).
	// Injected entries carry source "rule/<name>".
	Name string `json:"name"`

	// NodeSelector selects the nodes that require the extension. It is
	// required; {} selects every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector"`

	// LeaseNameTemplate is the name of the extension's Lease in leaseNamespace,
	// with {extension} and {node} replaced. It must contain {node} so that
	// every node has its own Lease.
	LeaseNameTemplate string `json:"leaseNameTemplate,omitempty"`

	// AffectsReadiness false makes the extension tracked and reported but
	// never gating.
	AffectsReadiness *bool `json:"affectsReadiness,omitempty"`

	// StartupTimeout is how long after the node was gated the extension may
	// take to become ready before failurePolicy applies. 0s disables the
	// timeout.
	StartupTimeout *metav1.Duration `json:"startupTimeout,omitempty"`

	// FailurePolicy is KeepGated (fail closed) or Ungate (fail open).
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
}

// EvictionMode is how the controller escalates after evictionTimeout.
type EvictionMode string

const (
	// EvictionModeEvict evicts pods through the Eviction API, honouring
	// PodDisruptionBudgets.
	EvictionModeEvict EvictionMode = "Evict"
	// EvictionModeNoExecute adds the NoExecute effect to the readiness taint so
	// that pods' tolerationSeconds apply.
	EvictionModeNoExecute EvictionMode = "NoExecute"
	// EvictionModeNone never evicts; the node only stays tainted.
	EvictionModeNone EvictionMode = "None"
)

// EvictionConfiguration configures the escalation from "tainted" to "pods
// removed" for nodes whose required extension failed after they were ready.
type EvictionConfiguration struct {
	// Mode is Evict, NoExecute or None (the default: escalation is opt-in,
	// and a failed node only stays tainted).
	Mode EvictionMode `json:"mode,omitempty"`

	// Timeout is how long an unplanned failure lasts before the controller
	// escalates. It matches the kube-controller-manager's default pod eviction
	// timeout for unreachable nodes.
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// NodesPerSecond limits, cluster-wide, how many nodes per second may start
	// being evicted (burst 1). The default (one node every 10s) is the
	// kube-controller-manager's --node-eviction-rate.
	NodesPerSecond *float64 `json:"nodesPerSecond,omitempty"`

	// Force makes mode Evict also evict pods that declare no controller, as
	// kubectl drain --force does: nothing recreates such a pod elsewhere.
	// Without it they stay on the node and are named in its
	// SystemExtensionsReady condition and an EvictionSkipped Event. Only
	// valid with mode Evict.
	Force *bool `json:"force,omitempty"`

	// DeleteEmptyDirData makes mode Evict also evict pods with emptyDir
	// volumes, as kubectl drain --delete-emptydir-data does: the volume's
	// data is lost with the pod. Without it they stay on the node and are
	// named in its SystemExtensionsReady condition and an EvictionSkipped
	// Event. Only valid with mode Evict.
	DeleteEmptyDirData *bool `json:"deleteEmptyDirData,omitempty"`
}

// BlastRadiusConfiguration configures the protection against gating or
// evicting a large part of the cluster at once. Failing nodes are counted among
// nodes that list at least one extension that affects readiness; protection
// starts when more than 2 nodes fail and the share reaches a threshold, and
// ends when the share falls below max(threshold − 5 points, threshold / 2) or
// 2 or fewer nodes fail, so that every threshold has a reachable end.
type BlastRadiusConfiguration struct {
	// ClusterThresholdPercent is the share of failing nodes, cluster-wide, at
	// which new failure taints and evictions stop (0-100; 100 protects only
	// when every node fails).
	ClusterThresholdPercent *int32 `json:"clusterThresholdPercent,omitempty"`

	// ZoneThresholdPercent is the same share within one
	// topology.kubernetes.io/zone. It is higher than the cluster threshold
	// because a real zone failure legitimately fails many nodes of one zone
	// (0-100).
	ZoneThresholdPercent *int32 `json:"zoneThresholdPercent,omitempty"`
}
