package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Defaults that are not already names shared through nodehealth.io/api.
const (
	// DefaultComponentNamespace holds the leader-election Leases of the
	// controller and the operator. The manifests in deploy/ install both
	// there.
	DefaultComponentNamespace = "nodehealth-system"

	// DefaultControllerLeaderElectionName is the controller's
	// leader-election Lease.
	DefaultControllerLeaderElectionName = "nodehealth-controller"

	// DefaultOperatorLeaderElectionName is the update operator's
	// leader-election Lease.
	DefaultOperatorLeaderElectionName = "update-operator"

	// DefaultLeaseNameTemplate names an extension's Lease <extension>.<node>
	// (docs/system-extensions.md).
	DefaultLeaseNameTemplate = "{extension}.{node}"

	// DefaultUpdaterInterfaceVersionLabel and ...Value form the default
	// managed node selector of the update operator: the label existing
	// Bottlerocket update operator users already set on their nodes.
	DefaultUpdaterInterfaceVersionLabel = "bottlerocket.aws/updater-interface-version"
	DefaultUpdaterInterfaceVersionValue = "2.0.0"

	// DefaultBottlerocketAPISocketPath is where Bottlerocket serves its API.
	DefaultBottlerocketAPISocketPath = "/run/api.sock"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_NodeHealthControllerConfiguration sets the controller's
// defaults. Component-base's recommended defaults come last, after the
// values this component wants differently (leases instead of the legacy
// endpoints lock, QPS sized for tainting 1,000 nodes quickly).
func SetDefaults_NodeHealthControllerConfiguration(obj *configv1alpha1.NodeHealthControllerConfiguration) {
	setLeaderElectionDefaults(&obj.LeaderElection, DefaultControllerLeaderElectionName)
	// 100 QPS / burst 200: gating or ungating every node of a 1,000-node
	// cluster is one patch per node, i.e. about 8 s; the client stays far
	// below API Priority and Fairness' default share for a workload-high
	// controller.
	setClientConnectionDefaults(&obj.ClientConnection, 100, 200)
	setDebuggingOff(&obj.Debugging)
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
	setServingDefaults(&obj.Serving, "0.0.0.0:8080", "0.0.0.0:8081")

	if obj.LeaseNamespace == "" {
		obj.LeaseNamespace = nodev1alpha1.DefaultLeaseNamespace
	}
	if obj.Taint.Key == "" {
		obj.Taint.Key = nodev1alpha1.DefaultReadinessTaintKey
	}
	if obj.Taint.Effect == "" {
		obj.Taint.Effect = configv1alpha1.TaintEffectNoSchedule
	}
	setDuration(&obj.RenewalGrace, 10*time.Second)
	// 3 × 5 s = 15 s < 10 s + 10 s: the canary fires before the shortest
	// Lease the controller honours can expire.
	setDuration(&obj.CanaryInterval, 5*time.Second)
	setDuration(&obj.MinimumLeaseDuration, 10*time.Second)
	setDuration(&obj.RegistrationGrace, 30*time.Second)
	if len(obj.MaintenanceReasons) == 0 {
		obj.MaintenanceReasons = []string{nodev1alpha1.ReasonUpdating}
	}
	if len(obj.LeavingNodeTaints) == 0 {
		obj.LeavingNodeTaints = nodev1alpha1.DefaultLeavingNodeTaints()
	}
	setDuration(&obj.LifecycleConditionMaxAge, nodev1alpha1.DefaultLifecycleConditionMaxAge)
	// Escalation is opt-in: by default a failed node only stays tainted, as
	// with the upstream node-readiness-controller. Evict and NoExecute remove
	// workloads, which a cluster operator should choose knowingly.
	if obj.Eviction.Mode == "" {
		obj.Eviction.Mode = configv1alpha1.EvictionModeNone
	}
	setDuration(&obj.Eviction.Timeout, 5*time.Minute)
	if obj.Eviction.NodesPerSecond == nil {
		obj.Eviction.NodesPerSecond = ptr.To(0.1)
	}
	// As kubectl drain: pods nothing recreates and emptyDir data are not
	// removed unless asked for.
	if obj.Eviction.Force == nil {
		obj.Eviction.Force = ptr.To(false)
	}
	if obj.Eviction.DeleteEmptyDirData == nil {
		obj.Eviction.DeleteEmptyDirData = ptr.To(false)
	}
	// 20% of nodes failing at once is far above the independent failure rate
	// of machines (a few percent at worst) and caps the damage of a bad
	// rollout; 55% per zone is the kube-controller-manager's
	// --unhealthy-zone-threshold.
	if obj.BlastRadius.ClusterThresholdPercent == nil {
		obj.BlastRadius.ClusterThresholdPercent = ptr.To[int32](20)
	}
	if obj.BlastRadius.ZoneThresholdPercent == nil {
		obj.BlastRadius.ZoneThresholdPercent = ptr.To[int32](55)
	}
	if obj.Workers == nil {
		obj.Workers = ptr.To[int32](10)
	}
}

// SetDefaults_ExtensionRule defaults one rule of the controller.
func SetDefaults_ExtensionRule(obj *configv1alpha1.ExtensionRule) {
	if obj.LeaseNameTemplate == "" {
		obj.LeaseNameTemplate = DefaultLeaseNameTemplate
	}
	if obj.AffectsReadiness == nil {
		obj.AffectsReadiness = ptr.To(true)
	}
	// With the default KeepGated policy the timeout only changes what is
	// reported (StartupTimeout instead of waiting), which is worth knowing
	// after 10 minutes.
	setDuration(&obj.StartupTimeout, 10*time.Minute)
	if obj.FailurePolicy == "" {
		obj.FailurePolicy = configv1alpha1.FailurePolicyKeepGated
	}
}

// SetDefaults_ExtensionHeartbeatConfiguration sets the heartbeat's defaults.
func SetDefaults_ExtensionHeartbeatConfiguration(obj *configv1alpha1.ExtensionHeartbeatConfiguration) {
	// One Lease write per renew interval: 5 QPS is plenty, and a low limit
	// keeps thousands of sidecars gentle on the API server after a restart.
	setClientConnectionDefaults(&obj.ClientConnection, 5, 10)
	setDebuggingOff(&obj.Debugging)
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
	setServingDefaults(&obj.Serving, "0.0.0.0:10360", "0.0.0.0:10361")
	SetDefaults_LeaseSettings(&obj.Lease)
	if obj.AffectsReadiness == nil {
		obj.AffectsReadiness = ptr.To(true)
	}
}

// SetDefaults_LeaseSettings mirrors the kubelet's node Lease: 40 s duration,
// renewed every 10 s.
func SetDefaults_LeaseSettings(obj *configv1alpha1.LeaseSettings) {
	if obj.Namespace == "" {
		obj.Namespace = nodev1alpha1.DefaultLeaseNamespace
	}
	setDuration(&obj.Duration, 40*time.Second)
	setDuration(&obj.RenewInterval, 10*time.Second)
}

// SetDefaults_ProbeConfiguration uses the kubelet's probe defaults, except
// for period, which matches the default renew interval.
func SetDefaults_ProbeConfiguration(obj *configv1alpha1.ProbeConfiguration) {
	setDuration(&obj.Period, 10*time.Second)
	setDuration(&obj.Timeout, time.Second)
	if obj.SuccessThreshold == nil {
		obj.SuccessThreshold = ptr.To[int32](1)
	}
	if obj.FailureThreshold == nil {
		obj.FailureThreshold = ptr.To[int32](3)
	}
}

// SetDefaults_FileProbe defaults the file probe: a minute tolerates a writer
// that touches its file every 10-30 s.
func SetDefaults_FileProbe(obj *configv1alpha1.FileProbe) {
	setDuration(&obj.MaxAge, time.Minute)
}

// SetDefaults_UpdateOperatorConfiguration sets the update operator's
// defaults.
func SetDefaults_UpdateOperatorConfiguration(obj *configv1alpha1.UpdateOperatorConfiguration) {
	setLeaderElectionDefaults(&obj.LeaderElection, DefaultOperatorLeaderElectionName)
	setClientConnectionDefaults(&obj.ClientConnection, 20, 40)
	setDebuggingOff(&obj.Debugging)
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
	setServingDefaults(&obj.Serving, "0.0.0.0:8080", "0.0.0.0:8081")

	if obj.ManagedNodeSelector == nil {
		obj.ManagedNodeSelector = &metav1.LabelSelector{
			MatchLabels: map[string]string{DefaultUpdaterInterfaceVersionLabel: DefaultUpdaterInterfaceVersionValue},
		}
	}
	// Download, staging and activation take minutes. The drain happens in
	// RebootedIntoUpdate: the 10 minute drain timeout plus a boot must fit
	// in it.
	setDuration(&obj.StateDeadlines.StagedAndPerformedUpdate, 15*time.Minute)
	setDuration(&obj.StateDeadlines.RebootedIntoUpdate, 30*time.Minute)
	setDuration(&obj.StateDeadlines.MonitoringUpdate, 20*time.Minute)
	// Completing or aborting is a few local calls and one status write; ten
	// minutes is an agent that cannot (crash-looping, no update repository).
	setDuration(&obj.StateDeadlines.ReturnToIdle, 10*time.Minute)
	if obj.ReadinessTaintKey == "" {
		obj.ReadinessTaintKey = nodev1alpha1.DefaultReadinessTaintKey
	}
	setDuration(&obj.Drain.Timeout, 10*time.Minute)
	// A pod without a controller is not recreated once evicted: it blocks
	// the drain and is named, as kubectl drain refuses such a node. An
	// emptyDir does not survive the reboot anyway.
	if obj.Drain.Force == nil {
		obj.Drain.Force = ptr.To(false)
	}
	if obj.Drain.DeleteEmptyDirData == nil {
		obj.Drain.DeleteEmptyDirData = ptr.To(true)
	}
	// The controller's defaults: both must call the same nodes leaving.
	if len(obj.LeavingNodeTaints) == 0 {
		obj.LeavingNodeTaints = nodev1alpha1.DefaultLeavingNodeTaints()
	}
	setDuration(&obj.LifecycleConditionMaxAge, nodev1alpha1.DefaultLifecycleConditionMaxAge)
	// An Alertmanager answers a query of its in-memory alerts in
	// milliseconds; five seconds is one that is down or unreachable.
	for i := range obj.AlertSources {
		setDuration(&obj.AlertSources[i].Timeout, 5*time.Second)
	}
}

// SetDefaults_UpdateAgentConfiguration sets the update agent's defaults.
func SetDefaults_UpdateAgentConfiguration(obj *configv1alpha1.UpdateAgentConfiguration) {
	// Lease renewals and shadow status updates.
	setClientConnectionDefaults(&obj.ClientConnection, 10, 20)
	setDebuggingOff(&obj.Debugging)
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
	setServingDefaults(&obj.Serving, "0.0.0.0:10362", "0.0.0.0:10363")
	if obj.APISocketPath == "" {
		obj.APISocketPath = DefaultBottlerocketAPISocketPath
	}
	// Brupop's agent checks every two minutes too; a refresh is one local
	// call and at most one status write when the offer changed.
	setDuration(&obj.UpdateCheckInterval, 2*time.Minute)
	if obj.ReadinessTaintKey == "" {
		obj.ReadinessTaintKey = nodev1alpha1.DefaultReadinessTaintKey
	}
	// A host that accepted a reboot goes down within seconds; minutes later
	// the request was lost or refused.
	setDuration(&obj.RebootGrace, 3*time.Minute)
	SetDefaults_LeaseSettings(&obj.Lease)
}

func setLeaderElectionDefaults(obj *componentbaseconfigv1alpha1.LeaderElectionConfiguration, name string) {
	// component-base still defaults to the legacy "endpoints" lock; set
	// Leases first, as kube-scheduler does.
	if obj.ResourceLock == "" {
		obj.ResourceLock = "leases"
	}
	if obj.ResourceName == "" {
		obj.ResourceName = name
	}
	if obj.ResourceNamespace == "" {
		obj.ResourceNamespace = DefaultComponentNamespace
	}
	componentbaseconfigv1alpha1.RecommendedDefaultLeaderElectionConfiguration(obj)
}

func setClientConnectionDefaults(obj *componentbaseconfigv1alpha1.ClientConnectionConfiguration, qps float32, burst int32) {
	if obj.QPS == 0 {
		obj.QPS = qps
	}
	if obj.Burst == 0 {
		obj.Burst = burst
	}
	componentbaseconfigv1alpha1.RecommendedDefaultClientConnectionConfiguration(obj)
}

// setDebuggingOff defaults profiling off for every component (component-base
// recommends it on): /debug/pprof is served on the metrics address without
// authentication, and the per-node binaries often run in the host network,
// where it would be reachable by anything that can reach the node. Turn it
// on while investigating (debugging.enableProfiling: true).
func setDebuggingOff(obj *componentbaseconfigv1alpha1.DebuggingConfiguration) {
	if obj.EnableProfiling == nil {
		obj.EnableProfiling = ptr.To(false)
	}
	componentbaseconfigv1alpha1.RecommendedDebuggingConfiguration(obj)
}

func setServingDefaults(obj *configv1alpha1.ServingConfiguration, metrics, healthz string) {
	if obj.MetricsBindAddress == "" {
		obj.MetricsBindAddress = metrics
	}
	if obj.HealthzBindAddress == "" {
		obj.HealthzBindAddress = healthz
	}
	if obj.MetricsAuthentication == "" {
		obj.MetricsAuthentication = configv1alpha1.MetricsAuthenticationNone
	}
}

func setDuration(p **metav1.Duration, d time.Duration) {
	if *p == nil {
		*p = &metav1.Duration{Duration: d}
	}
}
