package nodehealth_test

// The tests in this file run cmd/nodehealth-controller as a real process (or
// its uninstall command). It sees every node of the cluster, not only this
// test's group, so these tests do not call t.Parallel: they run before the
// parallel tests are released, on a cluster holding only their own nodes.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const leaderLeaseName = "nodehealth-controller"

// controllerConfig is a NodeHealthControllerConfiguration with short
// leader-election durations and one rule for the harness's group.
func (h *harness) controllerConfig(leaderNS string) string {
	return fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 1s
  resourceLock: leases
  resourceName: %s
  resourceNamespace: %s
leaseNamespace: %s
extensionRules:
- name: agent
  nodeSelector:
    matchLabels:
      %s: %s
  startupTimeout: 0s
renewalGrace: %s
registrationGrace: %s
# The test's Leases last leaseSeconds: honour them, and renew the canary
# often enough for that (3 × canaryInterval < 3/4 × minimumLeaseDuration + renewalGrace).
minimumLeaseDuration: %s
canaryInterval: %s
eviction:
  mode: None
`, leaderLeaseName, leaderNS, h.leaseNS, groupLabel, h.group, renewalGrace, registrationGrace,
		leaseSeconds*time.Second, time.Second)
}

func (h *harness) startBinary(t testing.TB, name, config string) *framework.Process {
	t.Helper()
	return testenv.StartComponent(t, testenv.Component{Binary: "nodehealth-controller", Name: name, Config: config}).Process
}

func (h *harness) waitLeader(t testing.TB, leaderNS, what string, cond func(holder string) bool) string {
	t.Helper()
	l, err := h.env.WaitForLease(testenv.Context(t), leaderNS, leaderLeaseName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && cond(*l.Spec.HolderIdentity)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return *l.Spec.HolderIdentity
}

// processOf finds which process has identity, from the identity it logs at
// start.
func processOf(t testing.TB, identity string, procs ...*framework.Process) *framework.Process {
	t.Helper()
	re := regexp.MustCompile(`identity="` + regexp.QuoteMeta(identity) + `"`)
	var found *framework.Process
	err := wait.PollUntilContextTimeout(testenv.Context(t), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		for _, p := range procs {
			data, err := os.ReadFile(p.LogPath)
			if err == nil && re.Match(data) {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no process logged identity %s: %v", identity, err)
	}
	return found
}

// Two replicas of the binary with leader election: SIGKILL the leader, the
// follower takes over, and no node loses or duplicates its taint across the
// failover; the new leader then gates a node whose extension dies.
func TestTheFollowerTakesOverFromAKilledLeaderWithoutLosingOrDuplicatingATaint(t *testing.T) {
	h := newHarness(t, "leader")
	leaderNS := testenv.NewNamespace(t, "nh-leader")
	config := h.controllerConfig(leaderNS)
	a := h.startBinary(t, "nodehealth-controller-a", config)
	b := h.startBinary(t, "nodehealth-controller-b", config)
	first := h.waitLeader(t, leaderNS, "a leader", func(string) bool { return true })

	ready := h.createNode(t, "leader-ready")
	dead := h.createNode(t, "leader-dead")
	probe := h.createNode(t, "leader-probe")
	rr := h.startRenewer(t, "agent", ready)
	rd := h.startRenewer(t, "agent", dead)
	rp := h.startRenewer(t, "agent", probe)
	for _, n := range []string{ready, dead, probe} {
		h.nodes.wait(t, n, "ready", framework.AllOf(readyNode, framework.NodeSchedulable))
	}
	rd.stop()
	h.nodes.wait(t, dead, "tainted for the dead extension", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))

	marks := map[string]int{ready: h.nodes.mark(ready), dead: h.nodes.mark(dead)}
	leader := processOf(t, first, a, b)
	follower := a
	if leader == a {
		follower = b
	}
	killed := time.Now()
	if err := syscall.Kill(leader.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	// The probe's extension dies with the leader: only the new leader can
	// taint it, once the grace it gives every Lease when it starts is over.
	rp.stop()
	second := h.waitLeader(t, leaderNS, "the follower to take over", func(holder string) bool { return holder != first })
	if p := processOf(t, second, a, b); p != follower {
		t.Fatalf("new leader %s is not the surviving process", second)
	}
	_, at := h.nodes.waitAt(t, probe, "tainted by the new leader", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "", "agent (")))
	if at.Sub(killed) < expiry {
		t.Errorf("probe tainted %s after the failover, within the grace the new leader must give every Lease (%s)", at.Sub(killed), expiry)
	}
	h.nodes.checkHistory(t, dead, marks[dead], "tainted throughout the failover", func(n *v1.Node) bool {
		return gated(n) && noDuplicateTaint(n)
	})
	h.nodes.checkHistory(t, ready, marks[ready], "not tainted during the failover", ungated)

	// The probe recovers, so that the ready node failing next is the second
	// failing node of three, below the default blast-radius threshold.
	h.startRenewer(t, "agent", probe)
	h.nodes.wait(t, probe, "ungated by the new leader", readyNode)
	rr.stop()
	h.nodes.wait(t, ready, "tainted by the new leader", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))
	for _, n := range []string{ready, dead, probe} {
		h.nodes.checkHistory(t, n, 0, "one readiness taint at most", noDuplicateTaint)
	}
	if exited, _ := follower.Exited(); exited {
		t.Errorf("the new leader exited:\n%s", follower.LogTail(40))
	}
}

// currentRun cuts a process log down to its last run: a log file is shared
// by the processes of the same name in every test of the package (each run
// starts with a "=== <time> <command>" line), and a line of an earlier test's
// process must not pass for this one's.
func currentRun(log string) string {
	if i := strings.LastIndex(log, "=== "); i >= 0 {
		return log[i:]
	}
	return log
}

// SIGTERM stops the leader's controller and then releases the leader Lease
// (pkg/leaderelection): by the time the process has exited, the Lease no
// longer names it, so the follower need not wait out the lease; the leader
// exits 0 and the follower takes over.
func TestSIGTERMReleasesLeadership(t *testing.T) {
	h := newHarness(t, "sigterm")
	leaderNS := testenv.NewNamespace(t, "nh-sigterm")
	config := h.controllerConfig(leaderNS)
	a := h.startBinary(t, "nodehealth-controller-a", config)
	b := h.startBinary(t, "nodehealth-controller-b", config)
	first := h.waitLeader(t, leaderNS, "a leader", func(string) bool { return true })
	leader, follower := processOf(t, first, a, b), a
	if leader == a {
		follower = b
	}
	// The Lease can name a replica a moment before that replica hears back.
	if err := wait.PollUntilContextTimeout(testenv.Context(t), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return strings.Contains(currentRun(leader.LogTail(200)), "Became the leader; starting"), nil
	}); err != nil {
		t.Fatalf("the leader never started leading: %v", err)
	}
	if err := syscall.Kill(leader.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	if exited, err := leader.Exited(); !exited || err != nil {
		t.Errorf("leader after SIGTERM: exited %v, %v; want exit 0\n%s", exited, err, leader.LogTail(30))
	}
	l, err := h.env.Client.CoordinationV1().Leases(leaderNS).Get(testenv.Context(t), leaderLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder == first {
		t.Fatalf("the Lease still names the stopped leader %s: leadership was not released before exit", first)
	}
	if !strings.Contains(currentRun(leader.LogTail(60)), "Work stopped; releasing leadership") {
		t.Errorf("the leader did not stop its work before releasing:\n%s", leader.LogTail(30))
	}
	second := h.waitLeader(t, leaderNS, "the follower to take over", func(holder string) bool { return holder != first })
	if p := processOf(t, second, a, b); p != follower {
		t.Fatalf("new leader %s is not the surviving process", second)
	}
}

// uninstall removes every taint, annotation, condition and Lease the
// controller owns, and keeps manual list entries and other taints.
func TestUninstallRemovesWhatTheControllerOwnsAndKeepsWhatOthersWrote(t *testing.T) {
	h := newHarness(t, "uninstall")
	run := h.startController(t, h.options(h.rule("agent", nil)))
	const manual = `[{"name":"manual","affectsReadiness":false}]`
	const otherTaint = "example.com/keep"
	keep := h.createNode(t, "uninstall-ready", withAnnotation(nodev1alpha1.SystemExtensionsAnnotation, manual),
		withTaint(otherTaint, v1.TaintEffectPreferNoSchedule))
	gatedNode := h.createNode(t, "uninstall-gated")
	h.startRenewer(t, "agent", keep)
	h.startRenewer(t, "self", keep, registered(true))
	h.nodes.wait(t, keep, "ready with rule, lease and manual entries",
		framework.AllOf(readyNode, listHas("agent", "rule/agent"), listHas("self", "lease"), listHas("manual", "")))
	h.nodes.wait(t, gatedNode, "gated", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "", "agent (")))
	run.Stop()
	// The escalation's lifecycle condition (ours) and an admin's (not ours).
	setLifecycle := func(node, kind, reason string, status v1.ConditionStatus) {
		t.Helper()
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"reason":%q}]}}`, kind, status, reason)
		if _, err := h.env.Client.CoreV1().Nodes().PatchStatus(testenv.Context(t), node, []byte(patch)); err != nil {
			t.Fatal(err)
		}
	}
	setLifecycle(gatedNode, nodev1alpha1.LifecycleConditionDrained, nodev1alpha1.LifecycleReasonExtensionFailed, v1.ConditionTrue)
	setLifecycle(keep, nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", v1.ConditionTrue)

	cmd := exec.CommandContext(testenv.Context(t), testenv.Binary(t, "nodehealth-controller"), "uninstall",
		"--kubeconfig", h.env.Kubeconfig, "--taint-key", taintKey, "--lease-namespace", h.leaseNS)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	t.Logf("uninstall:\n%s", out)

	for _, name := range []string{keep, gatedNode} {
		n, err := h.env.Client.CoreV1().Nodes().Get(testenv.Context(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if framework.TaintCount(n, taintKey, "") != 0 {
			t.Errorf("node %s keeps the readiness taint: %v", name, n.Spec.Taints)
		}
		if _, ok := n.Annotations[nodev1alpha1.BootAnnotation]; ok {
			t.Errorf("node %s keeps the boot record", name)
		}
		if c := framework.ExtensionsCondition(n); c != nil {
			t.Errorf("node %s keeps condition %+v", name, c)
		}
		for _, c := range n.Status.Conditions {
			if c.Reason == nodev1alpha1.LifecycleReasonExtensionFailed {
				t.Errorf("node %s keeps lifecycle condition %+v", name, c)
			}
		}
		list, hasList := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
		switch name {
		case keep:
			if c := nodeutil.Condition(n, nodev1alpha1.LifecycleConditionDrainInProgress); c == nil || c.Reason != "AdminRequested" || c.Status != v1.ConditionTrue {
				t.Errorf("node %s: the admin's DrainInProgress is gone or changed: %+v", name, c)
			}
			if list != manual {
				t.Errorf("node %s list = %q, want only the manual entry %q", name, list, manual)
			}
			if framework.TaintCount(n, otherTaint, "") != 1 {
				t.Errorf("node %s lost the other taint: %v", name, n.Spec.Taints)
			}
		default:
			if hasList {
				t.Errorf("node %s keeps list %q", name, list)
			}
		}
	}
	_, err = h.env.Client.CoordinationV1().Leases(h.leaseNS).Get(testenv.Context(t), nodev1alpha1.ControllerCanaryLease, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("canary Lease still there: %v", err)
	}
	if !strings.Contains(string(out), "changed") {
		t.Errorf("uninstall printed no summary: %s", out)
	}
}
