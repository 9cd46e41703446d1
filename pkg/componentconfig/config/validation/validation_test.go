package validation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
)

// Each case breaks one rule of a valid configuration and expects exactly the
// field path (and a piece of the reason) of that rule.
type testCase[T any] struct {
	name     string
	mutate   func(T)
	wantPath string
	wantMsg  string
}

func run[T any](t *testing.T, valid func() T, validate func(T) field.ErrorList, cases []testCase[T]) {
	t.Helper()
	if errs := validate(valid()); len(errs) > 0 {
		t.Fatalf("valid configuration rejected: %v", errs.ToAggregate())
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.mutate(cfg)
			errs := validate(cfg)
			if len(errs) == 0 {
				t.Fatalf("no error, want %s", tc.wantPath)
			}
			for _, e := range errs {
				if e.Field == tc.wantPath && strings.Contains(e.Error(), tc.wantMsg) {
					return
				}
			}
			t.Errorf("want an error at %s containing %q, got %v", tc.wantPath, tc.wantMsg, errs.ToAggregate())
		})
	}
}

func d(s string) metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return metav1.Duration{Duration: v}
}

func validController() *config.NodeHealthControllerConfiguration {
	c, err := latest.NodeHealthControllerConfiguration()
	if err != nil {
		panic(err)
	}
	c.ExtensionRules = []config.ExtensionRule{{
		Name: "kube-proxy", NodeSelector: &metav1.LabelSelector{}, LeaseNameTemplate: "{extension}.{node}",
		AffectsReadiness: true, StartupTimeout: d("10m"), FailurePolicy: config.FailurePolicyKeepGated,
	}}
	return c
}

func TestValidateNodeHealthControllerConfiguration(t *testing.T) {
	type C = *config.NodeHealthControllerConfiguration
	run(t, validController, ValidateNodeHealthControllerConfiguration, []testCase[C]{
		{"leader election lease", func(c C) { c.LeaderElection.LeaseDuration = d("0s") }, "leaderElection.leaseDuration", "greater than zero"},
		{"leader election lock", func(c C) { c.LeaderElection.ResourceLock = "endpoints" }, "leaderElection.resourceLock", "Unsupported value"},
		{"qps", func(c C) { c.ClientConnection.QPS = 0 }, "clientConnection.qps", "greater than zero"},
		{"burst", func(c C) { c.ClientConnection.Burst = 0 }, "clientConnection.burst", "at least 1"},
		{"metrics address", func(c C) { c.Serving.MetricsBindAddress = "8080" }, "serving.metricsBindAddress", "host:port"},
		{"healthz port", func(c C) { c.Serving.HealthzBindAddress = ":99999" }, "serving.healthzBindAddress", "1 to 65535"},
		{"metrics authentication", func(c C) { c.Serving.MetricsAuthentication = "Token" }, "serving.metricsAuthentication", "Unsupported value"},
		{"delegated metrics beside the probes", func(c C) {
			c.Serving.MetricsAuthentication = config.MetricsAuthenticationDelegated
			c.Serving.HealthzBindAddress = c.Serving.MetricsBindAddress
		}, "serving.metricsAuthentication", "differ"},
		{"a certificate without its key", func(c C) {
			c.Serving.MetricsAuthentication = config.MetricsAuthenticationDelegated
			c.Serving.TLSCertFile = "/etc/nodehealth/tls/tls.crt"
		}, "serving.tlsCertFile", "both or neither"},
		{"a certificate for plain metrics", func(c C) {
			c.Serving.TLSCertFile, c.Serving.TLSPrivateKeyFile = "/etc/nodehealth/tls/tls.crt", "/etc/nodehealth/tls/tls.key"
		}, "serving.tlsCertFile", "only when metricsAuthentication is Delegated"},
		{"lease namespace", func(c C) { c.LeaseNamespace = "Not_A_Namespace" }, "leaseNamespace", "Invalid value"},
		{"lease namespace empty", func(c C) { c.LeaseNamespace = "" }, "leaseNamespace", "Required"},
		{"taint key", func(c C) { c.Taint.Key = "not a key" }, "taint.key", "Invalid value"},
		{"taint effect NoExecute", func(c C) { c.Taint.Effect = "NoExecute" }, "taint.effect", "eviction.mode NoExecute"},
		{"taint effect", func(c C) { c.Taint.Effect = "Sometimes" }, "taint.effect", "Unsupported value"},
		{"rule name", func(c C) { c.ExtensionRules[0].Name = "kube.proxy" }, "extensionRules[0].name", "dots"},
		{"rule name empty", func(c C) { c.ExtensionRules[0].Name = "" }, "extensionRules[0].name", "Required"},
		{"rule duplicate", func(c C) { c.ExtensionRules = append(c.ExtensionRules, c.ExtensionRules[0]) }, "extensionRules[1].name", "Duplicate"},
		{"rule selector missing", func(c C) { c.ExtensionRules[0].NodeSelector = nil }, "extensionRules[0].nodeSelector", "Required"},
		{"rule selector invalid", func(c C) {
			c.ExtensionRules[0].NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, "extensionRules[0].nodeSelector.matchExpressions[0].operator", "not a valid selector operator"},
		{"lease template without node", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "{extension}" }, "extensionRules[0].leaseNameTemplate", "{node}"},
		{"lease template unknown placeholder", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "{zone}.{node}" }, "extensionRules[0].leaseNameTemplate", "placeholders"},
		{"lease template invalid name", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "Ext_{node}" }, "extensionRules[0].leaseNameTemplate", "valid Lease name"},
		{"lease template without a dot", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "{extension}-{node}" }, "extensionRules[0].leaseNameTemplate", "<prefix without dots>.{node}"},
		{"lease template node not last", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "{extension}.{node}.x" }, "extensionRules[0].leaseNameTemplate", "after its first dot"},
		{"lease template dotted prefix", func(c C) { c.ExtensionRules[0].LeaseNameTemplate = "a.{extension}.{node}" }, "extensionRules[0].leaseNameTemplate", "after its first dot"},
		{"startup timeout", func(c C) { c.ExtensionRules[0].StartupTimeout = d("-1s") }, "extensionRules[0].startupTimeout", "negative"},
		{"failure policy", func(c C) { c.ExtensionRules[0].FailurePolicy = "Retry" }, "extensionRules[0].failurePolicy", "Unsupported value"},
		{"renewal grace", func(c C) { c.RenewalGrace = d("-1s") }, "renewalGrace", "negative"},
		{"registration grace", func(c C) { c.RegistrationGrace = d("-1s") }, "registrationGrace", "negative"},
		{"canary interval zero", func(c C) { c.CanaryInterval = d("0s") }, "canaryInterval", "greater than zero"},
		{"minimum lease duration", func(c C) { c.MinimumLeaseDuration = d("500ms") }, "minimumLeaseDuration", "at least 1s"},
		// 3 × 5s = 15s is not less than 5s + 10s.
		{"canary slower than the shortest lease", func(c C) { c.MinimumLeaseDuration = d("5s") }, "canaryInterval", "3 × canaryInterval (15s) must be less than 3/4 × minimumLeaseDuration + renewalGrace (3/4 × 5s + 10s = 13.75s)"},
		// Accepted before issue 33 (15s < 10s + 6s), although a 10s Lease
		// renewed 2.5s before a stall expires 13.5s into it.
		{"canary slower than a lease renewed a quarter of its duration before the stall", func(c C) { c.RenewalGrace = d("6s") }, "canaryInterval", "3/4 × 10s + 6s = 13.5s"},
		{"canary slower than the shortest lease with a short grace", func(c C) { c.RenewalGrace = d("4s") }, "canaryInterval", "must be less than"},
		{"maintenance reason empty", func(c C) { c.MaintenanceReasons = []string{""} }, "maintenanceReasons[0]", "Required"},
		{"maintenance reason words", func(c C) { c.MaintenanceReasons = []string{"OS update"} }, "maintenanceReasons[0]", "single word"},
		{"maintenance reason duplicate", func(c C) { c.MaintenanceReasons = []string{"Updating", "Updating"} }, "maintenanceReasons[1]", "Duplicate"},
		{"leaving taint not a qualified name", func(c C) { c.LeavingNodeTaints = []string{"to be deleted"} }, "leavingNodeTaints[0]", "name part must consist"},
		{"leaving taint duplicate", func(c C) { c.LeavingNodeTaints = []string{"karpenter.sh/disrupted", "karpenter.sh/disrupted"} }, "leavingNodeTaints[1]", "Duplicate"},
		{"leaving taint is the readiness taint", func(c C) { c.LeavingNodeTaints = []string{c.Taint.Key} }, "leavingNodeTaints[0]", "must not be the readiness taint"},
		{"lifecycle condition max age", func(c C) { c.LifecycleConditionMaxAge = d("-1s") }, "lifecycleConditionMaxAge", "negative"},
		{"eviction mode", func(c C) { c.Eviction.Mode = "Delete" }, "eviction.mode", "Unsupported value"},
		{"eviction timeout", func(c C) { c.Eviction.Timeout = d("-1s") }, "eviction.timeout", "negative"},
		{"eviction rate", func(c C) { c.Eviction.NodesPerSecond = 0 }, "eviction.nodesPerSecond", "mode None"},
		// The defaulted mode None with an override: written for the old
		// default Evict, it would quietly never evict.
		{"force without Evict", func(c C) { c.Eviction.Mode, c.Eviction.Force = config.EvictionModeNone, true }, "eviction.force", "only applies to mode Evict"},
		{"deleteEmptyDirData with NoExecute", func(c C) { c.Eviction.Mode, c.Eviction.DeleteEmptyDirData = config.EvictionModeNoExecute, true }, "eviction.deleteEmptyDirData", "only applies to mode Evict"},
		{"cluster threshold", func(c C) { c.BlastRadius.ClusterThresholdPercent = -1 }, "blastRadius.clusterThresholdPercent", "0 to 100"},
		{"zone threshold", func(c C) { c.BlastRadius.ZoneThresholdPercent = 101 }, "blastRadius.zoneThresholdPercent", "0 to 100"},
		{"workers", func(c C) { c.Workers = 0 }, "workers", "at least 1"},
	})
}

func validHeartbeat() *config.ExtensionHeartbeatConfiguration {
	c, err := latest.ExtensionHeartbeatConfiguration()
	if err != nil {
		panic(err)
	}
	c.ExtensionName = "kube-proxy"
	c.Probe.HTTP = &config.HTTPProbe{URL: "http://127.0.0.1:10256/healthz"}
	return c
}

func TestValidateExtensionHeartbeatConfiguration(t *testing.T) {
	type C = *config.ExtensionHeartbeatConfiguration
	run(t, validHeartbeat, ValidateExtensionHeartbeatConfiguration, []testCase[C]{
		{"extension name missing", func(c C) { c.ExtensionName = "" }, "extensionName", "Required"},
		{"extension name dots", func(c C) { c.ExtensionName = "a.b" }, "extensionName", "dots"},
		{"lease namespace", func(c C) { c.Lease.Namespace = "" }, "lease.namespace", "Required"},
		{"lease duration short", func(c C) { c.Lease.Duration = d("500ms") }, "lease.duration", "at least 1s"},
		{"lease duration fraction", func(c C) { c.Lease.Duration = d("40.5s") }, "lease.duration", "whole seconds"},
		{"renew interval zero", func(c C) { c.Lease.RenewInterval = d("0s") }, "lease.renewInterval", "greater than zero"},
		{"renew interval long", func(c C) { c.Lease.RenewInterval = d("40s") }, "lease.renewInterval", "at most a quarter of duration"},
		// The controller assumes a renewal at least every duration/4; the
		// error names both values.
		{"renew interval over a quarter", func(c C) { c.Lease.RenewInterval = d("11s") }, "lease.renewInterval",
			`Invalid value: "11s": must be at most a quarter of duration (40s / 4 = 10s)`},
		{"renew interval over a quarter of a short lease", func(c C) { c.Lease.Duration, c.Lease.RenewInterval = d("10s"), d("3s") }, "lease.renewInterval",
			`Invalid value: "3s": must be at most a quarter of duration (10s / 4 = 2.5s)`},
		{"no probe", func(c C) { c.Probe.HTTP = nil }, "probe", "exactly one"},
		{"two probes", func(c C) { c.Probe.TCP = &config.TCPProbe{Address: "127.0.0.1:1"} }, "probe", "exactly one"},
		{"http url missing", func(c C) { c.Probe.HTTP.URL = "" }, "probe.http.url", "Required"},
		{"http url scheme", func(c C) { c.Probe.HTTP.URL = "ftp://x/" }, "probe.http.url", "http:// or https://"},
		{"http url host", func(c C) { c.Probe.HTTP.URL = "http:///healthz" }, "probe.http.url", "host"},
		{"http caFile on http", func(c C) { c.Probe.HTTP.CAFile = "/ca.pem" }, "probe.http", "https://"},
		{"https caFile and insecure", func(c C) {
			c.Probe.HTTP = &config.HTTPProbe{URL: "https://127.0.0.1/", CAFile: "/ca.pem", InsecureSkipTLSVerify: true}
		}, "probe.http.insecureSkipTLSVerify", "caFile"},
		{"tcp address", func(c C) { c.Probe.HTTP, c.Probe.TCP = nil, &config.TCPProbe{Address: "localhost"} }, "probe.tcp.address", "host:port"},
		{"grpc address", func(c C) { c.Probe.HTTP, c.Probe.GRPC = nil, &config.GRPCProbe{Address: ""} }, "probe.grpc.address", "Required"},
		{"file path", func(c C) { c.Probe.HTTP, c.Probe.File = nil, &config.FileProbe{MaxAge: d("1m")} }, "probe.file.path", "Required"},
		{"file max age", func(c C) { c.Probe.HTTP, c.Probe.File = nil, &config.FileProbe{Path: "/x"} }, "probe.file.maxAge", "greater than zero"},
		{"period", func(c C) { c.Probe.Period = d("0s") }, "probe.period", "greater than zero"},
		{"timeout", func(c C) { c.Probe.Timeout = d("0s") }, "probe.timeout", "greater than zero"},
		{"timeout longer than period", func(c C) { c.Probe.Timeout = d("11s") }, "probe.timeout", "period"},
		{"success threshold", func(c C) { c.Probe.SuccessThreshold = 0 }, "probe.successThreshold", "at least 1"},
		{"failure threshold", func(c C) { c.Probe.FailureThreshold = 0 }, "probe.failureThreshold", "at least 1"},
		{"affectsReadiness without register", func(c C) { c.AffectsReadiness = false }, "affectsReadiness", "register: true"},
		{"qps", func(c C) { c.ClientConnection.QPS = -1 }, "clientConnection.qps", "greater than zero"},
		{"serving", func(c C) { c.Serving.HealthzBindAddress = "" }, "serving.healthzBindAddress", "Required"},
		{"delegated metrics on a node", func(c C) { c.Serving.MetricsAuthentication = config.MetricsAuthenticationDelegated }, "serving.metricsAuthentication", "Unsupported value"},
	})
}

// A renew interval of exactly a quarter of the duration is allowed: the
// defaults (40s, 10s) are one.
func TestRenewIntervalOfAQuarterIsValid(t *testing.T) {
	for _, l := range []struct{ duration, renew string }{{"40s", "10s"}, {"10s", "2.5s"}, {"10s", "2s"}, {"120s", "30s"}} {
		c := validHeartbeat()
		c.Lease.Duration, c.Lease.RenewInterval = d(l.duration), d(l.renew)
		if errs := ValidateExtensionHeartbeatConfiguration(c); len(errs) > 0 {
			t.Errorf("duration %s, renew interval %s: %v", l.duration, l.renew, errs.ToAggregate())
		}
	}
}

func validOperator() *config.UpdateOperatorConfiguration {
	c, err := latest.UpdateOperatorConfiguration()
	if err != nil {
		panic(err)
	}
	return c
}

func TestValidateUpdateOperatorConfiguration(t *testing.T) {
	type C = *config.UpdateOperatorConfiguration
	run(t, validOperator, ValidateUpdateOperatorConfiguration, []testCase[C]{
		{"leader election", func(c C) { c.LeaderElection.RetryPeriod = d("0s") }, "leaderElection.retryPeriod", "greater than zero"},
		{"selector missing", func(c C) { c.ManagedNodeSelector = nil }, "managedNodeSelector", "Required"},
		{"selector invalid", func(c C) { c.ManagedNodeSelector.MatchLabels = map[string]string{"a b": "c"} }, "managedNodeSelector.matchLabels", "Invalid value"},
		{"staged deadline", func(c C) { c.StateDeadlines.StagedAndPerformedUpdate = d("0s") }, "stateDeadlines.stagedAndPerformedUpdate", "greater than zero"},
		{"rebooted deadline", func(c C) { c.StateDeadlines.RebootedIntoUpdate = d("0s") }, "stateDeadlines.rebootedIntoUpdate", "greater than zero"},
		{"monitoring deadline", func(c C) { c.StateDeadlines.MonitoringUpdate = d("0s") }, "stateDeadlines.monitoringUpdate", "greater than zero"},
		{"return-to-idle deadline", func(c C) { c.StateDeadlines.ReturnToIdle = d("0s") }, "stateDeadlines.returnToIdle", "greater than zero"},
		{"readiness taint key", func(c C) { c.ReadinessTaintKey = "not a key" }, "readinessTaintKey", "alphanumeric"},
		{"drain timeout", func(c C) { c.Drain.Timeout = d("0s") }, "drain.timeout", "greater than zero"},
		{"drain timeout past the deadline", func(c C) { c.Drain.Timeout = d("30m") }, "drain.timeout", "must be shorter than stateDeadlines.rebootedIntoUpdate (30m0s)"},
		{"leaving taint not a qualified name", func(c C) { c.LeavingNodeTaints = []string{"to be deleted"} }, "leavingNodeTaints[0]", "name part must consist"},
		{"leaving taint duplicate", func(c C) { c.LeavingNodeTaints = []string{"karpenter.sh/disrupted", "karpenter.sh/disrupted"} }, "leavingNodeTaints[1]", "Duplicate"},
		{"leaving taint is the readiness taint", func(c C) { c.LeavingNodeTaints = []string{c.ReadinessTaintKey} }, "leavingNodeTaints[0]", "must not be the readiness taint"},
		{"lifecycle condition max age", func(c C) { c.LifecycleConditionMaxAge = d("-1s") }, "lifecycleConditionMaxAge", "negative"},
		{"alert source name", func(c C) { c.AlertSources = []config.AlertSource{am("Prod_AM", "http://am:9093")} }, "alertSources[0].name", "RFC 1123"},
		{"alert source duplicate", func(c C) {
			c.AlertSources = []config.AlertSource{am("prod", "http://a:9093"), am("prod", "http://b:9093")}
		}, "alertSources[1].name", "Duplicate"},
		{"alert source scheme", func(c C) { c.AlertSources = []config.AlertSource{am("prod", "ftp://am:9093")} }, "alertSources[0].url", "http or https"},
		{"alert source without host", func(c C) { c.AlertSources = []config.AlertSource{am("prod", "http:///api")} }, "alertSources[0].url", "must name a host"},
		{"alert source CA on http", func(c C) {
			s := am("prod", "http://am:9093")
			s.CAFile = "/ca.pem"
			c.AlertSources = []config.AlertSource{s}
		}, "alertSources[0].caFile", "needs an https URL"},
		{"alert source timeout", func(c C) {
			s := am("prod", "https://am:9093")
			s.Timeout = d("0s")
			c.AlertSources = []config.AlertSource{s}
		}, "alertSources[0].timeout", "greater than zero"},
		{"hooks namespace without its service account", func(c C) { c.Hooks.Namespace = "storage-hooks" }, "hooks.serviceAccountName", "Required"},
		{"hooks service account without its namespace", func(c C) { c.Hooks.ServiceAccountName = "ceph-hooks" }, "hooks.namespace", "Required"},
		{"hooks namespace not a DNS label", func(c C) { c.Hooks = config.UpdateHooks{Namespace: "Storage_Hooks", ServiceAccountName: "ceph-hooks"} }, "hooks.namespace", "RFC 1123"},
		{"hooks service account not a DNS subdomain", func(c C) { c.Hooks = config.UpdateHooks{Namespace: "storage-hooks", ServiceAccountName: "Ceph Hooks"} }, "hooks.serviceAccountName", "RFC 1123"},
	})
}

// am is an alert source with the default timeout.
func am(name, url string) config.AlertSource {
	return config.AlertSource{Name: name, URL: url, Timeout: d("5s")}
}

func validAgent() *config.UpdateAgentConfiguration {
	c, err := latest.UpdateAgentConfiguration()
	if err != nil {
		panic(err)
	}
	return c
}

func TestValidateUpdateAgentConfiguration(t *testing.T) {
	type C = *config.UpdateAgentConfiguration
	run(t, validAgent, ValidateUpdateAgentConfiguration, []testCase[C]{
		{"socket", func(c C) { c.APISocketPath = "" }, "apiSocketPath", "Required"},
		{"update check interval", func(c C) { c.UpdateCheckInterval = d("-1m") }, "updateCheckInterval", "greater than zero"},
		{"readiness taint key", func(c C) { c.ReadinessTaintKey = "not a key" }, "readinessTaintKey", "alphanumeric"},
		{"reboot grace", func(c C) { c.RebootGrace = d("0s") }, "rebootGrace", "greater than zero"},
		{"lease", func(c C) { c.Lease.RenewInterval = d("1m") }, "lease.renewInterval", "at most a quarter of duration (40s / 4 = 10s)"},
		{"qps", func(c C) { c.ClientConnection.Burst = 0 }, "clientConnection.burst", "at least 1"},
		{"serving", func(c C) { c.Serving.MetricsBindAddress = "nohost" }, "serving.metricsBindAddress", "host:port"},
	})
}

func TestValidateNodeName(t *testing.T) {
	if err := ValidateNodeName("ip-10-0-0-1.ec2.internal", "kube-proxy"); err != nil {
		t.Error(err)
	}
	if err := ValidateNodeName("", "x"); err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Errorf("empty: %v", err)
	}
	if err := ValidateNodeName("Node_1", "x"); err == nil {
		t.Error("invalid name accepted")
	}
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60)
	if err := ValidateNodeName(long, "kube-proxy"); err == nil || !strings.Contains(err.Error(), "253") {
		t.Errorf("too long Lease name: %v", err)
	}
}
