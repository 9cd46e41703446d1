package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UpdateOperatorConfiguration configures update-operator, which creates a
// BottlerocketShadow per managed node and drives Bottlerocket OS updates
// through them, using node readiness as the health gate after each reboot.
type UpdateOperatorConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// LeaderElection configures leader election; the default Lease is
	// nodehealth-system/update-operator.
	LeaderElection componentbaseconfigv1alpha1.LeaderElectionConfiguration `json:"leaderElection"`

	// ClientConnection configures the connection to the API server.
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

	// ManagedNodeSelector selects the nodes the operator keeps a
	// BottlerocketShadow for. Which of them update, to which version, how
	// many at once and when is said by UpdatePolicy objects
	// (updates.nodehealth.io/v1alpha1), not here: a managed node no policy
	// selects is never started. The default is the label existing
	// Bottlerocket update operator users already set.
	ManagedNodeSelector *metav1.LabelSelector `json:"managedNodeSelector,omitempty"`

	// DryRun makes the operator log and report the shadow writes it would
	// make (creating shadows, starting and advancing updates, recording
	// failures) without making them.
	DryRun bool `json:"dryRun,omitempty"`

	// StateDeadlines bound how long a node may stay in each state before the
	// update counts as failed and the rollout halts.
	StateDeadlines StateDeadlines `json:"stateDeadlines"`

	// ReadinessTaintKey is the node-health controller's readiness taint
	// (its taint.key). The operator drains a node only once it carries the
	// taint, which the controller puts on when the node's agent releases
	// its Lease, and leaves the pods that tolerate it to the last pass. It
	// must be the controller's key, or no drain ever starts. Default
	// nodehealth.io/not-ready.
	ReadinessTaintKey string `json:"readinessTaintKey,omitempty"`

	// Drain configures the drain the operator runs before each reboot (the
	// agents hold no pod permissions).
	Drain UpdateDrain `json:"drain"`

	// LeavingNodeTaints are the taint keys that say a node is being removed
	// or replaced. A node an UpdatePolicy selects that carries one, has a
	// deletionTimestamp, or is under someone else's KEP-5683 lifecycle
	// condition counts toward the policy's maxConcurrentUpdates and
	// maxConcurrentUpdatesPerZone, as a node of ours in flight does: one
	// disruption budget across tools. Set it to the node-health
	// controller's leavingNodeTaints, so both agree on which nodes are
	// leaving. An empty list means the default:
	// ToBeDeletedByClusterAutoscaler, karpenter.sh/disrupted and
	// node.kubernetes.io/out-of-service.
	LeavingNodeTaints []string `json:"leavingNodeTaints,omitempty"`

	// LifecycleConditionMaxAge is how long after its lastTransitionTime a
	// KEP-5683 lifecycle condition (DrainInProgress, Drained or
	// MaintenanceInProgress True with a reason nodehealth does not write)
	// counts a schedulable node toward a policy's budget; on an
	// unschedulable node it counts as long as it is True. Set it to the
	// node-health controller's lifecycleConditionMaxAge. Default 2h.
	LifecycleConditionMaxAge *metav1.Duration `json:"lifecycleConditionMaxAge,omitempty"`

	// AlertSources are the Alertmanagers UpdatePolicies may name in
	// spec.gates.alerts, by name. Their URLs and credentials live here, in
	// the operator's configuration, so that whoever may write a policy
	// cannot point the operator at an address of their choosing.
	// +listType=map
	// +listMapKey=name
	AlertSources []AlertSource `json:"alertSources,omitempty"`

	// Hooks says where the Jobs of UpdatePolicies' spec.hooks run. They
	// live here, in the operator's configuration, so that whoever may
	// write a policy chooses the hook's command but never the namespace
	// or the identity it runs with: a policy cannot run pods as the
	// operator. Unset: no hook can run, and a policy with hooks starts
	// nothing (its Blocked condition, reason HooksNotConfigured).
	Hooks UpdateHooks `json:"hooks"`
}

// UpdateHooks are where the hooks' Jobs run.
type UpdateHooks struct {
	// Namespace is where the operator creates the hooks' Jobs; its RBAC
	// lets it create, read and delete Jobs there only. Set together with
	// ServiceAccountName.
	Namespace string `json:"namespace,omitempty"`

	// ServiceAccountName is the service account of the hooks' pods, in
	// Namespace: give it what the hooks need (for example the Ceph
	// client's credentials) and nothing else. Set together with Namespace.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// AlertSource is an Alertmanager the operator queries through its v2 API
// (GET /api/v2/alerts) for the alerts gates of UpdatePolicies.
type AlertSource struct {
	// Name is what spec.gates.alerts[].source of a policy names: a DNS
	// label, unique among the sources.
	Name string `json:"name"`

	// URL is the Alertmanager's base URL (http or https), without
	// /api/v2; a path prefix (an Alertmanager behind --web.route-prefix or
	// a proxy) is kept.
	URL string `json:"url"`

	// CAFile is a PEM bundle of the certificate authorities an https URL's
	// server certificate is checked against; unset: the system's. A
	// relative path is resolved against the configuration file's folder.
	// A file that cannot be read or holds no certificate stops the
	// operator at its start.
	CAFile string `json:"caFile,omitempty"`

	// BearerTokenFile is a file whose content (whitespace trimmed) is sent
	// as the Authorization: Bearer token of every query; read at each
	// query, so a rotated token is taken without a restart, and once at
	// the operator's start, which a missing or empty file stops. A
	// relative path is resolved against the configuration file's folder.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`

	// Timeout bounds one query; a query that does not answer within it
	// counts as the source being unreachable. Default 5s.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// UpdateDrain configures the operator's drain of a node before its reboot:
// kubectl drain's pod selection (never DaemonSet or mirror pods), the pods
// that tolerate the readiness taint left to a last pass, PodDisruptionBudgets
// honoured.
type UpdateDrain struct {
	// Timeout bounds a node's drain. When it expires the update fails
	// (DrainBlocked, naming the blocking PodDisruptionBudget or pod) and
	// halts its UpdatePolicy instead of waiting forever. It must be shorter
	// than stateDeadlines.rebootedIntoUpdate. Default 10m.
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Force evicts pods that declare no controller, as kubectl drain --force
	// does: nothing recreates such a pod elsewhere. Without it such a pod
	// blocks the drain and is named. Default false.
	Force *bool `json:"force,omitempty"`

	// DeleteEmptyDirData evicts pods with emptyDir volumes, as kubectl drain
	// --delete-emptydir-data does: the reboot loses the data anyway.
	// Without it such a pod blocks the drain and is named. Default true.
	DeleteEmptyDirData *bool `json:"deleteEmptyDirData,omitempty"`
}

// StateDeadlines are the longest times a node may spend in each non-Idle
// update state.
type StateDeadlines struct {
	// StagedAndPerformedUpdate covers downloading, staging and activating
	// the update; the node keeps serving meanwhile. Default 15m.
	StagedAndPerformedUpdate *metav1.Duration `json:"stagedAndPerformedUpdate,omitempty"`

	// RebootedIntoUpdate covers waiting for the readiness taint, the drain,
	// the reboot and the boot until the agent reports the new version. It
	// must exceed drain.timeout plus the node's boot time (it must exceed
	// drain.timeout; the boot time is not checked). Default 30m.
	RebootedIntoUpdate *metav1.Duration `json:"rebootedIntoUpdate,omitempty"`

	// MonitoringUpdate covers waiting for full readiness plus the
	// postRebootSoak of the node's UpdatePolicy. It must be longer than
	// every policy's postRebootSoak (a policy with a longer soak starts
	// nothing and says so in its status). Default 20m.
	MonitoringUpdate *metav1.Duration `json:"monitoringUpdate,omitempty"`

	// ReturnToIdle bounds how long a node whose spec is back at Idle may
	// still report an update state (completing after its health gate, or
	// aborting after a failure before its reboot) before the agent reports
	// Idle. Such a node counts toward the concurrency limits; past this
	// deadline it is marked failed and halts the rollout instead of holding
	// a slot forever (an agent crash-looping, an update repository the node
	// cannot reach). Default 10m.
	ReturnToIdle *metav1.Duration `json:"returnToIdle,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UpdateAgentConfiguration configures update-agent, the DaemonSet agent that
// updates its own node through the Bottlerocket API. The node name comes from
// --node-name or the NODE_NAME environment variable.
type UpdateAgentConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// ClientConnection configures the connection to the API server. The agent
	// renews a Lease and updates its shadow's status: QPS 10 / burst 20.
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration `json:"clientConnection"`

	// Debugging configures profiling endpoints. Off by default, as on every
	// per-node binary.
	Debugging componentbaseconfigv1alpha1.DebuggingConfiguration `json:"debugging"`

	// Logging configures klog through k8s.io/component-base/logs.
	Logging logsapi.LoggingConfiguration `json:"logging"`

	// FeatureGates enables or disables nodehealth (and logging) features by
	// name. --feature-gates on the command line is merged over it per key.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// Serving says where /metrics and /healthz are served.
	Serving ServingConfiguration `json:"serving"`

	// APISocketPath is the Unix socket of the Bottlerocket API. A relative
	// path is resolved against the configuration file's folder.
	APISocketPath string `json:"apiSocketPath,omitempty"`

	// UpdateCheckInterval is how often the agent asks the Bottlerocket API
	// for the offered version (refresh-updates) and reports it as the
	// shadow's status.targetVersion while the node is Idle.
	UpdateCheckInterval *metav1.Duration `json:"updateCheckInterval,omitempty"`

	// ReadinessTaintKey is the node-health controller's readiness taint
	// (its taint.key), which the agent waits for after releasing its Lease
	// and before the operator drains the node. It must be the controller's
	// key, or every update
	// fails waiting for a taint that never comes. Default
	// nodehealth.io/not-ready.
	ReadinessTaintKey string `json:"readinessTaintKey,omitempty"`

	// RebootGrace is how long after asking for the reboot an agent that
	// still finds the node on the bootID it recorded asks again. A host that
	// accepted a reboot goes down within seconds, so the request was lost
	// or refused; a second request is never a second boot into the same
	// update. Default 3m.
	RebootGrace *metav1.Duration `json:"rebootGrace,omitempty"`

	// Lease configures the agent's own extension Lease (extension
	// bottlerocket-updater), which it releases with reason Updating before
	// the operator drains the node.
	Lease LeaseSettings `json:"lease"`
}
