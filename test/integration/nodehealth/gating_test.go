package nodehealth_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
)

// A node that appears while the controller runs is gated at once (rule
// entries injected in the same write) and ungated only when every required
// extension has renewed: one of two is not enough.
func TestBootstrapGateThenUngate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "boot")
	h.startController(t, h.options(h.rule("cni", nil), h.rule("proxy", nil)))

	node := h.createNode(t, "boot-n1")
	first := h.nodes.wait(t, node, "gated with both rule entries",
		framework.AllOf(gated, listHas("cni", "rule/cni"), listHas("proxy", "rule/proxy")))
	if first.Annotations[nodev1alpha1.BootAnnotation] != "" {
		t.Errorf("a gated node has a boot record: %s", describeNode(first))
	}
	h.nodes.wait(t, node, "condition NodeRegistered naming both extensions",
		framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRegistered", "cni (", "proxy ("))
	gatedAt := h.nodes.mark(node)

	h.startRenewer(t, "cni", node)
	h.nodes.wait(t, node, "only proxy left not ready", framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRegistered", "proxy (", "!cni ("))
	h.nodes.checkHistory(t, node, gatedAt, "gated while proxy never renewed", gated)

	h.startRenewer(t, "proxy", node)
	n := h.nodes.wait(t, node, "ungated with a boot record", readyNode)
	var names []string
	for _, e := range extensionList(t, n, h.leaseNS) {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"cni", "proxy"}) {
		t.Errorf("extension list = %v, want [cni proxy]", names)
	}
	h.nodes.checkHistory(t, node, 0, "one readiness taint at most", noDuplicateTaint)
	h.waitEvent(t, node, nodehealth.EventNodeGated, "new")
	h.waitEvent(t, node, nodehealth.EventNodeUngated)
}

// An extension that stops renewing expires after leaseDurationSeconds +
// renewalGrace of silence, measured by the controller's clock; the node is
// tainted then, and ungated when the extension renews again.
func TestAnExtensionThatStopsRenewingTaintsItsNodeAfterItsDurationAndTheGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "expiry")
	h.startController(t, h.options(h.rule("agent", nil)))
	node := h.createNode(t, "expiry-n1")
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)

	r.stop()
	last := r.lastRenewal()
	_, at := h.nodes.waitAt(t, node, "tainted for the expired extension",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))
	if at.Sub(last) < expiry {
		t.Errorf("tainted %s after the last renewal was sent, before the lease could expire (%s)", at.Sub(last), expiry)
	}
	h.waitEvent(t, node, nodehealth.EventExtensionNotReady, "agent", "LeaseExpired")
	h.waitEvent(t, node, nodehealth.EventNodeGated, "agent")

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated after the extension renewed again", readyNode)
	h.waitEvent(t, node, nodehealth.EventExtensionReady, "agent")
}

// Releasing a Lease (empty holderIdentity) taints at once: the Lease here is
// valid for an hour, so only the release can explain the taint.
func TestAReleasedLeaseTaintsItsNodeAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "release")
	h.startController(t, h.options(h.rule("agent", nil)))
	node := h.createNode(t, "release-n1")
	r := h.startRenewer(t, "agent", node, leaseDuration(3600))
	h.nodes.wait(t, node, "ready", readyNode)

	r.release(t, "ProbeFailed", "liveness probe failed")
	h.nodes.wait(t, node, "tainted for the released extension",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseReleased", "ProbeFailed", "liveness probe failed")))

	h.startRenewer(t, "agent", node, leaseDuration(3600))
	h.nodes.wait(t, node, "ungated after the extension took its Lease again", readyNode)
}

// A reboot (bootID changed) re-gates the node; Leases that are still valid
// from before the reboot do not ungate it, only renewals after it do.
func TestRebootRegatesUntilFreshRenewals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "reboot")
	h.startController(t, h.options(h.rule("agent", nil)))
	node := h.createNode(t, "reboot-n1", unmanaged(), withBootID("boot-a"))
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready in boot-a", framework.AllOf(readyNode, bootRecorded("boot-a")))

	r.stop()
	mark := h.nodes.mark(node)
	h.setBootID(t, node, "boot-b")
	h.nodes.waitSeen(t, node, mark, "re-gated as rebooted", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRebooted")))
	// The Lease renewed before the reboot stays valid for a while; the node
	// must stay gated through that whole window, until it expires.
	h.nodes.wait(t, node, "still gated after the pre-reboot lease expired",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRebooted", "agent (LeaseExpired")))
	h.nodes.checkOnceAlways(t, node, mark, "gated until a fresh renewal", gated, gated)
	h.nodes.checkHistory(t, node, mark, "boot record not rewritten while gated", bootRecorded("boot-a"))

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated with the new boot recorded", framework.AllOf(readyNode, bootRecorded("boot-b")))
	h.waitEvent(t, node, nodehealth.EventNodeGated, "rebooted")
}

// A reboot that happens while no controller runs is caught from the
// nodehealth.io/boot record by the next controller.
func TestRebootWhileControllerDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "rebootdown")
	opts := h.options(h.rule("agent", nil))
	first := h.startController(t, opts)
	node := h.createNode(t, "rebootdown-n1", unmanaged(), withBootID("boot-a"))
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready in boot-a", framework.AllOf(readyNode, bootRecorded("boot-a")))
	first.Stop()

	// The extension is quiet across the reboot, as it would be.
	r.stop()
	mark := h.nodes.mark(node)
	h.setBootID(t, node, "boot-b")
	h.startController(t, opts)
	h.nodes.waitSeen(t, node, mark, "gated as rebooted by the new controller", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRebooted")))
	// The Lease, still valid from before the reboot, counts as observed
	// when the new controller started: that is no renewal after the gate.
	h.nodes.wait(t, node, "still gated after the pre-reboot lease expired",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRebooted", "agent (LeaseExpired")))
	h.nodes.checkOnceAlways(t, node, mark, "gated until a fresh renewal", gated, gated)
	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated with the new boot recorded", framework.AllOf(readyNode, bootRecorded("boot-b")))
	h.nodes.checkHistory(t, node, mark, "one readiness taint at most", noDuplicateTaint)
	h.waitEvent(t, node, nodehealth.EventNodeGated, "rebooted")
}

// Freshness is the controller's observation time of a renewTime change:
// renewTime an hour in the future does not keep a dead extension ready, and
// an hour in the past does not make a live one expire.
func TestClockSkewedRenewTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "skew")
	h.startController(t, h.options(h.rule("future", nil), h.rule("past", nil)))
	node := h.createNode(t, "skew-n1")
	future := h.startRenewer(t, "future", node, skewed(time.Hour))
	h.startRenewer(t, "past", node, skewed(-time.Hour))
	h.nodes.wait(t, node, "ready although both clocks are an hour off", readyNode)

	future.stop()
	last := future.lastRenewal()
	_, at := h.nodes.waitAt(t, node, "tainted: the future renewTime does not keep it ready",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "future (LeaseExpired", "!past (")))
	if at.Sub(last) < expiry {
		t.Errorf("tainted %s after the last renewal, before the lease could expire (%s)", at.Sub(last), expiry)
	}
}

// A node created with the taint (registerWithTaints, the admission policy)
// that lists no required extension loses it after the registration grace; a
// node whose rule requires an extension keeps it.
func TestANodeRegisteredWithTheTaintThatRequiresNothingLosesItAfterTheGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "reggrace")
	h.startController(t, h.options(h.rule("agent", map[string]string{"it.nodehealth.io/needs": "agent"})))
	before := time.Now()
	bare := h.createNode(t, "reggrace-bare", withTaint(taintKey, v1.TaintEffectNoSchedule))
	needs := h.createNode(t, "reggrace-needs", withTaint(taintKey, v1.TaintEffectNoSchedule),
		withLabels(map[string]string{"it.nodehealth.io/needs": "agent"}))

	n, at := h.nodes.waitAt(t, bare, "taint removed after the registration grace", ungated)
	if at.Sub(before) < registrationGrace {
		t.Errorf("taint removed %s after creation, before the registration grace (%s)", at.Sub(before), registrationGrace)
	}
	if c := framework.ExtensionsCondition(n); c != nil {
		t.Errorf("a node without required extensions got condition %+v", c)
	}
	if v, ok := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok {
		t.Errorf("a node without required extensions got list %q", v)
	}
	// The same grace has passed for the other node.
	h.nodes.checkHistory(t, needs, 0, "gated: its extension never renewed", gated)
	h.nodes.wait(t, needs, "listing its extension", listHas("agent", "rule/agent"))

	h.startRenewer(t, "agent", needs)
	h.nodes.wait(t, needs, "ungated once its extension renewed", readyNode)
}

// startupTimeout: KeepGated keeps the node gated and says so; Ungate lets the
// node go without the extension, which gates again once it came up.
func TestAMissedStartupTimeoutKeepsTheNodeGatedOrLetsItGoByItsFailurePolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "timeout")
	keep := h.rule("keep", map[string]string{"it.nodehealth.io/policy": "keep"})
	keep.StartupTimeout = 3 * time.Second
	open := h.rule("open", map[string]string{"it.nodehealth.io/policy": "open"})
	open.StartupTimeout = 3 * time.Second
	open.FailurePolicy = nodehealth.FailurePolicyUngate
	run := h.startController(t, h.options(h.rule("cni", nil), keep, open))

	before := time.Now()
	kn := h.createNode(t, "timeout-keep", withLabels(map[string]string{"it.nodehealth.io/policy": "keep"}))
	on := h.createNode(t, "timeout-open", withLabels(map[string]string{"it.nodehealth.io/policy": "open"}))
	h.startRenewer(t, "cni", kn)
	h.startRenewer(t, "cni", on)

	n, at := h.nodes.waitAt(t, on, "ungated without the failed-open extension",
		framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "", "Not ready but not affecting readiness", "open (")))
	if at.Sub(before) < open.StartupTimeout {
		t.Errorf("ungated %s after creation, before the startup timeout (%s)", at.Sub(before), open.StartupTimeout)
	}
	if n.Annotations[nodev1alpha1.BootAnnotation] == "" {
		t.Errorf("no boot record after the ungate: %s", describeNode(n))
	}
	h.nodes.wait(t, kn, "kept gated with reason StartupTimeout",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "StartupTimeout", "keep (", "!cni (")))
	h.nodes.checkHistory(t, kn, 0, "gated since creation", func(n *v1.Node) bool {
		return gated(n) || n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] == ""
	})

	h.waitEvent(t, kn, nodehealth.EventExtensionNotReady, "keep", "startup timeout", "KeepGated")
	h.waitEvent(t, on, nodehealth.EventExtensionNotReady, "open", "startup timeout", "Ungate")
	for _, policy := range []nodehealth.FailurePolicy{nodehealth.FailurePolicyKeepGated, nodehealth.FailurePolicyUngate} {
		if got := run.Metric("nodehealth_startup_timeouts_total", map[string]string{"policy": string(policy)}); got != 1 {
			t.Errorf("startup_timeouts_total{policy=%s} = %v, want 1", policy, got)
		}
	}

	// KeepGated: the extension coming up late ungates the node.
	h.startRenewer(t, "keep", kn)
	h.nodes.wait(t, kn, "ungated once the late extension renewed", readyNode)

	// Ungate: once the extension came up, it gates like any other.
	r := h.startRenewer(t, "open", on)
	h.nodes.wait(t, on, "the late extension ready", framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady"))
	r.stop()
	h.nodes.wait(t, on, "tainted when the once-failed-open extension expires",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "open (LeaseExpired")))
}

// Nodes labelled nodehealth.io/exclude=true lose the taint and are left alone;
// removing the label brings them back.
func TestAnExcludedNodeLosesTheTaintAndIsLeftAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "exclude")
	h.startController(t, h.options(h.rule("agent", nil)))
	node := h.createNode(t, "exclude-n1", unmanaged())
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)
	r.stop()
	h.nodes.wait(t, node, "tainted for the expired extension", gated)

	h.labelNode(t, node, nodev1alpha1.ExcludeLabel, ptr.To("true"))
	h.nodes.wait(t, node, "taint removed from the excluded node", ungated)
	excluded := h.nodes.mark(node)
	// A reboot of an excluded node is none of the controller's business
	// either; a second node that reboots at the same time proves the
	// controller is processing reboots meanwhile.
	other := h.createNode(t, "exclude-n2", unmanaged(), withBootID("boot-a"))
	h.setBootID(t, node, "boot-a")
	ro := h.startRenewer(t, "agent", other)
	h.nodes.wait(t, other, "control node ready in boot-a", framework.AllOf(readyNode, bootRecorded("boot-a")))
	ro.stop()
	h.setBootID(t, node, "boot-b")
	h.setBootID(t, other, "boot-b")
	h.nodes.wait(t, other, "control node re-gated by its reboot", gated)
	h.nodes.checkHistory(t, node, excluded, "left alone while excluded", func(n *v1.Node) bool {
		return ungated(n) && !strings.Contains(n.Annotations[nodev1alpha1.BootAnnotation], "boot-")
	})

	h.labelNode(t, node, nodev1alpha1.ExcludeLabel, nil)
	h.nodes.wait(t, node, "gated again once included: its extension is still dead",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "", "agent (")))
}

// Leases labelled nodehealth.io/register=true add their extension to the
// node's list (source lease) and remove it when deleted; a self-registered
// extension gates like any other, and removing the last one ungates.
func TestASelfRegisteringLeaseListsItsExtensionWhichGatesLikeAnyOther(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "selfreg")
	h.startController(t, h.options())
	node := h.createNode(t, "selfreg-n1")

	self := h.startRenewer(t, "self", node, registered(true))
	h.startRenewer(t, "observer", node, registered(false))
	n := h.nodes.wait(t, node, "both registered", framework.AllOf(listHas("self", "lease"), listHas("observer", "lease")))
	for _, e := range extensionList(t, n, h.leaseNS) {
		if want := e.Name == "self"; e.ReadinessAffected() != want {
			t.Errorf("entry %s: affectsReadiness = %v, want %v", e.Name, e.ReadinessAffected(), want)
		}
	}
	h.nodes.wait(t, node, "ready", framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady")))

	self.stop()
	h.nodes.wait(t, node, "tainted when the self-registered extension expires",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "self (LeaseExpired")))

	h.deleteLease(t, "self", node)
	h.nodes.wait(t, node, "entry removed with its Lease, and ungated: nothing gating is left",
		framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "NoRequiredExtensions"),
			func(n *v1.Node) bool { return !listHas("self", "lease")(n) && listHas("observer", "lease")(n) }))
	h.deleteLease(t, "observer", node)
	h.nodes.wait(t, node, "annotation removed with the last entry", func(n *v1.Node) bool {
		_, ok := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
		return !ok
	})
}

// A node whose list cannot be parsed keeps its gate state and its annotation
// (InvalidExtensionList event); every other node is served meanwhile, and
// the node is served again once its annotation is fixed.
func TestANodeWithAMalformedListKeepsItsStateWhileEveryOtherNodeIsServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "malformed")
	run := h.startController(t, h.options(h.rule("agent", nil)))
	const broken = `[{"name":"agent","bogus":true}]`
	bad := h.createNode(t, "malformed-bad", withTaint(taintKey, v1.TaintEffectNoSchedule),
		withAnnotation(nodev1alpha1.SystemExtensionsAnnotation, broken))
	good := h.createNode(t, "malformed-good")
	h.startRenewer(t, "agent", bad)
	h.startRenewer(t, "agent", good)

	h.waitEvent(t, bad, nodehealth.EventInvalidExtensionList, nodev1alpha1.SystemExtensionsAnnotation)
	h.nodes.wait(t, bad, "condition Unknown", framework.ExtensionsConditionIs(v1.ConditionUnknown, nodehealth.EventInvalidExtensionList, "Cannot parse"))
	h.nodes.wait(t, good, "served", framework.AllOf(readyNode, listHas("agent", "rule/agent")))
	waitCounter(t, "invalid list gauge", 1, func() float64 { return run.Metric("nodehealth_invalid_extension_lists", nil) })
	h.nodes.checkHistory(t, bad, 0, "annotation and taint left as they are", func(n *v1.Node) bool {
		return n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] == broken && gated(n) && noDuplicateTaint(n)
	})

	h.annotateNode(t, bad, nodev1alpha1.SystemExtensionsAnnotation, ptr.To(`[{"name":"agent"}]`))
	h.nodes.wait(t, bad, "served once fixed", readyNode)
	waitCounter(t, "invalid list gauge back to 0", 0, func() float64 { return -run.Metric("nodehealth_invalid_extension_lists", nil) })
}

// The condition and the Events tell a user why a node is gated, as
// kubectl describe node shows them.
func TestConditionAndEventsVisible(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "visible")
	h.startController(t, h.options(h.rule("cni", nil), h.rule("csi", nil)))
	node := h.createNode(t, "visible-n1")
	h.startRenewer(t, "cni", node)
	csi := h.startRenewer(t, "csi", node)
	h.nodes.wait(t, node, "ready", readyNode)

	csi.release(t, "ProbeFailed", "socket /csi/csi.sock not found")
	n := h.nodes.wait(t, node, "gated naming csi and why",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady",
			"csi (LeaseReleased", "ProbeFailed", "socket /csi/csi.sock not found", "!cni (")))
	c := framework.ExtensionsCondition(n)
	if c.LastTransitionTime.IsZero() {
		t.Errorf("condition without lastTransitionTime: %+v", c)
	}
	h.waitEvent(t, node, nodehealth.EventExtensionNotReady, "csi", "LeaseReleased", "ProbeFailed")
	h.waitEvent(t, node, nodehealth.EventNodeGated, "csi")

	out := h.kubectl(t, "describe", "node", node)
	for _, want := range []string{
		taintKey + ":NoSchedule",
		nodev1alpha1.SystemExtensionsReadyCondition,
		"ExtensionsNotReady",
		"csi (LeaseReleased",
		nodehealth.EventNodeGated,
		nodehealth.EventExtensionNotReady,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe node does not show %q:\n%s", want, out)
		}
	}
}

// Rules follow node labels: adding the label injects the rule's entry (and
// gates the node until the extension renews), removing it removes the entry
// and ungates a node whose extension is dead. A manual entry of the same name
// wins over the rule and is never removed.
func TestRuleFollowsNodeLabels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "labels")
	const needs = "it.nodehealth.io/needs"
	h.startController(t, h.options(h.rule("agent", map[string]string{needs: "agent"})))
	node := h.createNode(t, "labels-rule")
	const manualList = `[{"name":"agent"}]`
	manual := h.createNode(t, "labels-manual", withLabels(map[string]string{needs: "agent"}),
		withAnnotation(nodev1alpha1.SystemExtensionsAnnotation, manualList))
	h.nodes.wait(t, node, "schedulable", framework.NodeSchedulable)

	h.labelNode(t, node, needs, ptr.To("agent"))
	h.nodes.wait(t, node, "rule entry injected and gated", framework.AllOf(gated, listHas("agent", "rule/agent")))
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated", readyNode)
	r.stop()
	h.nodes.wait(t, node, "tainted", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))
	h.labelNode(t, node, needs, nil)
	h.nodes.wait(t, node, "entry removed and ungated: nothing requires the dead extension any more", func(n *v1.Node) bool {
		_, listed := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
		return ungated(n) && !listed
	})

	rm := h.startRenewer(t, "agent", manual)
	h.nodes.wait(t, manual, "ready with its manual entry", readyNode)
	h.labelNode(t, manual, needs, nil)
	rm.stop()
	h.nodes.wait(t, manual, "still gated by its manual entry", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))
	h.nodes.checkHistory(t, manual, 0, "manual entry kept as it is", func(n *v1.Node) bool {
		return n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] == manualList
	})
}

// A node released by failurePolicy Ungate stays released across a real
// restart of the controller: the new controller reads from the boot record
// that the extension failed open in this boot, and neither taints the node
// nor counts it as failing.
func TestFailOpenSurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "failopen")
	open := h.rule("open", nil)
	open.StartupTimeout = 2 * time.Second
	open.FailurePolicy = nodehealth.FailurePolicyUngate
	opts := h.options(h.rule("cni", nil), open)
	first := h.startController(t, opts)
	node := h.createNode(t, "failopen-n1")
	h.startRenewer(t, "cni", node)
	h.nodes.wait(t, node, "ungated without the failed-open extension",
		framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "", "open ("), func(n *v1.Node) bool {
			return strings.Contains(n.Annotations[nodev1alpha1.BootAnnotation], `"failedOpen":["open"]`)
		}))
	first.Stop()

	mark := h.nodes.mark(node)
	second := h.startController(t, opts)
	// The new controller evaluated the node once it tracks it; its gauges
	// are set in the same step as its decision.
	waitCounter(t, "the restarted controller's tracked nodes", 1, func() float64 {
		return second.Metric("nodehealth_tracked_nodes", nil)
	})
	// A label change makes the new controller evaluate the node again after
	// its first look, so a wrong decision would have been written by then.
	evaluations := second.Metric("nodehealth_evaluations_total", nil)
	poke := "1"
	h.labelNode(t, node, "it.nodehealth.io/poke", &poke)
	waitCounter(t, "another evaluation", evaluations+1, func() float64 {
		return second.Metric("nodehealth_evaluations_total", nil)
	})
	if got := second.Metric("nodehealth_gated_nodes", nil); got != 0 {
		t.Errorf("the restarted controller gates %v nodes, want 0", got)
	}
	if got := second.Metric("nodehealth_taint_writes_total", nil); got != 0 {
		t.Errorf("the restarted controller wrote %v taints, want none", got)
	}
	h.nodes.checkHistory(t, node, mark, "never tainted after the restart", ungated)
}

// A readiness taint key under cluster-autoscaler's start-up prefix (the lever
// GKE's and AKS's managed autoscalers leave, docs/autoscalers.md) gates and
// ungates as the default key does: the node registers with it, keeps it
// until the extension renews, gets it back when the Lease is released, and
// never carries the default key.
func TestATaintKeyUnderTheAutoscalersStartupPrefixGatesAndUngates(t *testing.T) {
	t.Parallel()
	const key = "startup-taint.cluster-autoscaler.kubernetes.io/nodehealth-not-ready"
	has := func(n *v1.Node) bool { return framework.TaintCount(n, key, v1.TaintEffectNoSchedule) == 1 }
	h := newHarness(t, "prefixkey")
	opts := h.options(h.rule("agent", nil))
	opts.TaintKey = key
	h.startController(t, opts)

	// As a kubelet started with --register-with-taints=<key>:NoSchedule.
	node := h.createNode(t, "prefixkey-n1", withTaint(key, v1.TaintEffectNoSchedule))
	h.nodes.wait(t, node, "gated under the prefixed key",
		framework.AllOf(has, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRegistered", "agent (")))

	r := h.startRenewer(t, "agent", node, leaseDuration(3600))
	h.nodes.wait(t, node, "ungated: the prefixed key removed, condition True", func(n *v1.Node) bool {
		return framework.TaintCount(n, key, "") == 0 && framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady")(n)
	})

	r.release(t, "ProbeFailed", "liveness probe failed")
	h.nodes.wait(t, node, "gated again under the prefixed key",
		framework.AllOf(has, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseReleased")))
	h.nodes.checkHistory(t, node, 0, "never the default key", func(n *v1.Node) bool { return !framework.HasReadinessTaint(n) })
	h.nodes.checkHistory(t, node, 0, "the prefixed key once at most", func(n *v1.Node) bool { return framework.TaintCount(n, key, "") <= 1 })
}
