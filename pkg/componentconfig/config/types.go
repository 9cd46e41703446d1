package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The field documentation of record is on the external types in
// nodehealth.io/api/config/v1alpha1 (docs/config is generated from it); the
// comments here only note what differs in the internal representation.

// ServingConfiguration says where a binary serves its HTTP endpoints.
type ServingConfiguration struct {
	MetricsBindAddress    string
	HealthzBindAddress    string
	MetricsAuthentication MetricsAuthentication
	TLSCertFile           string
	TLSPrivateKeyFile     string
}

// MetricsAuthentication is None or Delegated.
type MetricsAuthentication string

const (
	MetricsAuthenticationNone      MetricsAuthentication = "None"
	MetricsAuthenticationDelegated MetricsAuthentication = "Delegated"
)

// LeaseSettings describes an extension's Lease.
type LeaseSettings struct {
	Namespace     string
	Duration      metav1.Duration
	RenewInterval metav1.Duration
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeHealthControllerConfiguration configures nodehealth-controller.
type NodeHealthControllerConfiguration struct {
	metav1.TypeMeta

	LeaderElection   componentbaseconfig.LeaderElectionConfiguration
	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	Debugging        componentbaseconfig.DebuggingConfiguration
	Logging          logsapi.LoggingConfiguration
	FeatureGates     map[string]bool
	Serving          ServingConfiguration

	LeaseNamespace       string
	Taint                TaintConfiguration
	ExtensionRules       []ExtensionRule
	RenewalGrace         metav1.Duration
	CanaryInterval       metav1.Duration
	MinimumLeaseDuration metav1.Duration
	RegistrationGrace    metav1.Duration
	MaintenanceReasons   []string
	LeavingNodeTaints    []string
	// LifecycleConditionMaxAge: how long a foreign lifecycle condition
	// makes a schedulable node leaving.
	LifecycleConditionMaxAge metav1.Duration
	Eviction                 EvictionConfiguration
	BlastRadius              BlastRadiusConfiguration
	DryRun                   bool
	Workers                  int32
}

// TaintEffect is the effect of the readiness taint.
type TaintEffect string

// Allowed taint effects.
const (
	TaintEffectNoSchedule       TaintEffect = "NoSchedule"
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
)

// TaintConfiguration names the readiness taint.
type TaintConfiguration struct {
	Key    string
	Effect TaintEffect
}

// FailurePolicy says what happens when an extension misses its startup
// timeout.
type FailurePolicy string

// Allowed failure policies.
const (
	FailurePolicyKeepGated FailurePolicy = "KeepGated"
	FailurePolicyUngate    FailurePolicy = "Ungate"
)

// Placeholders of ExtensionRule.LeaseNameTemplate.
const (
	LeaseNameExtensionPlaceholder = "{extension}"
	LeaseNameNodePlaceholder      = "{node}"
)

// ExtensionRule makes every selected node require one extension.
type ExtensionRule struct {
	Name string
	// NodeSelector stays a pointer: it is required, and "not set" must be
	// reported rather than read as "select nothing".
	NodeSelector      *metav1.LabelSelector
	LeaseNameTemplate string
	AffectsReadiness  bool
	// StartupTimeout 0 means no timeout.
	StartupTimeout metav1.Duration
	FailurePolicy  FailurePolicy
}

// EvictionMode is how the controller escalates.
type EvictionMode string

// Allowed eviction modes.
const (
	EvictionModeEvict     EvictionMode = "Evict"
	EvictionModeNoExecute EvictionMode = "NoExecute"
	EvictionModeNone      EvictionMode = "None"
)

// EvictionConfiguration configures escalation to eviction.
type EvictionConfiguration struct {
	Mode               EvictionMode
	Timeout            metav1.Duration
	NodesPerSecond     float64
	Force              bool
	DeleteEmptyDirData bool
}

// BlastRadiusConfiguration configures the blast-radius protection.
type BlastRadiusConfiguration struct {
	ClusterThresholdPercent int32
	ZoneThresholdPercent    int32
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ExtensionHeartbeatConfiguration configures extension-heartbeat.
type ExtensionHeartbeatConfiguration struct {
	metav1.TypeMeta

	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	Debugging        componentbaseconfig.DebuggingConfiguration
	Logging          logsapi.LoggingConfiguration
	FeatureGates     map[string]bool
	Serving          ServingConfiguration

	ExtensionName    string
	Lease            LeaseSettings
	Probe            ProbeConfiguration
	Register         bool
	AffectsReadiness bool
}

// ProbeConfiguration is a local health check; exactly one of the probe kinds
// is non-nil (they stay pointers: the pointer is the "which kind" switch).
type ProbeConfiguration struct {
	HTTP             *HTTPProbe
	TCP              *TCPProbe
	GRPC             *GRPCProbe
	File             *FileProbe
	Period           metav1.Duration
	Timeout          metav1.Duration
	SuccessThreshold int32
	FailureThreshold int32
}

// HTTPProbe GETs a URL.
type HTTPProbe struct {
	URL                   string
	CAFile                string
	InsecureSkipTLSVerify bool
}

// TCPProbe opens a TCP connection.
type TCPProbe struct {
	Address string
}

// GRPCProbe calls grpc.health.v1.
type GRPCProbe struct {
	Address string
	Service string
}

// FileProbe checks a file's modification time.
type FileProbe struct {
	Path   string
	MaxAge metav1.Duration
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UpdateOperatorConfiguration configures update-operator.
type UpdateOperatorConfiguration struct {
	metav1.TypeMeta

	LeaderElection   componentbaseconfig.LeaderElectionConfiguration
	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	Debugging        componentbaseconfig.DebuggingConfiguration
	Logging          logsapi.LoggingConfiguration
	FeatureGates     map[string]bool
	Serving          ServingConfiguration

	// ManagedNodeSelector is always set after defaulting.
	ManagedNodeSelector *metav1.LabelSelector
	DryRun              bool
	StateDeadlines      StateDeadlines
	ReadinessTaintKey   string
	Drain               UpdateDrain
	// LeavingNodeTaints and LifecycleConditionMaxAge say which nodes are
	// leaving, as the controller's fields of the same names: they count
	// toward the policies' budgets.
	LeavingNodeTaints        []string
	LifecycleConditionMaxAge metav1.Duration
	// AlertSources are the Alertmanagers policies' alerts gates name.
	AlertSources []AlertSource
	// Hooks are where the policies' hook Jobs run.
	Hooks UpdateHooks
}

// UpdateHooks are the namespace and service account of the hooks' Jobs;
// both empty: no hook can run.
type UpdateHooks struct {
	Namespace          string
	ServiceAccountName string
}

// AlertSource is an Alertmanager of the alerts gate.
type AlertSource struct {
	Name            string
	URL             string
	CAFile          string
	BearerTokenFile string
	Timeout         metav1.Duration
}

// UpdateDrain configures the operator's drain before a reboot.
type UpdateDrain struct {
	Timeout            metav1.Duration
	Force              bool
	DeleteEmptyDirData bool
}

// StateDeadlines bound each non-Idle update state.
type StateDeadlines struct {
	StagedAndPerformedUpdate metav1.Duration
	RebootedIntoUpdate       metav1.Duration
	MonitoringUpdate         metav1.Duration
	ReturnToIdle             metav1.Duration
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UpdateAgentConfiguration configures update-agent.
type UpdateAgentConfiguration struct {
	metav1.TypeMeta

	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	Debugging        componentbaseconfig.DebuggingConfiguration
	Logging          logsapi.LoggingConfiguration
	FeatureGates     map[string]bool
	Serving          ServingConfiguration

	APISocketPath       string
	UpdateCheckInterval metav1.Duration
	ReadinessTaintKey   string
	RebootGrace         metav1.Duration
	Lease               LeaseSettings
}
