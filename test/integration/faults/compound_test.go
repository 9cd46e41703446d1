package faults_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Compound faults (issue 20): one fault on top of another, the way a real
// incident unfolds, against the guards of docs/controller.md — the blast radius and
// the own view (canary). docs/reliability.md, "Compound faults", has the
// table.

const (
	// threshold is the blast radius's cluster (and zone) threshold of
	// these tests, in percent: more than 2 nodes failing and at least half
	// of them suspends failure taints and evictions.
	threshold = 50
	// minFailingToSuspend: a suspension needs more than this many failing
	// nodes (docs/controller.md), so at most this many can be tainted before it.
	minFailingToSuspend = 2
	// evictionInitialBackoff is the drain's first back-off after a refused
	// eviction (pkg/nodehealth).
	evictionInitialBackoff = 5 * time.Second
)

var (
	taintAdds = map[string]string{"operation": "add"}
	// keepLeading outlasts the etcd pause and the stalls below: the leader
	// keeps its leadership, so what recovers is the own view, not a new
	// leader's start (which TestRestartWhileLeasesSilent covers).
	keepLeading = leaderElection{30 * time.Second, 20 * time.Second, 2 * time.Second}
)

// settleEvaluated is settle, once the controller leads and has evaluated
// every node: each reports SystemExtensionsReady True. (settle alone can
// return before the controller started: the nodes are created untainted.)
func (f *fleet) settleEvaluated(t *testing.T, cs *controllers) {
	t.Helper()
	cs.leading(t, cs.leader(t, func(string) bool { return true }))
	f.waitAll(t, "evaluated (condition True)", f.nodes, func(n string) bool {
		status, _ := f.condition(t, n)
		return status == v1.ConditionTrue
	})
	f.settle(t)
}

// split sorts failing nodes into those tainted and those held back by a
// guard (condition False, reason GatingSuspended, no taint); a node that is
// neither is an error.
func (f *fleet) split(t *testing.T, failing []string) (tainted, held []string) {
	t.Helper()
	for _, n := range failing {
		switch {
		case f.tainted(n):
			tainted = append(tainted, n)
		case f.held(t, n):
			held = append(held, n)
		default:
			status, reason := f.condition(t, n)
			t.Errorf("failing node %s is neither tainted nor held: condition %s/%s", n, status, reason)
		}
	}
	return tainted, held
}

// checkHeld asserts that each held node gained no readiness taint since
// snapshot s and is still held, that each tainted node was tainted at most
// once since s and kept its taint, and
// that the healthy nodes were never tainted since the fleet settled.
func (f *fleet) checkHeld(t *testing.T, s map[string]int, tainted, held []string) {
	t.Helper()
	for _, n := range held {
		if vs := f.versionsSince(n, s); len(vs) > 0 {
			t.Errorf("held node %s gained the readiness taint: %s", n, describe(vs))
		} else if !f.held(t, n) {
			status, reason := f.condition(t, n)
			t.Errorf("held node %s is no longer held: condition %s/%s", n, status, reason)
		}
	}
	for _, n := range tainted {
		// Tainted once at most since s, and never untainted.
		if vs := f.versionsSince(n, s); len(vs) > 1 || (len(vs) == 1 && !vs[0].tainted) {
			t.Errorf("tainted node %s changed: %s", n, describe(vs))
		}
	}
	failing := f.failing()
	for _, n := range f.nodes {
		if !slices.Contains(failing, n) && f.everTainted(n) {
			t.Errorf("healthy node %s was tainted: %s", n, describe(f.transitions(n)))
		}
	}
}

// checkNoEvictions asserts that no pod of the fleet had an eviction request:
// the blast radius suspends evictions.
func (f *fleet) checkNoEvictions(t *testing.T) {
	t.Helper()
	for pod, codes := range evictionRequests(t, f.podNS) {
		t.Errorf("pod %s: eviction requests %v while the blast radius suspends evictions", pod, codes)
	}
}

// Compound fault 1 (issue 20, item 1): the blast radius holds back some of 6
// failing nodes out of 10 (threshold 50 %), then etcd stalls for longer than
// a Lease lasts (every Lease expires in the controller's view, the own view
// goes stale) and resumes. Own-view recovery must not taint the nodes the
// blast radius was holding back: it gives a full grace only to Leases that
// were ready when the view went stale, so a held node is still failing —
// and still held — afterwards. No taint is added at all:
// taint_writes_total{operation="add"} does not move.
func TestHeldTaintsSurviveEtcdStall(t *testing.T) {
	f := newFleet(t, "held", 10)
	cs := f.startControllers(t, 1, controllerConfig{election: keepLeading, clusterThreshold: threshold, zoneThreshold: threshold})
	f.settleEvaluated(t, cs)

	failing := f.nodes[:6]
	f.fail(failing...)
	f.waitAll(t, "tainted or held after their extension failed", failing, func(n string) bool { return f.taintedOrHeld(t, n) })
	quiet(2 * time.Second) // late writes would show
	tainted, held := f.split(t, failing)
	t.Logf("6 of 10 failing at a %d %% threshold: tainted %v, held %v", threshold, tainted, held)
	// The count is brought up to date at each failure taint decided, so how
	// many are tainted first depends on how far apart the 6 expiries fall
	// (the renewals stop together, but their last writes spread under load:
	// CI saw 3 tainted, the third written 70 ms after the suspension was
	// decided on another node). Whatever the spread, the expiry that brings
	// the count to the threshold (5 of 10) and every later one are held.
	if most := (threshold*len(f.nodes)+99)/100 - 1; len(tainted) > most {
		t.Errorf("%d of the 6 failing nodes were tainted (%v), want at most %d: the failure that reaches %d %% and every later one are held (docs/controller.md)",
			len(tainted), tainted, most, threshold)
	}
	if len(held) == 0 {
		t.Fatal("no failing node is held back: nothing for the stall to break")
	}
	addsBefore := cs.metric(t, 0, "nodehealth_taint_writes_total", taintAdds)
	s := f.snapshot()

	etcd := f.env.Process(framework.Etcd)
	pause := expiry + 4*time.Second
	if err := etcd.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd paused for %s (Leases expire %s after their last renewal)", pause, expiry)
	time.Sleep(pause)
	if err := etcd.Continue(); err != nil {
		t.Fatal(err)
	}
	// Recovery, then long enough for every healthy Lease's full grace to
	// run out if it had been refreshed wrongly, and for the guards to act.
	quiet(expiry + 3*canaryInterval)

	f.checkHeld(t, s, tainted, held)
	if adds := cs.metric(t, 0, "nodehealth_taint_writes_total", taintAdds); adds != addsBefore {
		t.Errorf("nodehealth_taint_writes_total{operation=\"add\"} went from %v to %v across the etcd stall and the recovery, want no change", addsBefore, adds)
	}
	if r := cs.reps[0].Restarts(); r != 0 {
		t.Errorf("the controller restarted %d times: this run tested a new leader's start, not the own view's recovery", r)
	}
	f.checkNoEvictions(t)
}

// Compound fault 2 (issue 20, item 4): 4 of 6 nodes' extensions go silent
// (threshold 50 %) and the controller is restarted (SIGKILL; its supervisor
// starts it again, and it takes the leader Lease over once it runs out). The
// new leader gives every Lease a full grace from its start, so the 4
// expiries come due together, and the blast-radius count must be brought up
// to date from every node's Leases before the first of them is tainted
// (docs/controller.md): at most 2 tainted, the rest held. Twice: restarted before
// the Leases expire (before-expiry), and restarted once the old leader had
// tainted 2 and held 2 back (while-held) — which nodes it holds then
// must not change: a held node is never tainted by the restart.
func TestRestartWhileLeasesSilent(t *testing.T) {
	t.Run("before-expiry", func(t *testing.T) { testRestartWhileLeasesSilent(t, "restart-b", false) })
	t.Run("while-held", func(t *testing.T) { testRestartWhileLeasesSilent(t, "restart-h", true) })
}

func testRestartWhileLeasesSilent(t *testing.T, group string, afterGuard bool) {
	f := newFleet(t, group, 6)
	cs := f.startControllers(t, 1, controllerConfig{election: fastElection, clusterThreshold: threshold, zoneThreshold: threshold})
	f.settleEvaluated(t, cs)
	old := cs.leader(t, func(string) bool { return true })
	s := cs.leading(t, old)
	settled := f.snapshot()

	silent := f.nodes[:4]
	f.fail(silent...)
	stopped := time.Now()
	var heldBefore []string
	if afterGuard {
		f.waitAll(t, "tainted or held after their Leases expired", silent, func(n string) bool { return f.taintedOrHeld(t, n) })
		quiet(time.Second)
		var taintedBefore []string
		taintedBefore, heldBefore = f.split(t, silent)
		t.Logf("before the restart: tainted %v, held %v", taintedBefore, heldBefore)
	} else {
		time.Sleep(2 * time.Second)
	}
	beforeRestart := f.snapshot()
	condMarks := map[string]int{}
	for _, n := range heldBefore {
		condMarks[n] = f.conditionMark(n)
	}
	if err := s.Current().Kill(); err != nil {
		t.Fatal(err)
	}
	killedAfter := time.Since(stopped)
	if !afterGuard {
		if killedAfter >= expiry {
			t.Fatalf("the leader was killed %s after the extensions went silent, after their Leases expired (%s): the machine is too slow for this test", killedAfter, expiry)
		}
		for _, n := range silent {
			if f.everTainted(n) {
				t.Fatalf("%s tainted before the restart: the old leader saw the expiry", n)
			}
		}
	}
	next := cs.leader(t, func(h string) bool { return h != old })
	cs.leading(t, next)
	t.Logf("leader killed %s after 4 of 6 extensions went silent; %s leads %s after the silence began",
		killedAfter.Round(100*time.Millisecond), next, time.Since(stopped).Round(100*time.Millisecond))

	// The new leader's grace runs out expiry after its start.
	time.Sleep(expiry)
	f.waitAll(t, "tainted or held after their Leases expired", silent, func(n string) bool { return f.taintedOrHeld(t, n) })
	quiet(expiry / 2)
	tainted, held := f.split(t, silent)
	t.Logf("after the restart: tainted %v, held %v", tainted, held)
	if len(tainted) > minFailingToSuspend {
		t.Errorf("%d of the 4 silent nodes were tainted (%v) after the restart, want at most %d: the count must be up to date from every node's Leases before a failure taint is decided (docs/controller.md)",
			len(tainted), tainted, minFailingToSuspend)
	}
	for _, n := range heldBefore {
		if vs := f.versionsSince(n, beforeRestart); len(vs) > 0 {
			t.Errorf("%s, held back before the restart, gained the readiness taint after it: %s", n, describe(vs))
		}
		// Its boot record marks its Lease dead, so the new leader's start
		// grace does not revive it: nothing (the update operator's health
		// gate included) may read it as healthy in between (issue 33).
		for _, c := range f.conditionsSince(n, condMarks[n]) {
			if strings.HasPrefix(c, string(v1.ConditionTrue)+"/") {
				t.Errorf("%s, held back before the restart, read %s after it (conditions since: %v)", n, c, f.conditionsSince(n, condMarks[n]))
				break
			}
		}
	}
	f.checkHeld(t, settled, tainted, held)
	f.checkNoEvictions(t)
}

// Compound fault 3 (issue 20, item 3): a failing node's pod is protected by
// a PodDisruptionBudget that allows no disruption, so its eviction is
// refused (429) and retried with back-off; meanwhile the blast radius
// suspends evictions (3 of 6 nodes failing) and lifts again. The drain must
// continue after the suspension, and once the budget allows it, the pod is
// evicted exactly once.
//
// kube-controller-manager does not run in this package (its node-lifecycle
// and taint-eviction controllers would act on the kubelet-less nodes), so
// the budget's status is written by the test, as the disruption controller
// would: the Eviction API (kube-apiserver) checks it the same way, and the
// test decides exactly when the budget allows the eviction. The pod is
// marked Running and Ready by the test too: the Eviction API ignores budgets
// for Pending pods.
func TestDrainBlockedByPDBAcrossSuspension(t *testing.T) {
	f := newFleet(t, "pdb", 6)
	victim, pod := f.nodes[0], "pod-"+f.nodes[0]
	ctx := testenv.Context(t)
	pods := f.env.Client.CoreV1().Pods(f.podNS)
	if _, err := pods.Patch(ctx, pod, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"app":"victim"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pdbs := f.env.Client.PolicyV1().PodDisruptionBudgets(f.podNS)
	if _, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "victim"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// budget sets the spec and the status the disruption controller would
	// compute for one healthy pod.
	budget := func(minAvailable int32) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := pdbs.Get(ctx, "victim", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if b.Spec.MinAvailable.IntValue() != int(minAvailable) {
				b.Spec.MinAvailable = ptr.To(intstr.FromInt32(minAvailable))
				if b, err = pdbs.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			allowed := 1 - minAvailable
			cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
				Reason: policyv1.InsufficientPodsReason, LastTransitionTime: metav1.Now(), ObservedGeneration: b.Generation}
			if allowed > 0 {
				cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
			}
			b.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: b.Generation, DisruptionsAllowed: allowed,
				CurrentHealthy: 1, DesiredHealthy: minAvailable, ExpectedPods: 1, Conditions: []metav1.Condition{cond}}
			_, err = pdbs.UpdateStatus(ctx, b, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	budget(1)

	cs := f.startControllers(t, 1, controllerConfig{election: defaultElection, clusterThreshold: threshold, zoneThreshold: threshold})
	f.settleEvaluated(t, cs)
	f.fail(victim)
	f.waitAll(t, "tainted", []string{victim}, f.tainted)
	codes := func() []int { return evictionRequests(t, f.podNS)[pod] }
	waitCodes := func(what string, timeout time.Duration, cond func([]int) bool) bool {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return cond(codes()), nil
		})
		if err != nil {
			t.Errorf("%s: eviction requests of %s %v after %s", what, pod, codes(), timeout)
			return false
		}
		return true
	}
	if !waitCodes("the budget never refused an eviction", waitTimeout, func(c []int) bool { return slices.Contains(c, 429) }) {
		t.FailNow()
	}

	// 2 more nodes fail: 3 of 6 suspends failure taints and evictions.
	others := f.nodes[1:3]
	f.fail(others...)
	cs.waitMetric(t, 0, "nodehealth_gating_suspended", map[string]string{"scope": "cluster"}, 1)
	atSuspension := len(codes())
	// Held long enough for the drain's next retry (its back-off is at
	// most 2 × 5 s here) to come due while suspended.
	hold := 2*evictionInitialBackoff + time.Second
	quiet(hold)
	if during := codes()[atSuspension:]; len(during) > 0 {
		t.Errorf("eviction requests %v while the blast radius suspended evictions", during)
	}
	f.recover(others...)
	cs.waitMetric(t, 0, "nodehealth_gating_suspended", map[string]string{"scope": "cluster"}, 0)
	atResume := len(codes())
	t.Logf("suspended for %s with %s's drain blocked (%d eviction requests so far); resumed", hold, victim, atResume)

	// The drain continues: a retry, still refused by the budget. Its
	// back-off is at most 40 s by now.
	resumed := waitCodes("the drain did not continue after the suspension ended", 50*time.Second, func(c []int) bool { return len(c) > atResume })
	if resumed {
		t.Logf("the drain continued %v after the suspension ended", codes()[atResume:])
	}

	budget(0)
	allowedAt := len(codes())
	if !waitCodes("the pod was never evicted after the budget allowed it", 90*time.Second, func(c []int) bool { return slices.Contains(c, 201) }) {
		t.FailNow()
	}
	quiet(2 * evictionInitialBackoff) // a second eviction would show
	final := codes()
	if n := count(final, 201); n != 1 {
		t.Errorf("pod %s evicted %d times, want exactly once: %v", pod, n, final)
	}
	if i := slices.Index(final, 201); i != len(final)-1 {
		t.Errorf("eviction requests for %s after it was evicted: %v", pod, final[i+1:])
	}
	t.Logf("eviction requests of %s: %v (budget allowed it after request %d)", pod, final, allowedAt)
	for p, c := range evictionRequests(t, f.podNS) {
		if p != pod {
			t.Errorf("pod %s of a node that did not fail long enough: eviction requests %v", p, c)
		}
	}
	if tr := f.transitions(victim); len(tr) != 1 || !tr[0].tainted {
		t.Errorf("%s: taint transitions %s, want tainted once", victim, describe(tr))
	}
	for _, n := range f.nodes[3:] {
		if f.everTainted(n) {
			t.Errorf("healthy node %s was tainted: %s", n, describe(f.transitions(n)))
		}
	}
}

func count(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// Compound fault 4 — the case the canary exists for: only the controller's
// Lease watch stalls (its own, coalesced connection) while its other
// connection — the canary's renewals, leader election, every write — goes
// through, and the extensions keep renewing. The proxy in front of the API
// server reads each connection's HTTP/2 requests and stalls the one that
// carries the watch of the Lease namespace (framework.Proxy.StallConns).
// The canary's renewals succeed but the controller cannot observe them, so
// it must stop trusting its view before any Lease expires: nothing is
// tainted during the stall. One node's extension really dies during the
// stall: it is tainted only after recovery and a full expiry.
func TestAStalledLeaseWatchAloneTaintsNothing(t *testing.T) {
	f := newFleet(t, "lwatch", 20)
	proxy, err := f.env.StartAPIServerProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	kubeconfig := t.TempDir() + "/proxied.kubeconfig"
	if err := f.env.WriteAdminKubeconfig(kubeconfig, "https://"+proxy.Addr()); err != nil {
		t.Fatal(err)
	}
	cs := f.startControllers(t, 1, controllerConfig{election: defaultElection, kubeconfig: kubeconfig})
	f.settleEvaluated(t, cs)

	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + f.leaseNS + "/leases"
	leaseWatch := func(c framework.ProxyConn) bool {
		return slices.ContainsFunc(c.Watches, func(w string) bool { return strings.Contains(w, " "+leasePath+"?") })
	}
	carries := func(c framework.ProxyConn, part string) bool {
		return slices.ContainsFunc(c.Requests, func(r string) bool { return strings.Contains(r, part) })
	}
	canaryPath := leasePath + "/" + nodev1alpha1.ControllerCanaryLease
	electionPath := "/namespaces/" + cs.leaderNS + "/leases/" + leaderName
	var watchConns, writeConns []int
	for _, c := range proxy.Conns() {
		t.Logf("connection %d (%s, closed %v): %d requests, watches %v", c.ID, c.Protocol, c.Closed, len(c.Requests), c.Watches)
		if c.Closed {
			continue
		}
		if leaseWatch(c) {
			watchConns = append(watchConns, c.ID)
			if carries(c, canaryPath) || carries(c, electionPath) {
				t.Fatalf("connection %d carries the Lease watch and the canary's or leader election's requests: the controller has no connection of its own for its Lease watch", c.ID)
			}
		} else if carries(c, canaryPath) && carries(c, electionPath) {
			writeConns = append(writeConns, c.ID)
		}
	}
	if len(watchConns) == 0 || len(writeConns) == 0 {
		t.Fatalf("want an open connection carrying the Lease watch and another carrying the canary and leader election, found %v and %v", watchConns, writeConns)
	}

	leases := f.env.Client.CoordinationV1().Leases
	getLease := func(ns, name string) *coordinationv1.Lease {
		t.Helper()
		l, err := leases(ns).Get(testenv.Context(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	holder := ptr.Deref(getLease(cs.leaderNS, leaderName).Spec.HolderIdentity, "")
	addsBefore := cs.metric(t, 0, "nodehealth_taint_writes_total", taintAdds)
	s := f.snapshot()

	proxy.StallConns(leaseWatch)
	stalled := time.Now()
	stall := 2 * expiry
	f.fail(f.nodes[0])
	t.Logf("Lease watch (connection %v) stalled for %s; %s stops renewing", watchConns, stall, f.nodes[0])
	cs.waitMetric(t, 0, "nodehealth_own_view_stale", nil, 1)
	t.Logf("own view stale %s into the stall (guard after %s)", time.Since(stalled).Round(100*time.Millisecond), 3*canaryInterval)
	canaryStale := getLease(f.leaseNS, nodev1alpha1.ControllerCanaryLease).Spec.RenewTime.Time
	time.Sleep(time.Until(stalled.Add(stall)))

	// The canary kept writing and the leader kept leading: only the
	// watch was cut off.
	if l := getLease(f.leaseNS, nodev1alpha1.ControllerCanaryLease); !l.Spec.RenewTime.After(canaryStale) {
		t.Errorf("the canary Lease was not renewed while the view was stale (renewTime %s): its writes did not go through", l.Spec.RenewTime)
	}
	if l := getLease(cs.leaderNS, leaderName); ptr.Deref(l.Spec.HolderIdentity, "") != holder || !l.Spec.RenewTime.After(stalled.Add(stall/2)) {
		t.Errorf("leader Lease during the stall: holder %q (was %q), renewed %s: leader election was cut off too", ptr.Deref(l.Spec.HolderIdentity, ""), holder, l.Spec.RenewTime)
	}
	for _, c := range proxy.Conns() {
		if c.Stalled && slices.Contains(writeConns, c.ID) {
			t.Errorf("connection %d, the canary's and leader election's, is stalled too", c.ID)
		}
		if c.Stalled && !slices.Contains(watchConns, c.ID) {
			t.Logf("connection %d (opened during the stall) stalled too: watches %v", c.ID, c.Watches)
		}
	}
	for _, n := range f.nodes {
		for _, v := range f.versionsSince(n, s) {
			if v.tainted {
				t.Errorf("node %s tainted during the Lease-watch stall at %s", n, v.at.Format("15:04:05.000"))
			}
		}
	}

	proxy.ResumeConns()
	resumed := time.Now()
	cs.waitMetric(t, 0, "nodehealth_own_view_stale", nil, 0)
	t.Logf("own view current again %s after the Lease watch resumed", time.Since(resumed).Round(100*time.Millisecond))

	f.waitAll(t, "tainted after the stall", f.failing(), f.tainted)
	if d := f.taintedAt(f.nodes[0]).Sub(resumed); d < expiry {
		t.Errorf("%s tainted %s after the Lease watch resumed, within the full grace (%s) recovery must give", f.nodes[0], d.Round(100*time.Millisecond), expiry)
	} else {
		t.Logf("%s tainted %s after the Lease watch resumed (full grace %s)", f.nodes[0], d.Round(100*time.Millisecond), expiry)
	}
	f.waitEvicted(t)
	quiet(expiry + 3*canaryInterval)
	f.check(t, true)
	if adds := cs.metric(t, 0, "nodehealth_taint_writes_total", taintAdds); adds-addsBefore != 1 {
		t.Errorf("nodehealth_taint_writes_total{operation=\"add\"} moved by %v, want 1 (%s only)", adds-addsBefore, f.nodes[0])
	}
	if r := cs.reps[0].Restarts(); r != 0 {
		t.Errorf("the controller restarted %d times; its leader election should not have been affected", r)
	}
}

// The blast radius at the shipped 20 % threshold on 40 nodes (issue 33): 8
// failing (20 %) suspends failure taints; 6 failing (15 %, exactly the resume
// point max(20 − 5, 20 / 2) %) still suspends, since shares are compared in
// integers and "resume below 15 %" means strictly below; 5 failing resumes,
// the nodes still failing are tainted, and a new failure is tainted as
// usual. In float64 the resume point was 0.15000000000000002, and the
// suspension ended at exactly 15 %.
func TestTheBlastRadiusResumesStrictlyBelowItsResumePoint(t *testing.T) {
	f := newFleet(t, "resume", 40)
	cs := f.startControllers(t, 1, controllerConfig{election: defaultElection, clusterThreshold: 20, zoneThreshold: 20})
	f.settleEvaluated(t, cs)
	suspended := map[string]string{"scope": "cluster"}

	failing := f.nodes[:8]
	f.fail(failing...)
	f.waitAll(t, "tainted or held after their Leases expired", failing, func(n string) bool { return f.taintedOrHeld(t, n) })
	cs.waitMetric(t, 0, "nodehealth_gating_suspended", suspended, 1)
	tainted, held := f.split(t, failing)
	t.Logf("8 of 40 failing: tainted %v, held %v", tainted, held)
	// The count is brought up to date at each failure taint decided, so how
	// many are tainted first depends on how far apart the 8 expiries fall
	// (CI saw 3 of 8): the 8th, at 20 %, must be held whatever the spread.
	if len(tainted) >= len(failing) {
		t.Errorf("all %d failing nodes tainted: the 8th, at 20 %% of 40, should have suspended failure taints", len(tainted))
	}

	// Two come back: 6 of 40 is 15 %, the resume point itself.
	f.recover(failing[:2]...)
	f.waitAll(t, "ready again", failing[:2], func(n string) bool {
		status, _ := f.condition(t, n)
		return status == v1.ConditionTrue && !f.tainted(n)
	})
	quiet(3 * time.Second)
	if v := cs.metric(t, 0, "nodehealth_gating_suspended", suspended); v != 1 {
		t.Fatalf("resumed with 6 of 40 failing (15 %%), exactly the resume point: nodehealth_gating_suspended %v, want 1", v)
	}
	for _, n := range failing[2:] {
		if !f.taintedOrHeld(t, n) {
			status, reason := f.condition(t, n)
			t.Errorf("%s, still failing, is neither tainted nor held: %s/%s", n, status, reason)
		}
	}

	// Nothing was evicted while suspended (the eviction timeout, 3 s, ran
	// out long ago).
	f.checkNoEvictions(t)

	// One more: 5 of 40, 12.5 %, below the resume point.
	f.recover(failing[2])
	cs.waitMetric(t, 0, "nodehealth_gating_suspended", suspended, 0)
	f.waitAll(t, "tainted once the suspension ended", failing[3:], f.tainted)

	// A new failure is tainted as usual: 6 of 40 is below the threshold.
	f.fail(f.nodes[10])
	f.waitAll(t, "a new failure tainted", f.nodes[10:11], f.tainted)
	if v := cs.metric(t, 0, "nodehealth_gating_suspended", suspended); v != 0 {
		t.Errorf("nodehealth_gating_suspended %v after a new failure at 15 %%, want 0", v)
	}
}
