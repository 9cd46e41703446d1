package nodehealth

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/sim"
)

// The tests of this file are the compound faults of issue 33: each broke a
// promise of the controller on the main branch before its fix, while every
// earlier test and simulation seed passed.

// drainQueue processes every node the queue holds now, as the workers
// would, copying each written node into the cache. With steppedTimers, the
// timers due by the fake clock are handed over first.
func (f *fixture) drainQueue(nodes ...string) {
	f.t.Helper()
	if q, ok := f.c.queue.(*steppedTimers); ok {
		q.release()
	}
	for f.c.queue.Len() > 0 {
		if !f.c.processNext(f.ctx) {
			f.t.Fatal("the queue was shut down")
		}
		for _, n := range nodes {
			f.refresh(n)
		}
	}
}

// steppedTimers is the controller's node queue with its timers (AddAfter)
// handed over by release, at the fake clock's time, rather than by the
// delaying queue's goroutine at a moment the test cannot see: a timer handed
// over after a drainQueue has looked is evaluated by the next one, which
// can hide what that one is there to show.
type steppedTimers struct {
	workqueue.TypedRateLimitingInterface[string]
	clk *testingclock.FakeClock
	due sim.DueItems
}

// steppedTimers gives the fixture's controller a steppedTimers queue.
func (f *fixture) steppedTimers() {
	f.c.queue = &steppedTimers{TypedRateLimitingInterface: f.c.queue, clk: f.clock}
}

func (q *steppedTimers) AddAfter(item string, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	q.due.Add(item, q.clk.Now().Add(d))
}

// release adds every item whose timer is due.
func (q *steppedTimers) release() {
	for _, item := range q.due.Take(q.clk.Now()) {
		q.Add(item)
	}
}

// Defect 1: an extension that failed open after a reboot (its Lease of the
// previous boot still valid) comes up on a node that is ungated and steady.
// Its renewal is what ends the fail-open, so it must be evaluated, not taken
// for a quiet renewal that only moves the expiry timer: otherwise the node
// keeps saying ExtensionsFailedOpen and is not tainted when the extension
// dies later.
func TestAFailOpenEndsWhenItsExtensionComesUpOnASteadyNode(t *testing.T) {
	f := newFixture(t, withCNI(testOptions(), 5*time.Second, FailurePolicyUngate), readyNode("n1"))
	// Timers are handed over at the fake clock's time: the startup
	// timeout's, handed over by the delaying queue's goroutine during or
	// after a drain, decided whether n1 was evaluated again before cni
	// renewed, and so whether it was steady then (the test caught a
	// renewal taken for a quiet one in 18 runs of 20, in 22 of 60 under
	// load).
	f.steppedTimers()
	f.rebootedWithOldLeases(func() { f.clock.Step(2 * time.Second) })
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.drainQueue("n1")
	if f.tainted("n1") {
		t.Fatalf("still gated once cni's startup timeout passed (condition %s)", f.condition("n1").Reason)
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("condition %s, want %s", r, nodev1alpha1.ReasonExtensionsFailedOpen)
	}

	// The Node watch delivers the ungate and n1 is evaluated again: an
	// ungated node whose Leases are all ready, which would be steady (its
	// renewals only moving the expiry timer) but for the fail-open.
	f.c.enqueue("n1")
	f.drainQueue("n1")

	// cni comes up: the informer delivers its renewal, the workers run.
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.drainQueue("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsReady {
		t.Fatalf("condition %s after cni renewed in this boot, want %s: the renewal that ends the fail-open was taken for a quiet one", r, nodev1alpha1.ReasonExtensionsReady)
	}

	// cni dies: the node is tainted at once, like for any failure.
	f.clock.Step(time.Second)
	f.release("cni", "n1", "Crashed")
	f.drainQueue("n1")
	if !f.tainted("n1") {
		t.Fatalf("not tainted when cni, up in this boot, released its Lease (condition %s)", f.condition("n1").Reason)
	}
}

// Defect 2: the blast radius resumes strictly below its resume point,
// max(threshold − 5 points, threshold / 2), at every whole-percent threshold.
// In float64, 0.20 − 0.05 is 0.15000000000000002, so the default 20 %
// resumed at exactly 15 %.
func TestTheBlastRadiusResumesStrictlyBelowItsResumePointAtEveryThreshold(t *testing.T) {
	const total = 200 // every resume point is a whole number of nodes
	for pct := 1; pct <= 100; pct++ {
		b := newBlastRadius(BlastRadiusOptions{ClusterThreshold: float64(pct) / 100})
		for i := range total {
			b.update(fmt.Sprintf("n%03d", i), "", true, false)
		}
		setFailing := func(n int) {
			for i := range total {
				b.update(fmt.Sprintf("n%03d", i), "", true, i < n)
			}
		}
		suspended := func() bool { s, _ := b.suspended(""); return s }
		atThreshold := max(2*pct, minFailingToSuspend+1)
		setFailing(atThreshold - 1)
		if suspended() && atThreshold-1 > minFailingToSuspend {
			t.Errorf("threshold %d%%: suspended with %d of %d failing, below the threshold", pct, atThreshold-1, total)
		}
		setFailing(atThreshold)
		if !suspended() {
			t.Errorf("threshold %d%%: not suspended with %d of %d failing", pct, atThreshold, total)
			continue
		}
		resumePoint := max(2*(pct-5), pct) // in nodes of 200: max(pct − 5, pct / 2) %
		setFailing(resumePoint)
		if resumePoint > minFailingToSuspend && !suspended() {
			t.Errorf("threshold %d%%: resumed at %d of %d failing, exactly the resume point; want strictly below", pct, resumePoint, total)
		}
		setFailing(resumePoint - 1)
		if suspended() {
			t.Errorf("threshold %d%%: still suspended at %d of %d failing, below the resume point", pct, resumePoint-1, total)
		}
	}
}

// Defect 3 (simulation seed 2696022713275813172): the own-view recovery
// judges readiness as it was when the guard fired. A Lease already expired
// then gets no grace from the recovery, and a real renewal the catching-up
// watch delivers in the same second as the recovery stays a renewal: it
// ends the fail-open of its extension.
func TestARenewalDeliveredWithTheRecoveryStillEndsAFailOpen(t *testing.T) {
	f := newFixture(t, withCNI(guardOptions(), 5*time.Second, FailurePolicyUngate), readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.pass(2*time.Second, true) })
	f.pass(6*time.Second, true)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if r := f.condition("n1").Reason; f.tainted("n1") || r != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("tainted %v, condition %s; want ungated with cni failed open", f.tainted("n1"), r)
	}
	// cni's Lease of the previous boot expires (it never came up), then
	// the watch stalls.
	f.pass(50*time.Second, true, "n1")
	f.sync("n1")
	f.pass(20*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the view did not go stale")
	}
	// The watch catches up: cni's first renewal of this boot arrives in
	// the same second as the canary's, and the recovery runs.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	f.canaryRenewed()
	f.checkView()
	if f.c.canary.stale() {
		t.Fatal("the view did not recover")
	}
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsReady {
		t.Fatalf("condition %s, want %s: cni's real renewal was taken for the recovery's grace", r, nodev1alpha1.ReasonExtensionsReady)
	}
}

// Defect 4: gates restart at an own-view recovery from the controller's own
// record of the gates it decided, not from whether the taint has reached
// its informer cache. A reboot gated just before the stall, whose taint the
// cache does not show yet, keeps needing a renewal after the recovery: the
// recovery's grace on the Leases of the previous boot must not end it.
func TestARebootGatedJustBeforeAStallIsNotEndedByTheRecoverysGrace(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.pass(10*time.Second, true, "n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	// The gate is decided and written, but the informer has not delivered
	// the tainted node when the watch stalls.
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if !f.tainted("n1") {
		t.Fatal("the reboot was not gated")
	}
	f.pass(20*time.Second, false)
	f.pass(5*time.Second, true)
	if f.c.canary.stale() {
		t.Fatal("the view did not recover")
	}
	// The catching-up watch delivers, in the recovery's instant, a
	// renewal that may have been made before the reboot.
	f.renew("kube-proxy", "n1")
	f.refresh("n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated without a renewal known to follow the reboot: the gate did not restart at the recovery, so a renewal the stalled watch delivered late ended it")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated by a renewal after the recovery")
	}
}

// noExecuteEscalationDecided is n1 in mode NoExecute with a one-minute
// eviction timeout, failing since kube-proxy stopped renewing (tainted at
// the expiry), its escalation decided: the rate-limited escalation marked
// it and queued it for the NoExecute taint, not yet synced.
func noExecuteEscalationDecided(t *testing.T) *fixture {
	t.Helper()
	opts := guardOptions()
	opts.Eviction.Mode = EvictionModeNoExecute
	opts.Eviction.Timeout = time.Minute
	f := newFixture(t, opts, readyNodes("n1")...)
	f.sync("n1")
	// kube-proxy stops renewing; the view stays current.
	f.pass(51*time.Second, true)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not tainted at the expiry")
	}
	f.pass(61*time.Second, true)
	f.sync("n1")
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	return f
}

// Defect 5: guards come first in every path that adds a taint, NoExecute
// included. An escalation decided before the own view went stale (or before
// the blast radius suspended) adds no NoExecute taint while the guard
// holds; it does once the guard lifts and the node still fails.
func TestNoExecuteIsNotAddedWhileAGuardHolds(t *testing.T) {
	f := noExecuteEscalationDecided(t)
	// Before that sync runs, the watch stalls.
	f.pass(20*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the view did not go stale")
	}
	f.sync("n1")
	if nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Fatal("NoExecute added while the own view is stale")
	}
	f.pass(5*time.Second, true)
	f.sync("n1")
	if !nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Fatal("NoExecute not added once the guard lifted and the node still fails")
	}
}

// A NoExecute variant someone removed comes back only with an escalation of
// a failure that stands: not on a node gated for its reboot (nothing fails
// in a boot that has not been ready), at once on one still failing. The
// case of a gate that a stall's lift restarted on an extension whose renewal
// came with the stall's end is simulation seed 7696200425686681866's.
func TestANoExecuteVariantSomeoneRemovedComesBackOnlyWhileTheFailureStands(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rebooted bool
	}{
		{"rebooted: gated, not failing", true},
		{"still failing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := noExecuteEscalationDecided(t)
			f.sync("n1")
			if !nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
				t.Fatal("not escalated")
			}
			if tc.rebooted {
				f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
				f.sync("n1")
				if f.condition("n1").Reason != nodev1alpha1.ReasonNodeRebooted {
					t.Fatalf("not gated for the reboot: %s", f.condition("n1").Reason)
				}
			}
			// Another writer takes every taint of the key off.
			f.updateNode("n1", func(n *v1.Node) { n.Spec.Taints, _ = nodeutil.RemoveTaints(n.Spec.Taints, testKey) })
			f.sync("n1")
			if !f.tainted("n1") {
				t.Fatal("the gate's taint did not come back")
			}
			if got := nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute); got == tc.rebooted {
				t.Fatalf("NoExecute on the node: %v, want %v", got, !tc.rebooted)
			}
		})
	}
}

// Defect 6: the own-view guard must fire before a healthy Lease can expire
// in a stall. A renewer renews at least every quarter of its duration (the
// heartbeat refuses more), so a Lease of the minimum duration may be 3/4 of
// it from its expiry when a stall begins: 3 × canaryInterval must be less
// than minimumLeaseDuration × 3/4 + renewalGrace.
func TestTheGuardTimingAccountsForARenewalAQuarterOfADurationOld(t *testing.T) {
	for _, tc := range []struct {
		canary, minLease, grace time.Duration
		ok                      bool
	}{
		{5 * time.Second, 10 * time.Second, 10 * time.Second, true},      // defaults: 15 s < 17.5 s
		{5 * time.Second, 10 * time.Second, 6 * time.Second, false},      // 15 s ≥ 13.5 s (was accepted: 15 s < 16 s)
		{4 * time.Second, 10 * time.Second, 5 * time.Second, true},       // 12 s < 12.5 s
		{5 * time.Second, 20 * time.Second, 0, false},                    // 15 s ≥ 15 s
		{1 * time.Second, 4 * time.Second, 500 * time.Millisecond, true}, // 3 s < 3.5 s
	} {
		opts := testOptions()
		opts.CanaryInterval, opts.MinimumLeaseDuration, opts.RenewalGrace = tc.canary, tc.minLease, tc.grace
		if err := opts.Validate(); (err == nil) != tc.ok {
			t.Errorf("canary %s, minimum lease %s, grace %s: error %v, want ok=%v", tc.canary, tc.minLease, tc.grace, err, tc.ok)
		}
	}
}

// A decision made on a cached node is not replayed on a fresh read that
// shows the node rebooted meanwhile: the write after the conflict ends in an
// error, and the node is decided again on what it is now.
func TestAWriteAfterAConflictIsDecidedAgainWhenTheNodeRebootedMeanwhile(t *testing.T) {
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.clock.Step(51 * time.Second)
	f.conflictOnFirstPatch("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	err := f.c.syncNode(f.ctx, "n1")
	if !errors.Is(err, errDecidedOnAnOlderNode) {
		t.Fatalf("sync after a conflict that revealed a reboot: err %v, want %v", err, errDecidedOnAnOlderNode)
	}
	if f.tainted("n1") {
		t.Fatal("the failure taint decided on the old boot was written on the fresh read")
	}
	f.refresh("n1") // the informer delivers the rebooted node
	f.sync("n1")
	if r := f.condition("n1").Reason; !f.tainted("n1") || r != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("decided again: tainted %v, reason %s; want gated as %s", f.tainted("n1"), r, nodev1alpha1.ReasonNodeRebooted)
	}
}

// Found by the simulation (seed 16893502492448166993): a leaving node's
// failure taint is not held by the blast radius, as the node is not counted
// in it. When the autoscaler takes its leaving taint off before the write
// lands (here, the conflict's fresh read shows it gone), the node counts
// again and may be what tips the cluster into a suspension: the write is
// decided again, not replayed, and the suspension holds the taint.
func TestAWriteAfterAConflictIsDecidedAgainWhenTheNodeStoppedLeavingMeanwhile(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	f.updateNode("a", withLeavingTaint(nodev1alpha1.TaintToBeDeletedByClusterAutoscaler))
	f.sync("a")
	for _, n := range []string{"a", "b", "c"} {
		f.release("kube-proxy", n, "Unhealthy")
	}
	f.syncAll("b", "c")
	f.expectTainted(map[string]bool{"b": true, "c": true})
	f.conflictOnFirstPatch("a", func(n *v1.Node) { n.Spec.Taints = nil })
	err := f.c.syncNode(f.ctx, "a")
	if !errors.Is(err, errDecidedOnAnOlderNode) {
		t.Fatalf("sync after a conflict that showed the node no longer leaving: err %v, want %v", err, errDecidedOnAnOlderNode)
	}
	if f.tainted("a") {
		t.Fatal("the taint decided for the leaving node was written on a node that no longer leaves")
	}
	f.refresh("a") // the informer delivers the node without its leaving taint
	f.sync("a")
	if r := f.condition("a").Reason; f.tainted("a") || r != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("decided again: tainted %v, reason %s; want held (%s): 3 of 6 nodes fail", f.tainted("a"), r, nodev1alpha1.ReasonGatingSuspended)
	}
}

// A restart does not resurrect a known-dead extension: the boot record of a
// node in service marks each Lease judged expired at its renewTime, and a
// restarted controller gives such a Lease no start grace. Before, the held
// nodes read ExtensionsReady for a Lease duration + grace after a restart,
// and the update operator's health gate trusts that condition.
func TestARestartDuringASuspensionKeepsTheHeldNodesHeldThroughTheStartGrace(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	// n1 and n2 stop renewing at 0 s, n3 and n4 at 10 s.
	for i := range 6 {
		f.clock.Step(10 * time.Second)
		renewing := names[4:]
		if i == 0 {
			renewing = names[2:]
		}
		for _, n := range renewing {
			f.renew("kube-proxy", n)
		}
		// n1 and n2 expire at 50 s (tainted: 2 of 6), n3 and n4 at 60 s
		// (held: 4 of 6 at a 50 % threshold).
		f.syncAll(names...)
	}
	f.expectTainted(map[string]bool{"n3": false, "n4": false, "n5": false, "n6": false})
	for _, n := range []string{"n3", "n4"} {
		if r := f.condition(n).Reason; r != nodev1alpha1.ReasonGatingSuspended {
			t.Fatalf("%s before the restart: %s, want held (%s)", n, r, nodev1alpha1.ReasonGatingSuspended)
		}
		rec, _ := parseBootRecord(f.node(n).Annotations[nodev1alpha1.BootAnnotation])
		if _, ok := rec.Dead["kube-proxy"]; !ok {
			t.Fatalf("%s's boot record marks no dead Lease: %s", n, rec)
		}
	}
	g := f.restart(testOptions())
	g.c.primeBlastRadius(g.ctx)
	for elapsed := time.Duration(0); elapsed <= 60*time.Second; elapsed += 5 * time.Second {
		g.syncAll(names...)
		for _, n := range []string{"n3", "n4"} {
			if c := g.condition(n); c.Status == v1.ConditionTrue || g.tainted(n) {
				t.Fatalf("%s %s after the restart: tainted %v, condition %s/%s; want still held", n, elapsed, g.tainted(n), c.Status, c.Reason)
			}
		}
		g.clock.Step(5 * time.Second)
		for _, n := range names[4:] {
			g.renew("kube-proxy", n)
		}
	}
	// A renewal ends the mark like any failure.
	g.renew("kube-proxy", "n3")
	g.sync("n3")
	if c := g.condition("n3"); c.Status != v1.ConditionTrue {
		t.Fatalf("n3 renewed: condition %s/%s, want True", c.Status, c.Reason)
	}
	if rec, _ := parseBootRecord(g.node("n3").Annotations[nodev1alpha1.BootAnnotation]); len(rec.Dead) != 0 {
		t.Fatalf("n3 renewed, but its record still marks %v dead", rec.Dead)
	}
}

// threeOfSixFailing is a cluster of six nodes, n1 to n6, whose first three
// stopped renewing: the cluster's blast radius (50 %) suspends.
func threeOfSixFailing(t *testing.T) *fixture {
	t.Helper()
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	for range 5 {
		f.clock.Step(10 * time.Second)
		for _, n := range names[3:] {
			f.renew("kube-proxy", n)
		}
	}
	f.syncAll(names...)
	if s, why := f.c.blast.suspended(""); !s {
		t.Fatalf("3 of 6 failing at a 50 %% threshold: not suspended (%s)", why)
	}
	return f
}

// A node whose extension list becomes invalid cannot be judged, so it counts
// on neither side of the blast radius; before, it kept the failing status it
// last had, and a suspension it was part of could not end.
func TestANodeWithAnInvalidListLeavesTheBlastRadius(t *testing.T) {
	f := threeOfSixFailing(t)
	f.updateNode("n3", func(n *v1.Node) { n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"kube-proxy"` })
	f.sync("n3")
	if s, why := f.c.blast.suspended(""); s {
		t.Fatalf("n3's list is invalid, 2 of 5 judged nodes fail: still suspended (%s)", why)
	}
}

// An excluded node is the controller's no longer: its failure stops counting
// in the blast radius the moment it is excluded, as if it had left (the
// exclusion class of the simulation; a controller that kept its memory of the
// node kept a suspension up on the failures of nodes it no longer judged).
func TestAnExcludedNodeLeavesTheBlastRadius(t *testing.T) {
	f := threeOfSixFailing(t)
	f.updateNode("n3", func(n *v1.Node) { n.Labels = map[string]string{nodev1alpha1.ExcludeLabel: "true"} })
	f.sync("n3")
	if s, why := f.c.blast.suspended(""); s {
		t.Fatalf("n3 is excluded, 2 of 5 judged nodes fail: still suspended (%s)", why)
	}
}

// An ungate decided and not written (the Node changed under the patch: a
// label that brings a new gating extension) leaves the taint of the ended
// gate on the node. The decision taken again sees a new failure, which the
// blast radius holds: the leftover taint goes with the held failure, as it
// would have had the ungate been written first (simulation seed
// 16365078962249930749: the controller kept the node tainted for a failure
// the suspension held).
func TestAHeldFailureAfterAnUngateThatWasNotWrittenRemovesTheLeftoverTaint(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.SelectorFromSet(labels.Set{"cni": "true"}),
		AffectsReadiness: true, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNodes(names...)...)
	f.syncAll(names...)
	f.clock.Step(time.Second)
	for _, n := range []string{"n2", "n3", "n4"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	f.expectTainted(map[string]bool{"n2": true, "n3": true, "n4": false})

	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("n1 not gated for its reboot: tainted %v, %s", f.tainted("n1"), f.condition("n1").Reason)
	}

	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	// The ungate's patch meets the label, written a moment before.
	labelled := false
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if labelled || action.(core.PatchAction).GetName() != "n1" || action.GetSubresource() != "" {
			return false, nil, nil
		}
		labelled = true
		obj, err := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "n1")
		if err != nil {
			return true, nil, err
		}
		n := obj.(*v1.Node).DeepCopy()
		n.Labels = labels.Merge(n.Labels, labels.Set{"cni": "true"})
		n.ResourceVersion = "labelled"
		if err := f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(v1.Resource("nodes"), "n1", errors.New("the object has been modified"))
	})
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the ungate was written although the node changed under it")
	}
	f.refresh("n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Errorf("n1 tainted for a failure the suspension holds (condition %s)", f.condition("n1").Reason)
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("n1's condition: %s, want %s", r, nodev1alpha1.ReasonGatingSuspended)
	}
}

// refuseNodePatches makes the API server refuse every patch of the node
// (its object and its status) while *refusing holds, as in an outage of the
// controller's writes.
func (f *fixture) refuseNodePatches(name string, refusing *bool) {
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if !*refusing || action.(core.PatchAction).GetName() != name {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(errors.New("injected server error"))
	})
}

// A reboot's ungate whose write the API server refused leaves the boot
// record of the previous boot on the node. The node, in service in its new
// boot, fails before the write is taken again: it stays tainted, now for the
// failure, and nothing ungates it to write the record. A restarted
// controller took that record for a reboot while it was down and reported
// the failure as NodeRebooted, a start-up that never escalates (simulation
// seeds 4052673543596324612 and 13502343339044881667).
func TestAFailureAfterAnUngateThatWasNotWrittenRecordsTheBootSoARestartDoesNotSeeAReboot(t *testing.T) {
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("n1 not gated for its reboot: tainted %v, %s", f.tainted("n1"), f.condition("n1").Reason)
	}

	refusing := true
	f.refuseNodePatches("n1", &refusing)
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the ungate was written although the API server refused it")
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	refusing = false
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("n1 failed: tainted %v, %s; want tainted, %s", f.tainted("n1"), f.condition("n1").Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
	if rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation]); rec.BootID != "boot-2" || rec.Pending {
		t.Errorf("n1 was in service in boot-2, but its boot record is %s", rec)
	}

	g := f.restart(testOptions())
	g.sync("n1")
	if r := g.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsNotReady {
		t.Errorf("after a restart n1's condition is %s, want %s (it did not reboot while the controller was down)", r, nodev1alpha1.ReasonExtensionsNotReady)
	}
}

// A reboot's ungate whose write the API server refused leaves its taint on
// the node. The node reboots again while the own view is stale: the taint
// on it is not the new reboot's (its addition is held like any other), so
// the reboot is pending, and only renewals observed after the lift end it.
// The controller took the leftover taint for the new gate's and ended that
// gate before the lift on a renewal the catching-up watch delivered
// (simulation seed 5144553269545614998: ungated 5 s after the reboot,
// then tainted ExtensionsNotReady when kube-proxy, dead since, expired).
func TestARebootWhileTheViewIsStaleAfterAnUngateThatWasNotWrittenIsPendingUntilTheLift(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("n1 not gated for its reboot: tainted %v, %s", f.tainted("n1"), f.condition("n1").Reason)
	}

	refusing := true
	f.refuseNodePatches("n1", &refusing)
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the ungate was written although the API server refused it")
	}
	f.pass(20*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("not stale")
	}
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-3" })
	_ = f.c.syncNode(f.ctx, "n1") // refused
	f.refresh("n1")

	// The writes are taken again, and the watch catches up: a renewal is
	// delivered before the canary's check has noticed that the view is
	// current again.
	refusing = false
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.canaryRenewed()
	f.sync("n1")
	f.checkView()
	if f.c.canary.stale() {
		t.Fatal("the view did not recover")
	}
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("after the lift: tainted %v, %s; want tainted, %s (the reboot seen while the view was stale ended before the guard lifted)",
			f.tainted("n1"), f.condition("n1").Reason, nodev1alpha1.ReasonNodeRebooted)
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated by a renewal after the guard lifted")
	}
}

// A Node re-created under its name while the controller's Node watch was
// down is seen as an update with another UID. The new object carries
// nothing the controller wrote, so the readiness taint it was created with
// (kubelet registerWithTaints, the admission policy) is the re-creation's
// gate, also while the own view is stale. The controller took it for the
// leftover of an ended gate (as a reboot's would be), held the gate and
// took the taint off a machine none of whose extensions had renewed
// (simulation seed 12441625308791025956, a re-creation behind a stalled
// watch while the canary's renewals failed).
func TestANodeReCreatedUnseenWhileTheViewIsStaleKeepsTheTaintItWasCreatedWith(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stale, held  bool
		beforeReason string
	}{
		{name: "in service, own view current", beforeReason: nodev1alpha1.ReasonExtensionsReady},
		{name: "in service, own view stale", stale: true, beforeReason: nodev1alpha1.ReasonExtensionsReady},
		// The old object's failure is held by the stale view: neither is
		// the taint on the new object a leftover of that gate.
		{name: "held for a failure, own view stale", stale: true, held: true, beforeReason: nodev1alpha1.ReasonGatingSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, guardOptions(), readyNodes("n1")...)
			f.sync("n1")
			renewing := []string{"n1"}
			if tc.held {
				renewing = nil
			}
			f.pass(20*time.Second, !tc.stale, renewing...)
			if f.c.canary.stale() != tc.stale {
				t.Fatalf("own view stale = %v, want %v", f.c.canary.stale(), tc.stale)
			}
			if tc.held {
				f.pass(35*time.Second, false)
			}
			f.sync("n1")
			if f.tainted("n1") || f.condition("n1").Reason != tc.beforeReason {
				t.Fatalf("before the re-creation: tainted %v, %s; want untainted, %s", f.tainted("n1"), f.condition("n1").Reason, tc.beforeReason)
			}
			f.updateNode("n1", func(n *v1.Node) {
				n.UID = "uid-n1-again"
				n.Annotations = nil
				n.Spec.Taints = []v1.Taint{{Key: testKey, Effect: v1.TaintEffectNoSchedule}}
				n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c v1.NodeCondition) bool {
					return c.Type == nodev1alpha1.SystemExtensionsReadyCondition
				})
			})
			f.sync("n1")
			if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonNodeRecreated {
				t.Fatalf("after the re-creation: tainted %v, %s; want tainted, %s (the taint it was created with is its gate)",
					f.tainted("n1"), f.condition("n1").Reason, nodev1alpha1.ReasonNodeRecreated)
			}
		})
	}
}

// The ungate's write failed again and again in an outage of the
// controller's writes, so the taint of the ended gate stayed on the node;
// the own view went stale and the Lease then expired, a failure the guard
// holds. The failure gate began in an evaluation whose write failed too, so
// the taint is still a leftover in the retries after it, and when the view
// recovers the Lease, ready when the guard fired, is ready by the
// recovery's grace: the held node is ungated without waiting for a renewal,
// as it would have been had the ungate been written, whether the outage
// ends before the recovery or after it (simulation seed
// 5546801762588968901: the controller kept the node tainted for a failure
// the blast radius held).
func TestALeftoverTaintWhoseRemovalAnOutageRefusedStaysOwedAcrossRetriesAndTheRecovery(t *testing.T) {
	for _, outageEndsFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("outage-ends-before-the-recovery=%v", outageEndsFirst), func(t *testing.T) {
			f := crashedAndTainted(t, guardOptions())

			outage := true
			f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
				if !outage || action.(core.PatchAction).GetName() != "n1" {
					return false, nil, nil
				}
				return true, nil, apierrors.NewTimeoutError("the API server does not take the controller's writes", 0)
			})
			f.clock.Step(time.Second)
			f.renew("kube-proxy", "n1")
			if err := f.c.syncNode(f.ctx, "n1"); err == nil {
				t.Fatal("the ungate was written in the outage")
			}
			// The view goes stale, then kube-proxy's Lease expires in it:
			// the failure is held, and each retry's write fails too.
			f.pass(20*time.Second, false)
			if !f.c.canary.stale() {
				t.Fatal("the own view is not stale")
			}
			f.pass(35*time.Second, false)
			for i := 0; i < 2; i++ {
				if err := f.c.syncNode(f.ctx, "n1"); err == nil {
					t.Fatalf("retry %d: nothing written in the outage", i)
				}
			}
			if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
				t.Fatalf("the outage wrote n1: tainted %v, condition %s", f.tainted("n1"), c.Reason)
			}

			if outageEndsFirst {
				outage = false
				f.sync("n1")
				if f.tainted("n1") {
					t.Errorf("n1 tainted for a failure the own-view guard holds (condition %s)", f.condition("n1").Reason)
				}
			}
			// The view recovers: the Lease ready when the guard fired is
			// ready again, and the held node owes no renewal.
			f.pass(6*time.Second, true)
			if f.c.canary.stale() {
				t.Fatal("the own view did not recover")
			}
			if !outageEndsFirst {
				if err := f.c.syncNode(f.ctx, "n1"); err == nil {
					t.Fatal("nothing written in the outage")
				}
				outage = false
			}
			f.sync("n1")
			if c := f.condition("n1"); f.tainted("n1") || c.Status != v1.ConditionTrue {
				t.Errorf("after the recovery n1 is tainted %v with condition %s/%s, want untainted and True: the leftover taint became a gate waiting for a renewal", f.tainted("n1"), c.Status, c.Reason)
			}
		})
	}
}

// A node held with the leftover taint of an ungate an outage refused, still
// failing when the own view recovers and the outage goes on, is tainted for
// what fails then: its gate waits only for that. kube-proxy, whose expiry
// only the stale view saw and which the recovery's grace made ready, owes
// no renewal, as for a held node whose taint was removed (seed
// 15089412335168732690's rule, with the taint still on).
func TestAHeldNodeWithALeftoverTaintTaintedAtTheRecoveryWaitsOnlyForWhatFailsThen(t *testing.T) {
	f := crashedAndTainted(t, withCNI(guardOptions(), 0, FailurePolicyKeepGated), "cni")

	outage := true
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if !outage || action.(core.PatchAction).GetName() != "n1" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTimeoutError("the API server does not take the controller's writes", 0)
	})
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the ungate was written in the outage")
	}
	// The view goes stale; cni fails, then kube-proxy's Lease expires in
	// the stale view.
	f.pass(20*time.Second, false)
	f.release("cni", "n1", "Crash")
	_ = f.c.syncNode(f.ctx, "n1")
	f.pass(35*time.Second, false)
	_ = f.c.syncNode(f.ctx, "n1")
	// The view recovers while the outage goes on: kube-proxy is ready by
	// the recovery's grace, cni still fails, and the node is tainted for it.
	f.pass(6*time.Second, true)
	if f.c.canary.stale() {
		t.Fatal("the own view did not recover")
	}
	_ = f.c.syncNode(f.ctx, "n1")
	outage = false
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatalf("n1 not tainted for cni after the recovery (condition %s)", f.condition("n1").Reason)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Errorf("n1 still tainted once cni came back (condition %s): its gate waited for a renewal of kube-proxy, ready by the recovery's grace", f.condition("n1").Reason)
	}
}

// A failure taint the controller wrote is the gate's even while the Node
// cache does not show it yet. A suspension that begins before the cache
// catches up withholds new failure taints only: the node's next evaluation
// must not take the gate in force for a held one, and, once the cache shows
// the taint, remove it as the leftover of a held gate (simulation seed
// 1221797598538672297: one second brought a release on n5 and a new gating
// extension on n29; the controller tainted n5, suspended the zone at n29,
// and removed n5's taint in that second).
func TestAFailureTaintWrittenBeforeASuspensionStaysWhileTheCacheLagsBehindIt(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n2", "Crash")
	f.sync("n2")
	// n3's taint is written; the cache will not show it for a while.
	f.release("kube-proxy", "n3", "Crash")
	if err := f.c.syncNode(f.ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	if !f.tainted("n3") {
		t.Fatal("n3 not tainted for its failure before the suspension")
	}
	f.release("kube-proxy", "n4", "Crash")
	f.sync("n4")
	if f.tainted("n4") || f.condition("n4").Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("the third failure of six did not suspend gating: n4 tainted %v, %s", f.tainted("n4"), f.condition("n4").Reason)
	}

	// n3 evaluated again on the lagging cache, then once it caught up.
	if err := f.c.syncNode(f.ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	f.refresh("n3")
	f.sync("n3")
	if !f.tainted("n3") {
		t.Errorf("n3's failure taint, placed before the suspension, was removed by it")
	}
	if r := f.condition("n3").Reason; r != nodev1alpha1.ReasonExtensionsNotReady {
		t.Errorf("n3's condition: %s, want %s (the gate in force, not a held one)", r, nodev1alpha1.ReasonExtensionsNotReady)
	}
}

// The controller remembers its taint write only until its cache shows the
// taint: a failure taint another writer removes during a suspension is a
// new taint, which the suspension holds (the node says GatingSuspended)
// rather than the controller putting it back at once.
func TestAFailureTaintAnotherWriterRemovesDuringASuspensionIsHeldLikeANewOne(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	f.clock.Step(time.Second)
	for _, n := range []string{"n2", "n3", "n4"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	f.expectTainted(map[string]bool{"n2": true, "n3": true, "n4": false})

	f.updateNode("n3", func(n *v1.Node) {
		n.Spec.Taints, _ = nodeutil.RemoveTaints(n.Spec.Taints, testKey)
	})
	f.sync("n3")
	if f.tainted("n3") {
		t.Error("n3's taint, removed by another writer, was put back during the suspension")
	}
	if r := f.condition("n3").Reason; r != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("n3's condition: %s, want %s", r, nodev1alpha1.ReasonGatingSuspended)
	}
}
