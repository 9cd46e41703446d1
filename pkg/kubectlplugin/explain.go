package kubectlplugin

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// conditionReasons says in a sentence what each reason of the
// SystemExtensionsReady condition means (pkg/nodehealth/state.go and
// evaluate.go).
var conditionReasons = map[string]string{
	nodev1alpha1.ReasonNodeRegistered:       "the node is new, and a new node waits until every required extension has renewed its Lease",
	nodev1alpha1.ReasonNodeRebooted:         "the node rebooted, and after a reboot every required extension must renew its Lease again",
	nodev1alpha1.ReasonNodeRecreated:        "the node was deleted and created again under the same name, so it waits for its extensions like a new node",
	nodev1alpha1.ReasonControllerStarted:    "the controller (re)started or changed leader and found the node gated; it waits for fresh renewals it observes itself",
	nodev1alpha1.ReasonExtensionsNotReady:   "a required extension stopped being ready after the node had been ready",
	nodev1alpha1.ReasonPlannedMaintenance:   "an extension released its Lease for planned maintenance (for example the OS updater before a reboot); this never escalates to eviction",
	nodev1alpha1.ReasonStartupTimeout:       "an extension did not become ready within the startup timeout of its rule, and the rule keeps the node gated",
	nodev1alpha1.ReasonNodeLeaving:          "the node is leaving the cluster or under someone else's maintenance (its deletionTimestamp is set, it carries a taint of the controller's leavingNodeTaints such as cluster-autoscaler's ToBeDeletedByClusterAutoscaler, or someone else's lifecycle condition says it is drained); the message names the signal. Its pods are going anyway: it is gated, but never escalated to eviction, and counted on neither side of the blast radius",
	nodev1alpha1.ReasonGatingSuspended:      "extensions are not ready, but the controller is not adding failure taints right now (too many failing nodes, or it cannot see its own writes)",
	nodev1alpha1.ReasonExtensionsReady:      "every required extension is ready",
	nodev1alpha1.ReasonNoRequiredExtensions: "the node lists no extension that affects readiness, so it is never gated",
	nodev1alpha1.ReasonNodeExcluded:         "the node is labelled " + nodev1alpha1.ExcludeLabel + "=true; the controller removed its taint and no longer evaluates it",
}

// explain returns, in sentences, why the node is or is not gated.
func explain(n NodeStatus, s evalSettings) []string {
	var x explanation
	x.gate(n, s)
	x.condition(n, s)
	if !n.Excluded {
		x = append(x, explainStartup(n)...)
	}
	if x.list(n) {
		x.extensions(n, s)
	}
	return x
}

// explanation is explain's answer, one sentence or paragraph per line.
type explanation []string

func (x *explanation) say(format string, args ...any) { *x = append(*x, fmt.Sprintf(format, args...)) }

// gate says whether the node carries the readiness taint, and what that does.
func (x *explanation) gate(n NodeStatus, s evalSettings) {
	say := x.say
	if n.Gated {
		effects := make([]string, 0, len(n.TaintEffects))
		noExecute := false
		for _, e := range n.TaintEffects {
			effects = append(effects, taintString(s.taintKey, e))
			noExecute = noExecute || e == corev1.TaintEffectNoExecute
		}
		say("Node %s is gated: it carries the readiness taint %s, so pods that do not tolerate it are not scheduled there.",
			n.Node, strings.Join(effects, " and "))
		if noExecute {
			say("The NoExecute variant is on as well: the controller escalated, and pods that do not tolerate it are evicted once their tolerationSeconds run out.")
		}
	} else {
		say("Node %s is not gated: it does not carry the readiness taint %s.", n.Node, s.taintKey)
	}
	if n.Excluded {
		say("The node is labelled %s=true: the controller removed its taint once and leaves the node alone; nothing below affects it.", nodev1alpha1.ExcludeLabel)
	}
}

// condition says what the controller's condition says.
func (x *explanation) condition(n NodeStatus, s evalSettings) {
	say := x.say
	switch c := n.Condition; {
	case c == nil && n.Gated:
		say("The node has no %s condition, so the controller has not evaluated it yet: the taint was probably placed at creation (kubelet registerWithTaints or the admission policy). Check that nodehealth-controller is running.",
			nodev1alpha1.SystemExtensionsReadyCondition)
	case c == nil:
		say("The node has no %s condition: nodehealth-controller has not evaluated it (is it running, and does it manage this node?).",
			nodev1alpha1.SystemExtensionsReadyCondition)
	default:
		since := ""
		if !c.LastTransitionTime.IsZero() {
			since = " since " + duration.HumanDuration(s.now.Sub(c.LastTransitionTime.Time)) + " ago"
		}
		meaning := conditionReasons[c.Reason]
		if meaning == "" {
			meaning = "see the message"
		}
		say("The controller's condition %s is %s%s, reason %s: %s.", nodev1alpha1.SystemExtensionsReadyCondition, c.Status, since, c.Reason, meaning)
		if c.Message != "" {
			say("Its message: %q", c.Message)
		}
		if n.Gated && c.Status == corev1.ConditionTrue {
			say("The condition says ready but the taint is still on: the controller removes it in its next write; if it stays, check the controller's logs and Events on the node.")
		}
	}
}

// list describes the node's extension list; false when there is nothing
// more to say (a list that cannot be parsed, or an empty one).
func (x *explanation) list(n NodeStatus) bool {
	say := x.say
	if n.ListError != "" {
		say("The extension list (annotation %s) cannot be parsed: %s.", nodev1alpha1.SystemExtensionsAnnotation, n.ListError)
		say("The controller never rewrites a list it cannot parse: it reports InvalidExtensionList and keeps the node's current gate state. Fix or remove the annotation by hand (kubectl annotate node %s %s-), then let the controller's rules add their entries again.",
			n.Node, nodev1alpha1.SystemExtensionsAnnotation)
		return false
	}
	var gating, info []ExtensionStatus
	for _, e := range n.Extensions {
		if e.AffectsReadiness {
			gating = append(gating, e)
		} else {
			info = append(info, e)
		}
	}
	if len(n.Extensions) == 0 {
		say("The node lists no system extensions, so the controller never gates it; a taint placed at creation is removed after the registration grace.")
		return false
	}
	say("It requires %s that %s readiness: %s.", plural(len(gating), "extension"), verb(len(gating), "affects", "affect"), describeList(gating))
	if len(info) > 0 {
		say("%s %s tracked but never gate%s the node: %s.", capitalize(plural(len(info), "more extension")), verb(len(info), "is", "are"), verbSuffix(len(info)), describeList(info))
	}
	return true
}

// extensions says, by this client's estimate, which extensions are not
// ready and why.
func (x *explanation) extensions(n NodeStatus, s evalSettings) {
	say := x.say
	var notReady []ExtensionStatus
	skewed := false
	for _, e := range n.Extensions {
		if e.State != StateReady {
			notReady = append(notReady, e)
		}
		skewed = skewed || e.ClockSkew
	}
	for _, e := range notReady {
		say("%s", explainExtension(e, s))
	}
	ready := len(n.Extensions) - len(notReady)
	switch {
	case len(notReady) == 0:
		say("Every extension looks ready from here (last renewals: %s).", renewals(n.Extensions))
		if n.Gated && !n.Excluded {
			say("A gated node is ungated once the controller has observed a renewal of every required extension after the gate started; that takes up to one renew interval (10s by default). If the taint stays longer, the controller may not be running, or it cannot see these Leases (check its leaseNamespace).")
		}
	case ready > 0:
		say("The other %s ready (last renewals: %s).", verb(ready, "is", "are"), renewals(readyOnly(n.Extensions)))
	}
	if skewed {
		say("Some renewTime is ahead of this machine's clock: a clock is wrong (the extension's node, the API server or this machine). The controller does not compare renewTime with its clock; it uses when it observed each renewal.")
	}
	say("(Ages are estimated from each Lease's renewTime and this machine's clock; the controller's condition is authoritative.)")
}

func explainExtension(e ExtensionStatus, s evalSettings) string {
	who := fmt.Sprintf("%s (%s)", e.Name, describeSource(e.Source))
	impact := "; it does not affect readiness"
	if e.AffectsReadiness {
		impact = "; this keeps the node gated"
	}
	switch e.State {
	case StateLeaseMissing:
		return fmt.Sprintf("%s is not ready: its Lease %s does not exist, so the extension's heartbeat never ran on this node or cannot write the Lease (check that its DaemonSet tolerates %s, and its RBAC and token: deploy/extensions/)%s.",
			who, e.Lease, s.taintKey, impact)
	case StateLeaseReleased:
		why := ""
		if e.Reason != "" {
			why = " with reason " + e.Reason
		}
		if e.Message != "" {
			why += fmt.Sprintf(" (%q)", e.Message)
		}
		return fmt.Sprintf("%s is not ready: its Lease %s was released%s, which is how an extension asks to be treated as not ready at once%s.", who, e.Lease, why, impact)
	case StateNeverRenewed:
		return fmt.Sprintf("%s is not ready: its Lease %s exists but was never renewed (no renewTime)%s.", who, e.Lease, impact)
	case StateLeaseExpired:
		return fmt.Sprintf("%s is not ready: its Lease %s was last renewed %s ago by %s, longer than its duration %s plus the controller's grace %s%s.",
			who, e.Lease, ageString(e), orNone(e.Holder), leaseDuration(e), s.renewalGrace, impact)
	}
	return fmt.Sprintf("%s: %s.", who, e.State)
}

func describeList(list []ExtensionStatus) string {
	if len(list) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(list))
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s (%s)", e.Name, describeSource(e.Source)))
	}
	return strings.Join(parts, ", ")
}

func describeSource(source string) string {
	if rule, ok := nodev1alpha1.RuleFromSource(source); ok {
		return "from rule " + rule
	}
	if source == nodev1alpha1.SourceLease {
		return "self-registered by its Lease"
	}
	return "registered by hand"
}

func renewals(list []ExtensionStatus) string {
	parts := make([]string, 0, len(list))
	for _, e := range list {
		parts = append(parts, e.Name+" "+ageString(e)+" ago")
	}
	return strings.Join(parts, ", ")
}

func readyOnly(list []ExtensionStatus) []ExtensionStatus {
	var out []ExtensionStatus
	for _, e := range list {
		if e.State == StateReady {
			out = append(out, e)
		}
	}
	return out
}

func ageString(e ExtensionStatus) string {
	if e.LastRenewalSeconds == nil {
		return "never"
	}
	if e.ClockSkew {
		return "-" + duration.HumanDuration(time.Duration(-*e.LastRenewalSeconds)*time.Second)
	}
	return duration.HumanDuration(time.Duration(*e.LastRenewalSeconds) * time.Second)
}

func leaseDuration(e ExtensionStatus) time.Duration {
	if e.LeaseDurationSeconds > 0 {
		return time.Duration(e.LeaseDurationSeconds) * time.Second
	}
	return defaultLeaseDuration
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func verbSuffix(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
