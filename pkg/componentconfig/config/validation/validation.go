// Package validation validates the internal nodehealth configuration. Every
// error carries the field path as written in the file (e.g.
// extensionRules[0].nodeSelector), so that a refused start points at the
// line to fix.
package validation

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	componentbaseconfig "k8s.io/component-base/config"
	componentbasevalidation "k8s.io/component-base/config/validation"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
)

// ValidateNodeHealthControllerConfiguration validates the controller's
// configuration. Logging is validated (and applied) by the options layer,
// because that needs the feature gate.
func ValidateNodeHealthControllerConfiguration(c *config.NodeHealthControllerConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateLeaderElection(&c.LeaderElection, field.NewPath("leaderElection"))...)
	errs = append(errs, validateClientConnection(&c.ClientConnection, field.NewPath("clientConnection"))...)
	errs = append(errs, validateServing(&c.Serving, field.NewPath("serving"))...)
	errs = append(errs, validateNamespace(c.LeaseNamespace, field.NewPath("leaseNamespace"))...)
	errs = append(errs, validateReadinessTaint(c.Taint, field.NewPath("taint"))...)
	errs = append(errs, validateExtensionRules(c.ExtensionRules, field.NewPath("extensionRules"))...)
	errs = append(errs, validateNonNegativeDuration(c.RenewalGrace, field.NewPath("renewalGrace"))...)
	errs = append(errs, validateNonNegativeDuration(c.RegistrationGrace, field.NewPath("registrationGrace"))...)
	errs = append(errs, validateCanary(c)...)
	errs = append(errs, validateMaintenanceReasons(c.MaintenanceReasons, field.NewPath("maintenanceReasons"))...)
	errs = append(errs, validateLeavingNodeTaints(c.LeavingNodeTaints, c.Taint.Key, field.NewPath("leavingNodeTaints"))...)
	errs = append(errs, validateNonNegativeDuration(c.LifecycleConditionMaxAge, field.NewPath("lifecycleConditionMaxAge"))...)
	errs = append(errs, validateEviction(c.Eviction, field.NewPath("eviction"))...)
	blastPath := field.NewPath("blastRadius")
	errs = append(errs, validatePercent(c.BlastRadius.ClusterThresholdPercent, blastPath.Child("clusterThresholdPercent"))...)
	errs = append(errs, validatePercent(c.BlastRadius.ZoneThresholdPercent, blastPath.Child("zoneThresholdPercent"))...)
	if c.Workers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("workers"), c.Workers, "must be at least 1"))
	}
	return errs
}

func validateReadinessTaint(t config.TaintConfiguration, taintPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(t.Key) {
		errs = append(errs, field.Invalid(taintPath.Child("key"), t.Key, msg))
	}
	switch t.Effect {
	case config.TaintEffectNoSchedule, config.TaintEffectPreferNoSchedule:
	case "NoExecute":
		errs = append(errs, field.Invalid(taintPath.Child("effect"), t.Effect,
			"not supported for the readiness taint; use eviction.mode NoExecute to evict the pods of failed nodes"))
	default:
		errs = append(errs, field.NotSupported(taintPath.Child("effect"), t.Effect,
			[]string{string(config.TaintEffectNoSchedule), string(config.TaintEffectPreferNoSchedule)}))
	}
	return errs
}

func validateExtensionRules(rules []config.ExtensionRule, rulesPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range rules {
		rulePath := rulesPath.Index(i)
		errs = append(errs, validateExtensionRule(&rules[i], rulePath)...)
		name := rules[i].Name
		if names.Has(name) {
			errs = append(errs, field.Duplicate(rulePath.Child("name"), name))
		}
		names.Insert(name)
	}
	return errs
}

func validateMaintenanceReasons(rs []string, reasonsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	reasons := sets.New[string]()
	for i, r := range rs {
		switch {
		case r == "":
			errs = append(errs, field.Required(reasonsPath.Index(i), "a reason must not be empty"))
		case strings.ContainsAny(r, " \t\n"):
			errs = append(errs, field.Invalid(reasonsPath.Index(i), r, "must be a single word, like the reasons of Kubernetes conditions"))
		case reasons.Has(r):
			errs = append(errs, field.Duplicate(reasonsPath.Index(i), r))
		}
		reasons.Insert(r)
	}
	return errs
}

func validateLeavingNodeTaints(keys []string, readinessTaintKey string, taintsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	leaving := sets.New[string]()
	for i, key := range keys {
		for _, msg := range utilvalidation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(taintsPath.Index(i), key, msg))
		}
		switch {
		case key == readinessTaintKey:
			// Every gated node would be leaving: nothing would ever count
			// as failing.
			errs = append(errs, field.Invalid(taintsPath.Index(i), key, "must not be the readiness taint (taint.key)"))
		case leaving.Has(key):
			errs = append(errs, field.Duplicate(taintsPath.Index(i), key))
		}
		leaving.Insert(key)
	}
	return errs
}

func validateEviction(e config.EvictionConfiguration, evictionPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch e.Mode {
	case config.EvictionModeEvict, config.EvictionModeNoExecute, config.EvictionModeNone:
	default:
		errs = append(errs, field.NotSupported(evictionPath.Child("mode"), e.Mode,
			[]string{string(config.EvictionModeEvict), string(config.EvictionModeNoExecute), string(config.EvictionModeNone)}))
	}
	errs = append(errs, validateNonNegativeDuration(e.Timeout, evictionPath.Child("timeout"))...)
	if r := e.NodesPerSecond; !(r > 0) || math.IsInf(r, 0) {
		errs = append(errs, field.Invalid(evictionPath.Child("nodesPerSecond"), r, "must be greater than zero; use mode None to never evict"))
	}
	// Asking for more evictions with a mode that never evicts through the
	// Eviction API is a mistake, most likely a configuration written when
	// Evict was the default: say so instead of quietly never evicting.
	if e.Mode != config.EvictionModeEvict {
		if e.Force {
			errs = append(errs, field.Invalid(evictionPath.Child("force"), true, "only applies to mode Evict; set mode: Evict (escalation is opt-in)"))
		}
		if e.DeleteEmptyDirData {
			errs = append(errs, field.Invalid(evictionPath.Child("deleteEmptyDirData"), true, "only applies to mode Evict; set mode: Evict (escalation is opt-in)"))
		}
	}
	return errs
}

// canaryIntervals is how many canary intervals pass unobserved before the
// controller stops trusting its view (pkg/nodehealth).
const canaryIntervals = 3

// validateCanary checks that the own-view guard fires before a healthy Lease
// can expire in a stall: every renewer renews at least every quarter of its
// duration, so a Lease of minimumLeaseDuration may be renewed a quarter of it
// before the stall and expire 3/4 × minimumLeaseDuration + renewalGrace into
// it; 3 × canaryInterval must be less (docs/controller.md).
func validateCanary(c *config.NodeHealthControllerConfiguration) field.ErrorList {
	var errs field.ErrorList
	intervalPath, minPath := field.NewPath("canaryInterval"), field.NewPath("minimumLeaseDuration")
	if c.CanaryInterval.Duration <= 0 {
		errs = append(errs, field.Invalid(intervalPath, c.CanaryInterval.Duration.String(), "must be greater than zero"))
	}
	if c.MinimumLeaseDuration.Duration < time.Second {
		errs = append(errs, field.Invalid(minPath, c.MinimumLeaseDuration.Duration.String(), "must be at least 1s (Lease durations are whole seconds)"))
	}
	if len(errs) > 0 {
		return errs
	}
	if guard, expiry := canaryIntervals*c.CanaryInterval.Duration, c.MinimumLeaseDuration.Duration*3/4+c.RenewalGrace.Duration; guard >= expiry {
		errs = append(errs, field.Invalid(intervalPath, c.CanaryInterval.Duration.String(), fmt.Sprintf(
			"3 × canaryInterval (%s) must be less than 3/4 × minimumLeaseDuration + renewalGrace (3/4 × %s + %s = %s): a Lease renewed a quarter of its duration before a stall (the longest renew interval a heartbeat accepts) expires that long into it, and the controller must notice it cannot see its own writes first; shorten canaryInterval or lengthen minimumLeaseDuration",
			guard, c.MinimumLeaseDuration.Duration, c.RenewalGrace.Duration, expiry)))
	}
	return errs
}

func validateExtensionRule(r *config.ExtensionRule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateExtensionName(r.Name, path.Child("name"))...)
	if r.NodeSelector == nil {
		errs = append(errs, field.Required(path.Child("nodeSelector"), "use {} to select every node"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(r.NodeSelector, metav1validation.LabelSelectorValidationOptions{}, path.Child("nodeSelector"))...)
	}
	errs = append(errs, validateLeaseNameTemplate(r.LeaseNameTemplate, r.Name, path.Child("leaseNameTemplate"))...)
	errs = append(errs, validateNonNegativeDuration(r.StartupTimeout, path.Child("startupTimeout"))...)
	switch r.FailurePolicy {
	case config.FailurePolicyKeepGated, config.FailurePolicyUngate:
	default:
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), r.FailurePolicy,
			[]string{string(config.FailurePolicyKeepGated), string(config.FailurePolicyUngate)}))
	}
	return errs
}

// validateLeaseNameTemplate checks that the template gives every node its own
// valid Lease name.
func validateLeaseNameTemplate(tmpl, extension string, path *field.Path) field.ErrorList {
	if !strings.Contains(tmpl, config.LeaseNameNodePlaceholder) {
		return field.ErrorList{field.Invalid(path, tmpl, "must contain "+config.LeaseNameNodePlaceholder+" so that every node has its own Lease")}
	}
	rest := strings.ReplaceAll(strings.ReplaceAll(tmpl, config.LeaseNameNodePlaceholder, ""), config.LeaseNameExtensionPlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return field.ErrorList{field.Invalid(path, tmpl, "only the placeholders {extension} and {node} are supported")}
	}
	sample := RenderLeaseName(tmpl, extension, "node-1.example")
	if msgs := utilvalidation.IsDNS1123Subdomain(sample); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, tmpl, fmt.Sprintf("must give a valid Lease name (for node %q it gives %q: %s)", "node-1.example", sample, strings.Join(msgs, "; ")))}
	}
	// The admission policy in deploy/ lets a node's extensions write only
	// Leases whose name, after the first dot, is exactly their node's name;
	// any other shape would deny every renewal.
	if dot := strings.Index(sample, "."); dot <= 0 || sample[dot+1:] != "node-1.example" {
		return field.ErrorList{field.Invalid(path, tmpl, fmt.Sprintf(
			"must have the form <prefix without dots>.{node} (for node %q it gives %q): the admission policy admits a Lease only when the part after its first dot is the node's name",
			"node-1.example", sample))}
	}
	return nil
}

// RenderLeaseName expands a lease name template.
func RenderLeaseName(tmpl, extension, node string) string {
	return strings.NewReplacer(config.LeaseNameExtensionPlaceholder, extension, config.LeaseNameNodePlaceholder, node).Replace(tmpl)
}

// ValidateExtensionHeartbeatConfiguration validates the heartbeat's
// configuration.
func ValidateExtensionHeartbeatConfiguration(c *config.ExtensionHeartbeatConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateClientConnection(&c.ClientConnection, field.NewPath("clientConnection"))...)
	errs = append(errs, validatePlainServing(&c.Serving, field.NewPath("serving"))...)
	errs = append(errs, validateExtensionName(c.ExtensionName, field.NewPath("extensionName"))...)
	errs = append(errs, validateLeaseSettings(&c.Lease, field.NewPath("lease"))...)
	errs = append(errs, validateProbe(&c.Probe, field.NewPath("probe"))...)
	if !c.Register && !c.AffectsReadiness {
		errs = append(errs, field.Invalid(field.NewPath("affectsReadiness"), false,
			"only takes effect with register: true; for a listed extension set affectsReadiness where it is listed (e.g. the controller's rule)"))
	}
	return errs
}

func validateProbe(p *config.ProbeConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	if p.HTTP != nil {
		set++
		errs = append(errs, validateHTTPProbe(p.HTTP, path.Child("http"))...)
	}
	if p.TCP != nil {
		set++
		errs = append(errs, validateHostPort(p.TCP.Address, path.Child("tcp", "address"))...)
	}
	if p.GRPC != nil {
		set++
		errs = append(errs, validateHostPort(p.GRPC.Address, path.Child("grpc", "address"))...)
	}
	if p.File != nil {
		set++
		if p.File.Path == "" {
			errs = append(errs, field.Required(path.Child("file", "path"), ""))
		}
		errs = append(errs, validatePositiveDuration(p.File.MaxAge, path.Child("file", "maxAge"))...)
	}
	if set != 1 {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("%d probe kinds", set), "exactly one of http, tcp, grpc and file must be set"))
	}
	errs = append(errs, validatePositiveDuration(p.Period, path.Child("period"))...)
	errs = append(errs, validatePositiveDuration(p.Timeout, path.Child("timeout"))...)
	if p.Timeout.Duration > p.Period.Duration && p.Period.Duration > 0 {
		errs = append(errs, field.Invalid(path.Child("timeout"), p.Timeout.Duration.String(), "must not be longer than period"))
	}
	if p.SuccessThreshold < 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be at least 1"))
	}
	if p.FailureThreshold < 1 {
		errs = append(errs, field.Invalid(path.Child("failureThreshold"), p.FailureThreshold, "must be at least 1"))
	}
	return errs
}

func validateHTTPProbe(p *config.HTTPProbe, path *field.Path) field.ErrorList {
	if p.URL == "" {
		return field.ErrorList{field.Required(path.Child("url"), "")}
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("url"), p.URL, err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "http" && u.Scheme != "https" {
		errs = append(errs, field.Invalid(path.Child("url"), p.URL, "must be an absolute http:// or https:// URL"))
	} else if u.Host == "" {
		errs = append(errs, field.Invalid(path.Child("url"), p.URL, "must name a host"))
	}
	if u.Scheme != "https" && (p.CAFile != "" || p.InsecureSkipTLSVerify) {
		errs = append(errs, field.Invalid(path, p.URL, "caFile and insecureSkipTLSVerify only apply to https:// URLs"))
	}
	if p.CAFile != "" && p.InsecureSkipTLSVerify {
		errs = append(errs, field.Invalid(path.Child("insecureSkipTLSVerify"), true, "cannot be combined with caFile"))
	}
	return errs
}

// ValidateUpdateOperatorConfiguration validates the update operator's
// configuration.
func ValidateUpdateOperatorConfiguration(c *config.UpdateOperatorConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateLeaderElection(&c.LeaderElection, field.NewPath("leaderElection"))...)
	errs = append(errs, validateClientConnection(&c.ClientConnection, field.NewPath("clientConnection"))...)
	errs = append(errs, validateServing(&c.Serving, field.NewPath("serving"))...)
	if c.ManagedNodeSelector == nil {
		errs = append(errs, field.Required(field.NewPath("managedNodeSelector"), "use {} to manage every node"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(c.ManagedNodeSelector, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("managedNodeSelector"))...)
	}
	deadlinesPath := field.NewPath("stateDeadlines")
	errs = append(errs, validatePositiveDuration(c.StateDeadlines.StagedAndPerformedUpdate, deadlinesPath.Child("stagedAndPerformedUpdate"))...)
	errs = append(errs, validatePositiveDuration(c.StateDeadlines.RebootedIntoUpdate, deadlinesPath.Child("rebootedIntoUpdate"))...)
	errs = append(errs, validatePositiveDuration(c.StateDeadlines.MonitoringUpdate, deadlinesPath.Child("monitoringUpdate"))...)
	errs = append(errs, validatePositiveDuration(c.StateDeadlines.ReturnToIdle, deadlinesPath.Child("returnToIdle"))...)
	for _, msg := range utilvalidation.IsQualifiedName(c.ReadinessTaintKey) {
		errs = append(errs, field.Invalid(field.NewPath("readinessTaintKey"), c.ReadinessTaintKey, msg))
	}
	timeoutPath := field.NewPath("drain", "timeout")
	errs = append(errs, validatePositiveDuration(c.Drain.Timeout, timeoutPath)...)
	// The drain runs in RebootedIntoUpdate: a timeout the deadline cannot
	// hold would fail every blocked drain as DeadlineExceeded, never
	// naming what blocks it.
	if d := c.Drain.Timeout.Duration; d > 0 && d >= c.StateDeadlines.RebootedIntoUpdate.Duration {
		errs = append(errs, field.Invalid(timeoutPath, c.Drain.Timeout.Duration.String(),
			fmt.Sprintf("must be shorter than stateDeadlines.rebootedIntoUpdate (%s), which also holds the reboot and the boot", c.StateDeadlines.RebootedIntoUpdate.Duration)))
	}
	taintsPath := field.NewPath("leavingNodeTaints")
	leaving := sets.New[string]()
	for i, key := range c.LeavingNodeTaints {
		for _, msg := range utilvalidation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(taintsPath.Index(i), key, msg))
		}
		switch {
		case key == c.ReadinessTaintKey:
			// Every node the operator drains carries it: each update in
			// flight would also count as someone else's.
			errs = append(errs, field.Invalid(taintsPath.Index(i), key, "must not be the readiness taint (readinessTaintKey)"))
		case leaving.Has(key):
			errs = append(errs, field.Duplicate(taintsPath.Index(i), key))
		}
		leaving.Insert(key)
	}
	errs = append(errs, validateNonNegativeDuration(c.LifecycleConditionMaxAge, field.NewPath("lifecycleConditionMaxAge"))...)
	errs = append(errs, validateAlertSources(c.AlertSources, field.NewPath("alertSources"))...)
	errs = append(errs, validateUpdateHooks(c.Hooks, field.NewPath("hooks"))...)
	return errs
}

// validateUpdateHooks checks where the hooks' Jobs run: both fields or
// neither, since a namespace without its service account would run the
// hooks as the namespace's default one, which nobody chose.
func validateUpdateHooks(h config.UpdateHooks, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case h.Namespace == "" && h.ServiceAccountName == "":
		return nil
	case h.Namespace == "":
		errs = append(errs, field.Required(path.Child("namespace"), "set together with serviceAccountName"))
	case h.ServiceAccountName == "":
		errs = append(errs, field.Required(path.Child("serviceAccountName"), "set together with namespace"))
	}
	if h.Namespace != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(h.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), h.Namespace, msg))
		}
	}
	if h.ServiceAccountName != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(h.ServiceAccountName) {
			errs = append(errs, field.Invalid(path.Child("serviceAccountName"), h.ServiceAccountName, msg))
		}
	}
	return errs
}

// validateAlertSources checks the Alertmanagers policies may name: each a
// unique DNS label (what a policy's source is checked against) and an http
// or https URL with a host.
func validateAlertSources(sources []config.AlertSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, s := range sources {
		p := path.Index(i)
		for _, msg := range utilvalidation.IsDNS1123Label(s.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
		}
		if names.Has(s.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), s.Name))
		}
		names.Insert(s.Name)
		u, err := url.Parse(s.URL)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("url"), s.URL, err.Error()))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, field.Invalid(p.Child("url"), s.URL, "must be an http or https URL"))
		case u.Host == "":
			errs = append(errs, field.Invalid(p.Child("url"), s.URL, "must name a host"))
		case u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, field.Invalid(p.Child("url"), s.URL, "must have no query or fragment"))
		}
		if s.CAFile != "" && u != nil && u.Scheme == "http" {
			errs = append(errs, field.Invalid(p.Child("caFile"), s.CAFile, "needs an https URL"))
		}
		errs = append(errs, validatePositiveDuration(s.Timeout, p.Child("timeout"))...)
	}
	return errs
}

// ValidateUpdateAgentConfiguration validates the update agent's
// configuration.
func ValidateUpdateAgentConfiguration(c *config.UpdateAgentConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateClientConnection(&c.ClientConnection, field.NewPath("clientConnection"))...)
	errs = append(errs, validatePlainServing(&c.Serving, field.NewPath("serving"))...)
	if c.APISocketPath == "" {
		errs = append(errs, field.Required(field.NewPath("apiSocketPath"), ""))
	}
	errs = append(errs, validatePositiveDuration(c.UpdateCheckInterval, field.NewPath("updateCheckInterval"))...)
	for _, msg := range utilvalidation.IsQualifiedName(c.ReadinessTaintKey) {
		errs = append(errs, field.Invalid(field.NewPath("readinessTaintKey"), c.ReadinessTaintKey, msg))
	}
	errs = append(errs, validatePositiveDuration(c.RebootGrace, field.NewPath("rebootGrace"))...)
	errs = append(errs, validateLeaseSettings(&c.Lease, field.NewPath("lease"))...)
	return errs
}

// ValidateNodeName validates an instance's node name (from --node-name or
// NODE_NAME) together with the extension it speaks for: the Lease
// <extension>.<node> must be a valid name, and docs/heartbeat.md wants a clear refusal
// rather than truncation when it is too long.
func ValidateNodeName(nodeName, extension string) error {
	if nodeName == "" {
		return fmt.Errorf("the node name is required: set --node-name or the NODE_NAME environment variable (usually from the downward API, spec.nodeName)")
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(nodeName); len(msgs) > 0 {
		return fmt.Errorf("node name %q is invalid: %s", nodeName, strings.Join(msgs, "; "))
	}
	if extension != "" {
		lease := extension + "." + nodeName
		if len(lease) > utilvalidation.DNS1123SubdomainMaxLength {
			return fmt.Errorf("the Lease name %q would be %d characters long, more than the limit of %d for object names; use a shorter extension name",
				lease, len(lease), utilvalidation.DNS1123SubdomainMaxLength)
		}
	}
	return nil
}

func validateLeaseSettings(l *config.LeaseSettings, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNamespace(l.Namespace, path.Child("namespace"))...)
	d := l.Duration.Duration
	switch {
	case d < time.Second:
		errs = append(errs, field.Invalid(path.Child("duration"), d.String(), "must be at least 1s"))
	case d%time.Second != 0:
		errs = append(errs, field.Invalid(path.Child("duration"), d.String(), "must be whole seconds (the Lease stores leaseDurationSeconds)"))
	}
	errs = append(errs, validatePositiveDuration(l.RenewInterval, path.Child("renewInterval"))...)
	// The node-health controller assumes every renewer renews at least every
	// duration/4, as the kubelet renews its node Lease (40s, every 10s): two
	// renewals may then be lost before the Lease expires. The heartbeat
	// library refuses the same (nodehealth.io/heartbeat Options).
	if r := l.RenewInterval.Duration; d > 0 && r > d/4 {
		errs = append(errs, field.Invalid(path.Child("renewInterval"), r.String(),
			fmt.Sprintf("must be at most a quarter of duration (%s / 4 = %s): renew at least every duration/4, as the kubelet does its node Lease", d, d/4)))
	}
	return errs
}

func validateExtensionName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	// A DNS label has no dots: the part of a Lease name after the first dot
	// is the node name (docs/system-extensions.md).
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateNamespace(ns string, path *field.Path) field.ErrorList {
	if ns == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
		errs = append(errs, field.Invalid(path, ns, msg))
	}
	return errs
}

func validateLeaderElection(le *componentbaseconfig.LeaderElectionConfiguration, path *field.Path) field.ErrorList {
	errs := componentbasevalidation.ValidateLeaderElectionConfiguration(le, path)
	if le.LeaderElect && le.ResourceLock != "leases" {
		errs = append(errs, field.NotSupported(path.Child("resourceLock"), le.ResourceLock, []string{"leases"}))
	}
	return errs
}

func validateClientConnection(cc *componentbaseconfig.ClientConnectionConfiguration, path *field.Path) field.ErrorList {
	errs := componentbasevalidation.ValidateClientConnectionConfiguration(cc, path)
	// client-go treats QPS 0 as "use its default" and a negative QPS as "no
	// limit"; neither is what a user who wrote a number meant.
	if cc.QPS <= 0 {
		errs = append(errs, field.Invalid(path.Child("qps"), cc.QPS, "must be greater than zero"))
	}
	if cc.Burst < 1 {
		errs = append(errs, field.Invalid(path.Child("burst"), cc.Burst, "must be at least 1"))
	}
	return errs
}

func validateServing(s *config.ServingConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateHostPort(s.MetricsBindAddress, path.Child("metricsBindAddress"))...)
	errs = append(errs, validateHostPort(s.HealthzBindAddress, path.Child("healthzBindAddress"))...)
	switch s.MetricsAuthentication {
	case "", config.MetricsAuthenticationNone:
	case config.MetricsAuthenticationDelegated:
		if s.MetricsBindAddress == s.HealthzBindAddress {
			errs = append(errs, field.Invalid(path.Child("metricsAuthentication"), s.MetricsAuthentication,
				"Delegated needs metricsBindAddress and healthzBindAddress to differ: the kubelet's probes stay plain HTTP"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("metricsAuthentication"), s.MetricsAuthentication,
			[]string{string(config.MetricsAuthenticationNone), string(config.MetricsAuthenticationDelegated)}))
	}
	switch {
	case (s.TLSCertFile == "") != (s.TLSPrivateKeyFile == ""):
		errs = append(errs, field.Invalid(path.Child("tlsCertFile"), s.TLSCertFile,
			"tlsCertFile and tlsPrivateKeyFile go together: give both or neither"))
	case s.TLSCertFile != "" && s.MetricsAuthentication != config.MetricsAuthenticationDelegated:
		errs = append(errs, field.Invalid(path.Child("tlsCertFile"), s.TLSCertFile,
			"a certificate serves /metrics only when metricsAuthentication is Delegated (None serves plain HTTP)"))
	}
	return errs
}

// validatePlainServing is validateServing for the per-node binaries, which
// serve their metrics plainly (their memory is paid on every node).
func validatePlainServing(s *config.ServingConfiguration, path *field.Path) field.ErrorList {
	errs := validateServing(s, path)
	if s.MetricsAuthentication == config.MetricsAuthenticationDelegated {
		errs = append(errs, field.NotSupported(path.Child("metricsAuthentication"), s.MetricsAuthentication,
			[]string{string(config.MetricsAuthenticationNone)}))
	}
	return errs
}

func validateHostPort(addr string, path *field.Path) field.ErrorList {
	if addr == "" {
		return field.ErrorList{field.Required(path, "must be host:port")}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.ErrorList{field.Invalid(path, addr, "must be host:port")}
	}
	if host != "" && net.ParseIP(host) == nil {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(host) {
			return field.ErrorList{field.Invalid(path, addr, "host must be an IP address or a DNS name: "+msg)}
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return field.ErrorList{field.Invalid(path, addr, "port must be a number from 1 to 65535")}
	}
	return nil
}

func validatePositiveDuration(d metav1.Duration, path *field.Path) field.ErrorList {
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must be greater than zero")}
	}
	return nil
}

func validateNonNegativeDuration(d metav1.Duration, path *field.Path) field.ErrorList {
	if d.Duration < 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must not be negative")}
	}
	return nil
}

func validatePercent(p int32, path *field.Path) field.ErrorList {
	if p < 0 || p > 100 {
		return field.ErrorList{field.Invalid(path, p, "must be a percentage from 0 to 100")}
	}
	return nil
}
