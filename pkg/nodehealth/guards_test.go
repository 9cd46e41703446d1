package nodehealth

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// The tests of this file put one fault on top of another, the way incidents
// unfold: a guard holding a taint back, then an API server or etcd stall; a
// restart in the middle of an expiry; a drain cut by a suspension (issue 20).

// guardOptions are the test options with the canary on (5 s, so the view
// goes stale 15 s after the last observed renewal, before a 40 s Lease with
// 10 s of grace can expire).
func guardOptions() Options {
	opts := testOptions()
	opts.CanaryInterval = 5 * time.Second
	opts.MinimumLeaseDuration = 10 * time.Second
	return opts
}

// canaryRenewed delivers a renewal of the controller's canary Lease, as its
// watch would, and stores it as the API server would have.
func (f *fixture) canaryRenewed() {
	f.t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: nodev1alpha1.ControllerCanaryLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(f.c.opts.Identity), RenewTime: &metav1.MicroTime{Time: f.clock.Now()}}}
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	err := f.client.Tracker().Update(gvr, l.DeepCopy(), testNS)
	if apierrors.IsNotFound(err) {
		err = f.client.Tracker().Add(l.DeepCopy())
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.putLease(l)
}

// checkView runs the canary's check as its loop would at this instant.
func (f *fixture) checkView() {
	if stale, changed := f.c.canary.check(f.clock.Now()); changed {
		f.c.ownViewChanged(f.ctx, stale, f.clock.Now())
	}
}

// pass lets d go by one second at a time: when watching, the canary's
// renewals are observed every 5 s and the named Leases renewed every 10 s;
// the canary is checked every second. Nothing is synced.
func (f *fixture) pass(d time.Duration, watching bool, renewing ...string) {
	for i := 1; i <= int(d/time.Second); i++ {
		f.clock.Step(time.Second)
		if watching && f.clock.Now().Unix()%5 == 0 {
			f.canaryRenewed()
		}
		if watching && f.clock.Now().Unix()%10 == 0 {
			for _, n := range renewing {
				f.renew("kube-proxy", n)
			}
		}
		f.checkView()
	}
}

// passUntilRecovered lets seconds go by, watching, until the own view
// recovers, and stops in the recovery's instant.
func (f *fixture) passUntilRecovered() {
	f.t.Helper()
	for i := 0; f.c.canary.stale(); i++ {
		if i == 10 {
			f.t.Fatal("the own view did not recover within 10 s of watching")
		}
		f.pass(time.Second, true)
	}
}

func (f *fixture) syncAll(names ...string) {
	for _, n := range names {
		f.sync(n)
	}
}

func (f *fixture) expectTainted(want map[string]bool) {
	f.t.Helper()
	for n, w := range want {
		if got := f.tainted(n); got != w {
			f.t.Errorf("node %s tainted: %v, want %v (condition %s)", n, got, w, f.condition(n).Reason)
		}
	}
}

func taintAdds(f *fixture) int {
	n := 0
	for _, a := range f.writes() {
		if p, ok := a.(core.PatchAction); ok && p.GetResource().Resource == "nodes" && p.GetSubresource() == "" {
			if m := patchOf(f.t, a); m["spec"] != nil && fmt.Sprint(m["spec"]) != "" {
				n++
			}
		}
	}
	return n
}

func readyNodes(names ...string) []runtime.Object {
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	return objs
}

// Issue 20 item 1, scenario A: an etcd or watch stall longer than Lease
// duration + grace. Expiry timers fire during the stall and the own-view
// guard holds the taints; when the view recovers every Lease that was ready
// when it went stale gets full grace, and no node is tainted for the
// renewals the stall hid (docs/controller.md: such an outage ends with no taint
// added).
func TestAStallLongerThanALeaseEndsWithNoTaintAdded(t *testing.T) {
	names := []string{"a", "b", "c"}
	f := newFixture(t, guardOptions(), readyNodes(names...)...)
	f.syncAll(names...)
	f.pass(30*time.Second, true, names...)
	f.syncAll(names...)
	f.writes()
	// The watch stalls for 70 s: the canary goes stale after 15 s, the
	// Leases (last observed at t0+30s) expire at t0+80s and their timers
	// fire during the stall.
	f.pass(70*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the canary did not go stale")
	}
	f.syncAll(names...)
	for _, n := range names {
		if c := f.condition(n); c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Errorf("node %s: condition %s during the stall, want %s", n, c.Reason, nodev1alpha1.ReasonGatingSuspended)
		}
	}
	// The view recovers; the Leases were renewed all along.
	f.pass(5*time.Second, true, names...)
	if f.c.canary.stale() {
		t.Fatal("the canary did not recover")
	}
	f.syncAll(names...)
	f.expectTainted(map[string]bool{"a": false, "b": false, "c": false})
	if n := taintAdds(f); n != 0 {
		t.Errorf("%d taint writes after the stall, want none", n)
	}
	for _, n := range names {
		if c := f.condition(n); c.Status != v1.ConditionTrue {
			t.Errorf("node %s: condition %s/%s after the recovery, want True", n, c.Status, c.Reason)
		}
	}
}

// Issue 20 item 1, scenario B: 6 nodes, a 50 % threshold; two fail and are
// tainted, two more fail and are held by the blast radius. A 20 s canary
// blip must not taint the held ones: their Leases were not ready when the
// view went stale, so the recovery does not refresh them, they still fail,
// and the blast radius still holds them.
func TestACanaryBlipDuringABlastRadiusHoldTaintsNoHeldNode(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	opts := guardOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, readyNodes(names...)...)
	f.syncAll(names...)
	// a and b stop renewing first and are tainted (2 failing: no
	// suspension); c and d stop 20 s later and are held.
	f.pass(60*time.Second, true, "c", "d", "e", "f")
	f.syncAll(names...)
	f.expectTainted(map[string]bool{"a": true, "b": true})
	f.pass(60*time.Second, true, "e", "f")
	f.syncAll(names...)
	f.expectTainted(map[string]bool{"a": true, "b": true, "c": false, "d": false, "e": false, "f": false})
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("4 of 6 failing did not suspend failure taints")
	}
	f.writes()
	// A 20 s blip of the canary.
	f.pass(20*time.Second, false)
	f.syncAll(names...)
	f.pass(5*time.Second, true, "e", "f")
	f.syncAll(names...)
	f.expectTainted(map[string]bool{"a": true, "b": true, "c": false, "d": false, "e": false, "f": false})
	for _, n := range []string{"c", "d"} {
		if c := f.condition(n); c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Errorf("held node %s: condition %s, want %s", n, c.Reason, nodev1alpha1.ReasonGatingSuspended)
		}
	}
	if n := taintAdds(f); n != 0 {
		t.Errorf("%d taint writes across the blip, want none", n)
	}
}

// Issue 20 item 2: own-view recovery pauses eviction clocks, it never resets
// them. A node failing before each blip still fails after it: blips less
// than evictionTimeout apart must not keep it from being evicted.
func TestCanaryBlipsPauseButNeverResetTheEvictionClock(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("a", "b")...)
	f.syncAll("a", "b")
	// a stops renewing at t0 and expires at t0+50s.
	f.pass(55*time.Second, true, "b")
	f.syncAll("a", "b")
	f.expectTainted(map[string]bool{"a": true, "b": false})
	// Five cycles of 100 s watching and a 20 s blip: 5 × 100 s of
	// unsuspended failure on top of the first 5 s is past the 5 m timeout,
	// while no single stretch between blips is.
	for range 5 {
		f.pass(95*time.Second, true, "b")
		f.syncAll("a", "b")
		f.pass(20*time.Second, false)
		f.syncAll("a", "b")
		// Every node is synced right after the recovery, as its
		// enqueueAll does.
		f.pass(5*time.Second, true, "b")
		f.syncAll("a", "b")
	}
	if f.c.evictions.Len() == 0 {
		t.Fatal("a node failing for more than the eviction timeout, blips excluded, was not escalated")
	}
}

// Issue 20 item 3: a drain interrupted by a suspension continues when the
// suspension ends if the node still fails and is past evictionTimeout.
func TestADrainInterruptedByASuspensionContinuesAfterIt(t *testing.T) {
	opts := guardOptions()
	f := newFixture(t, opts, append(readyNodes("n1"), pod("p", "n1"))...)
	blocked := true
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || !blocked {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	})
	f.sync("n1")
	f.pass(51*time.Second, true)
	f.sync("n1")
	f.pass(5*time.Minute, true)
	f.sync("n1")
	if f.c.evictions.Len() == 0 {
		t.Fatal("not escalated")
	}
	// The first pass is blocked by the budget and retries later.
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after == 0 {
		t.Fatalf("blocked drain: retry in %v, err %v", after, err)
	}
	// The watch stalls: the retry falls into the suspension.
	f.pass(20*time.Second, false)
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.writes()
	// The view recovers and the budget allows the eviction.
	blocked = false
	f.pass(5*time.Second, true)
	f.sync("n1")
	for f.c.evictions.Len() > 0 {
		name, _ := f.c.evictions.Get()
		if _, err := f.c.escalateNode(f.ctx, name); err != nil {
			t.Fatal(err)
		}
		f.c.evictions.Done(name)
	}
	var evicted []string
	for _, a := range f.writes() {
		if a.GetSubresource() == "eviction" {
			evicted = append(evicted, a.(core.CreateAction).GetObject().(*policyv1.Eviction).Name)
		}
	}
	if len(evicted) != 1 {
		t.Fatalf("evictions after the suspension: %v, want the blocked pod once", evicted)
	}
}

// The Leases of three of four nodes expire at the same instant (a mass
// failure): whichever node's timer is handled first must not be tainted one
// by one before the others are counted. The count is brought up to date
// from every node's Leases before a failure taint is decided, and the
// suspension holds all three (docs/reliability.md, item 4; on the real
// control plane TestHeldTaintsSurviveEtcdStall).
func TestAMassExpiryIsCountedBeforeTheFirstFailureTaint(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	f := newFixture(t, testOptions(), readyNodes(names...)...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	// a, b and c renew one last time; d keeps renewing.
	f.clock.Step(time.Second)
	for _, n := range []string{"a", "b", "c"} {
		f.renew("kube-proxy", n)
	}
	f.syncAll(names...)
	for range 5 {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "d")
	}
	f.sync("a")
	if f.tainted("a") {
		t.Fatal("a tainted while 3 of 4 nodes fail (threshold 50 %): the count was not brought up to date first")
	}
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("3 of 4 nodes failing and gating not suspended")
	}
	f.syncAll("b", "c", "d")
	for _, n := range []string{"a", "b", "c"} {
		if f.tainted(n) {
			t.Errorf("%s tainted during the suspension", n)
		}
		if c := f.condition(n); c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Errorf("%s: condition reason %q, want %q", n, c.Reason, nodev1alpha1.ReasonGatingSuspended)
		}
	}
}

// Found by the simulation: a node's eviction clock runs out at the very
// instant the Leases of other nodes expire, enough of them to suspend
// escalation. The node's own timer may be handled first: the count is
// brought up to date before an escalation as before a failure taint, or the
// guard lets through the eviction it exists to stop.
func TestAnEscalationDueWithAMassExpiryAtTheSameInstantIsHeld(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Timeout = time.Minute
	names := []string{"a", "b", "c", "d"}
	f := newFixture(t, opts, readyNodes(names...)...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	f.clock.Step(time.Second)
	f.release("kube-proxy", "a", "Crashed")
	f.sync("a")
	if !f.tainted("a") {
		t.Fatal("a not tainted for its failure")
	}
	// b and c renew one last time so that they expire (40 s + 10 s of
	// grace) when a's eviction clock runs out; d keeps renewing.
	f.clock.Step(10 * time.Second)
	f.renew("kube-proxy", "b")
	f.renew("kube-proxy", "c")
	f.syncAll("b", "c")
	for range 5 {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "d")
	}
	// a's timer first.
	f.sync("a")
	if n := f.c.evictions.Len(); n != 0 {
		t.Fatalf("a queued for eviction while 3 of 4 nodes fail (threshold 50 %%): the count was not brought up to date first")
	}
	f.syncAll("b", "c", "d")
	if f.tainted("b") || f.tainted("c") {
		t.Error("b or c tainted during the suspension")
	}
}

// Issue 20 item 4: a restart in the middle of an expiry-type incident. At
// the start every Lease counts as observed, so the count is 0; when the
// grace runs out every expiry comes due together, and the count is brought
// up to date from every node's Leases before the first failure taint is
// decided: with 4 of 6 silent at a 50 % threshold, none is tainted.
func TestARestartWhileFourOfSixLeasesAreSilentTaintsNone(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	opts := guardOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, readyNodes(names...)...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	// a..d have been silent since before the start; e and f renew.
	f.pass(55*time.Second, true, "e", "f")
	// Every expiry fires at once; the nodes are synced one by one.
	f.syncAll(names...)
	tainted := 0
	for _, n := range names {
		if f.tainted(n) {
			tainted++
		}
	}
	if tainted != 0 {
		t.Fatalf("%d nodes tainted, want none: 4 of 6 fail, at the 50 %% threshold", tainted)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if c := f.condition(n); c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Errorf("node %s: condition %s, want %s", n, c.Reason, nodev1alpha1.ReasonGatingSuspended)
		}
	}
}

// Issue 20 item 5: the recovery's Lease refresh and its gate restart are one
// step under the lock every evaluation holds. Were the refresh done first, a
// worker evaluating in between would see the refreshed Leases against the
// old gateStart and ungate a rebooted node without any renewal after its
// reboot (and write its boot record: the reboot gate lost for good).
func TestOwnViewRecoveryRefreshesLeasesUnderTheEvaluationLock(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.pass(10*time.Second, true, "n1")
	f.sync("n1")
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("reboot did not gate")
	}
	f.pass(20*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("not stale")
	}
	before, _ := f.c.tracker.get(testNS, "kube-proxy.n1")
	// A worker is evaluating (it holds the lock) as the view recovers.
	f.c.mu.Lock()
	f.canaryRenewed()
	recovered := make(chan struct{})
	go func() {
		defer close(recovered)
		f.checkView()
	}()
	// Not a sleep: the recovery is known to wait for the lock, so
	// whatever it did before taking it is done.
	waitUntilBlockedOnLock(t, "(*Controller).recoverView")
	during, _ := f.c.tracker.get(testNS, "kube-proxy.n1")
	f.c.mu.Unlock()
	<-recovered
	if during != before {
		t.Fatalf("the recovery refreshed the Leases while an evaluation held the lock: %+v, was %+v", during, before)
	}
	if after, _ := f.c.tracker.get(testNS, "kube-proxy.n1"); after == before {
		t.Fatal("the recovery gave no grace to a Lease ready when the view went stale")
	}
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated by the recovery without a renewal after the reboot")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated by a renewal after the recovery")
	}
}

// waitUntilBlockedOnLock waits until a goroutine running fn is blocked
// taking a sync.Mutex, read from the goroutines' stacks.
func waitUntilBlockedOnLock(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := goruntime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "sync.(*Mutex).Lock") {
				return
			}
		}
		goruntime.Gosched()
	}
	t.Fatalf("no goroutine in %s blocked on a lock", fn)
}

// Issue 20 item 6: an extension that failed open while another extension
// kept the node gated stays failed open after a restart: the new controller
// must not start its startup timeout again, and the node is ungated once the
// other extension renews.
func TestFailOpenSurvivesARestartWhileTheNodeIsStillGated(t *testing.T) {
	f, opts := kubeProxyFailedOpenWhileCNIGates(t)
	if !f.tainted("n1") {
		t.Fatal("cni never renewed, yet the node was ungated")
	}
	g := f.restart(opts)
	g.sync("n1")
	g.clock.Step(time.Second)
	g.renew("cni", "n1")
	g.sync("n1")
	if g.tainted("n1") {
		t.Fatalf("the restarted controller forgot that kube-proxy failed open: condition %s: %s", g.condition("n1").Reason, g.condition("n1").Message)
	}
	if c := g.condition("n1"); c.Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Errorf("condition %s, want %s: the node requires kube-proxy, which failed open", c.Reason, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
}

// A fail-open that ended (its extension came up) while another extension
// still kept the node gated is over in the boot record too: a restarted
// controller that restored it would not let the extension gate again, and
// ungated the node with it down (simulation seed 16997267047011645210).
func TestAFailOpenThatEndedWhileTheNodeWasGatedIsNotRestored(t *testing.T) {
	f, opts := kubeProxyFailedOpenWhileCNIGates(t)
	rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if !rec.Pending || len(rec.FailedOpen) != 1 {
		t.Fatalf("boot record %+v while kube-proxy failed open and cni gates, want a pending record naming kube-proxy", rec)
	}
	// kube-proxy comes up (its fail-open ends), then dies; cni still has
	// not come up.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	rec, _ = parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if len(rec.FailedOpen) != 0 {
		t.Fatalf("boot record %+v after kube-proxy came up, want no fail-open", rec)
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")

	g := f.restart(opts)
	g.sync("n1")
	g.clock.Step(time.Second)
	g.renew("cni", "n1")
	g.sync("n1")
	if !g.tainted("n1") {
		t.Fatalf("the restarted controller ungated the node with kube-proxy down (condition %s: %s)", g.condition("n1").Reason, g.condition("n1").Message)
	}
}

// Issue 20 item 6: a node whose only required extension failed open says so;
// it is not a node without required extensions, and the update operator's
// health gate must not read it as every extension ready.
func TestANodeWhoseOnlyExtensionFailedOpenSaysSo(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].StartupTimeout = time.Minute
	opts.Rules[0].FailurePolicy = FailurePolicyUngate
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	g := f.restart(opts)
	g.sync("n1")
	if c := g.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Errorf("condition %s/%s, want True/%s", c.Status, c.Reason, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
}

// Issue 20 item 7: a taint placed at creation on a node whose only extensions
// do not affect readiness goes when the registration grace ends, also when
// its Leases are shorter than the grace and renew quietly: the timer recheck
// must not take the node for one with nothing due but its Leases' expiry.
func TestTheTimerRecheckRemovesARegistrationGraceTaint(t *testing.T) {
	opts := testOptions()
	opts.Rules = []Rule{{Name: "logging", Extension: "logging", Selector: opts.Rules[0].Selector, AffectsReadiness: false}}
	short := func() *coordinationv1.Lease {
		l := lease("logging", "n1", "holder", f0(opts))
		l.Spec.LeaseDurationSeconds = ptr.To[int32](10)
		return l
	}
	f := newFixture(t, opts, newNode("n1", withTaint), short())
	f.live("n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("creation taint removed before the registration grace")
	}
	// Quiet renewals every 5 s until the grace is over; only the node's
	// own timer runs it.
	for range 7 {
		f.clock.Step(5 * time.Second)
		l := short()
		l.Spec.RenewTime = &metav1.MicroTime{Time: f.clock.Now()}
		f.putLease(l)
	}
	f.c.dirtyMu.Lock()
	f.c.dirty.Delete("n1")
	f.c.dirtyMu.Unlock()
	if !f.c.recheckTimer("n1") {
		f.sync("n1")
	}
	if f.tainted("n1") {
		t.Fatal("the creation taint outlived the registration grace")
	}
}

func f0(Options) time.Time { return t0 }

// Issue 20 item 8: more self-registering Leases than a list holds do not
// freeze the node: the list keeps rule and manual entries and fills the rest
// with the oldest registrations, and the node is still evaluated, so a later
// expiry of kube-proxy taints it.
func TestTooManyRegistrationsAreCappedAndTheNodeIsStillEvaluated(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	for i := range 70 {
		l := lease(fmt.Sprintf("x%02d", i), "n1", "holder", t0)
		l.Labels[nodev1alpha1.RegisterLabel] = "true"
		l.Labels[nodev1alpha1.AffectsReadinessLabel] = "false"
		// Younger Leases have lower names: the cap must go by age.
		l.CreationTimestamp = metav1.NewTime(t0.Add(-time.Duration(i) * time.Minute))
		f.putLease(l)
	}
	f.sync("n1")
	list, err := nodev1alpha1.DecodeSystemExtensions(f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation], testNS)
	if err != nil || len(list) != nodev1alpha1.MaxSystemExtensions {
		t.Fatalf("list: %d entries (%v), want %d", len(list), err, nodev1alpha1.MaxSystemExtensions)
	}
	names := map[string]bool{}
	for _, e := range list {
		names[e.Name] = true
	}
	if !names["kube-proxy"] || !names["x69"] || names["x00"] {
		t.Errorf("the list must keep the rule's entry and the oldest registrations: kube-proxy %v, x69 %v, x00 %v", names["kube-proxy"], names["x69"], names["x00"])
	}
	f.expectEvent("self-register")
	f.pass(55*time.Second, true)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("kube-proxy expired on a node with too many registrations and the node was not tainted")
	}
}

// updaterLease is the updater's self-registering Lease, held (holder set) or
// released for an update.
func updaterLease(f *fixture, node, holder string) *coordinationv1.Lease {
	l := lease("bottlerocket-updater", node, holder, f.clock.Now())
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	l.Labels[nodev1alpha1.AffectsReadinessLabel] = "false"
	if holder == "" {
		l.Annotations = map[string]string{nodev1alpha1.ReasonAnnotation: nodev1alpha1.ReasonUpdating}
	}
	return l
}

// updaterNode is a ready node that requires kube-proxy (a rule) and the
// updater, which registers itself without affecting readiness.
func updaterNode(f *fixture, name string) {
	f.putLease(updaterLease(f, name, "holder"))
	f.renew("kube-proxy", name)
	f.sync(name)
}

// Issue 20 item 9: a planned release gates even from an extension that does
// not affect readiness (the updater asks for maintenance); the release gates
// only in the boot it was made in: after the reboot the gate is the reboot
// gate over the gating extensions, whatever the updater does next.
func TestAPlannedReleaseOfANonGatingExtensionGatesOnlyInItsBoot(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNode("n1"))
	updaterNode(f, "n1")
	if f.tainted("n1") {
		t.Fatal("tainted before the release")
	}
	f.clock.Step(time.Second)
	f.putLease(updaterLease(f, "n1", ""))
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the updater's planned release did not gate the node")
	}
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Errorf("condition %s, want %s", c.Reason, nodev1alpha1.ReasonPlannedMaintenance)
	}
	// The node reboots; kube-proxy renews after the reboot; the updater's
	// Lease is still released (its agent renews only later).
	f.clock.Step(time.Minute)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("a planned release made before the reboot kept the node gated after it")
	}
}

// Found by the simulation (seed 14456852777927726137): a release and a
// reboot first seen in the same instant (after a watch outage hid both)
// cannot be ordered by the controller's clock; the release belongs to the
// new boot, whichever of the two an evaluation saw first, and gates it until
// the updater renews — as a release seen in the instant a Node is replaced
// belongs to the new Node.
func TestAReleaseSeenInTheInstantOfARebootGatesTheNewBoot(t *testing.T) {
	for _, releaseFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("release evaluated first: %v", releaseFirst), func(t *testing.T) {
			f := newFixture(t, testOptions(), readyNode("n1"))
			updaterNode(f, "n1")
			f.clock.Step(time.Minute)
			release := func() {
				f.putLease(updaterLease(f, "n1", ""))
				f.sync("n1")
			}
			reboot := func() {
				f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
				f.sync("n1")
			}
			if releaseFirst {
				release()
				reboot()
			} else {
				reboot()
				release()
			}
			f.clock.Step(time.Second)
			f.renew("kube-proxy", "n1")
			f.sync("n1")
			if c := f.condition("n1"); !f.tainted("n1") || !strings.Contains(c.Message, "Not ready: bottlerocket-updater") {
				t.Fatalf("tainted %v, condition %s %q: the release seen with the reboot must gate the new boot", f.tainted("n1"), c.Reason, c.Message)
			}
			f.clock.Step(time.Second)
			f.putLease(updaterLease(f, "n1", "holder"))
			f.sync("n1")
			if f.tainted("n1") {
				t.Fatalf("still gated (%s) after the updater renewed in the new boot", f.condition("n1").Reason)
			}
		})
	}
}

// Found by the simulation (seed 255710585287952347): behind a stalled Lease
// watch the updater renewed and released again for an update, so the
// controller reads only a released Lease whose reason turned to Updating.
// That request for maintenance belongs to the boot the node is in, not to
// the boot of the release seen before; once seen, it keeps its boot until
// the Lease renews.
func TestAReleasedLeaseWhoseReasonTurnsToUpdatingIsPlannedInTheBootItIsReadIn(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	updaterNode(f, "n1")
	released := func(reason string) {
		f.clock.Step(time.Second)
		l := updaterLease(f, "n1", "")
		l.Annotations[nodev1alpha1.ReasonAnnotation] = reason
		f.putLease(l)
		f.sync("n1")
	}
	reboot := func(boot string) {
		f.clock.Step(5 * time.Second)
		f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = boot })
		f.sync("n1")
		f.clock.Step(time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
	}
	released("Crash")
	if f.tainted("n1") {
		t.Fatal("an unplanned release of the updater gated the node")
	}
	reboot("boot-2")
	if f.tainted("n1") {
		t.Fatalf("gated (%s) after the reboot", f.condition("n1").Reason)
	}
	released(nodev1alpha1.ReasonUpdating)
	if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Fatalf("tainted %v, condition %s: a request for maintenance read in this boot must gate it", f.tainted("n1"), c.Reason)
	}
	reboot("boot-3")
	released("Crash")
	released(nodev1alpha1.ReasonUpdating)
	if f.tainted("n1") {
		t.Fatalf("gated (%s) in boot-3 by the request of boot-2 (the Lease never renewed since)", f.condition("n1").Reason)
	}
}

// Found by the simulation (seed 4921215255747016209): a controller that
// starts after a node rebooted into an update finds the updater's Lease
// still released (its agent renews only once the Node shows the new boot)
// and a boot record naming the previous boot. The release was made before
// the reboot, in the boot the record names: it must not gate the new boot,
// which its own reboot gate covers.
func TestAPlannedReleaseFoundAtStartBelongsToTheBootTheRecordNames(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNode("n1"))
	updaterNode(f, "n1")
	f.clock.Step(time.Second)
	f.putLease(updaterLease(f, "n1", ""))
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the updater's planned release did not gate the node")
	}
	// The controller stops; the node reboots and kube-proxy renews in the
	// new boot; a new controller starts.
	f.clock.Step(time.Minute)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.renew("kube-proxy", "n1")
	g := f.restart(guardOptions())
	g.sync("n1")
	if c := g.condition("n1"); c.Reason != nodev1alpha1.ReasonNodeRebooted {
		t.Fatalf("condition %s after the restart, want %s", c.Reason, nodev1alpha1.ReasonNodeRebooted)
	}
	g.clock.Step(time.Second)
	g.renew("kube-proxy", "n1")
	g.sync("n1")
	if g.tainted("n1") {
		t.Fatalf("the node is still gated (%s) by a release made before its reboot", g.condition("n1").Reason)
	}
}

// Issue 20 item 9: a node that lists only extensions that do not affect
// readiness reports True with reason NoRequiredExtensions (the update
// operator's health gate reads it), and the updater's planned release still
// gates it.
func TestANodeWithOnlyNonGatingExtensionsReportsNoRequiredExtensions(t *testing.T) {
	opts := guardOptions()
	opts.Rules = nil
	f := newFixture(t, opts, readyNode("n1", func(n *v1.Node) {
		delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation)
		n.Status.Conditions = nil
	}))
	f.putLease(updaterLease(f, "n1", "holder"))
	f.sync("n1")
	f.sync("n1")
	if c := f.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonNoRequiredExtensions {
		t.Fatalf("condition %s/%s, want True/%s", c.Status, c.Reason, nodev1alpha1.ReasonNoRequiredExtensions)
	}
	f.clock.Step(time.Second)
	f.putLease(updaterLease(f, "n1", ""))
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the planned release did not gate a node without gating extensions")
	}
	f.clock.Step(time.Second)
	f.putLease(updaterLease(f, "n1", "holder"))
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated once the updater renewed")
	}
}

// Found by the simulation (seed 1): a reboot seen while the own-view guard
// holds stays pending until the guard lifts, and only renewals observed after
// the lift end it. Renewals the stalled watch delivers while the view is still
// stale (the watch caught up, the canary's check has not run yet) must not end
// it: they may predate the reboot, and the gate must start at the lift.
func TestARebootSeenWhileTheViewIsStaleIsNotEndedBeforeTheGuardLifts(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.sync("n1")
	f.pass(20*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("not stale")
	}
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("a reboot while the view is stale: condition %s, want %s (pending)", c.Reason, nodev1alpha1.ReasonGatingSuspended)
	}
	// Nothing is named as not ready: the message says what the held gate
	// waits for, not an empty list.
	if m := f.condition("n1").Message; strings.Contains(m, "Not ready:") || !strings.Contains(m, "The node rebooted and waits") {
		t.Errorf("the held reboot gate's message %q names an empty list of extensions not ready, or not the reboot", m)
	}
	// The watch catches up: a renewal is delivered before the canary's
	// check has noticed that the view is current again.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.canaryRenewed()
	f.sync("n1")
	f.checkView()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the pending reboot gate ended before the guard lifted: the node was never gated for its reboot")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated by a renewal after the guard lifted")
	}
}

// Found by the simulation: a startup timeout that passes while the own view
// is stale decides nothing (the missing renewal may be the view's fault),
// and the lift, which restarts the gate, restarts the timeout too: a node
// that rebooted during an etcd stall is not reported StartupTimeout (or,
// with Ungate, failed open) the moment the view recovers.
func TestAStartupTimeoutPassingWhileTheViewIsStaleRestartsAtTheLift(t *testing.T) {
	for _, policy := range []FailurePolicy{FailurePolicyKeepGated, FailurePolicyUngate} {
		t.Run(string(policy), func(t *testing.T) {
			opts := guardOptions()
			opts.Rules[0].StartupTimeout = 30 * time.Second
			opts.Rules[0].FailurePolicy = policy
			f := newFixture(t, opts, newNode("n1"))
			f.pass(20*time.Second, false)
			f.live("n1")
			f.sync("n1")
			// The timeout passes during the stall.
			f.pass(40*time.Second, false)
			f.sync("n1")
			// The view recovers: the gate, pending so far, begins now.
			f.pass(6*time.Second, true)
			f.sync("n1")
			if !f.tainted("n1") {
				t.Fatalf("not gated after the lift (condition %s): the timeout that passed during the stall failed it open", f.condition("n1").Reason)
			}
			if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonNodeRegistered {
				t.Fatalf("condition %s right after the lift, want %s: the startup timeout restarts with the gate", r, nodev1alpha1.ReasonNodeRegistered)
			}
			f.pass(30*time.Second, true)
			f.sync("n1")
			switch r := f.condition("n1").Reason; {
			case policy == FailurePolicyKeepGated && r != nodev1alpha1.ReasonStartupTimeout:
				t.Errorf("condition %s 30 s after the lift, want %s", r, nodev1alpha1.ReasonStartupTimeout)
			case policy == FailurePolicyUngate && f.tainted("n1"):
				t.Errorf("still gated 30 s after the lift (condition %s), want failed open", r)
			}
		})
	}
}

// Found by CI: a KeepGated startup timeout that passed just before the own
// view was found stale, and again after the lift restarted the gate, is one
// extension missing one startup: it is counted and announced once per boot,
// not once per judgement.
func TestAStartupTimeoutJudgedAgainAfterTheLiftIsCountedAndAnnouncedOnce(t *testing.T) {
	opts := guardOptions()
	opts.Rules[0].StartupTimeout = 30 * time.Second
	opts.Rules[0].FailurePolicy = FailurePolicyKeepGated
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	// The timeout passes while the view still counts as current.
	f.pass(31*time.Second, true)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Fatalf("condition %s once the timeout passed, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
	// Then the view goes stale and recovers: the gate and its timeout restart.
	f.pass(20*time.Second, false)
	f.sync("n1")
	if !f.c.viewStale {
		t.Fatal("the own view is not stale after 20 s without a canary renewal")
	}
	f.sync("n1")
	f.pass(6*time.Second, true)
	f.sync("n1")
	f.pass(31*time.Second, true)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Fatalf("condition %s once the restarted timeout passed, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
	if got := testutil.ToFloat64(f.c.metrics.StartupTimeouts.WithLabelValues(string(FailurePolicyKeepGated))); got != 1 {
		t.Errorf("nodehealth_startup_timeouts_total{policy=KeepGated} = %v, want 1: one extension missed one startup", got)
	}
	var announced int
	for _, e := range f.events() {
		if strings.Contains(e, "did not become ready within its startup timeout") {
			announced++
		}
	}
	if announced != 1 {
		t.Errorf("%d startup-timeout Events, want 1", announced)
	}
}

// The grace an own-view recovery gives every Lease that was ready when the
// view went stale is not a renewal: it does not end the fail-open of an
// extension whose Lease of the previous boot was still valid, which would
// otherwise gate again and taint the node as failing when that Lease
// expires after the lift.
func TestAnOwnViewRecoveryDoesNotEndAFailOpen(t *testing.T) {
	f := newFixture(t, withCNI(guardOptions(), 5*time.Second, FailurePolicyUngate), readyNode("n1"))
	f.rebootedWithOldLeases(func() { f.pass(2*time.Second, true) })
	f.pass(6*time.Second, true)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("not ungated once cni's startup timeout passed (condition %s)", f.condition("n1").Reason)
	}
	// A stall while cni's old Lease is still valid, then the lift.
	f.pass(15*time.Second, false)
	f.sync("n1")
	f.pass(6*time.Second, true)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("condition %s after the lift, want %s: cni never renewed in this boot", r, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
	for range 8 {
		f.pass(10*time.Second, true, "n1")
		f.sync("n1")
		if f.tainted("n1") {
			t.Fatalf("%s in, tainted (condition %s): the lift's grace ended cni's fail-open and its old Lease then expired",
				f.clock.Now().Sub(t0), f.condition("n1").Reason)
		}
	}
}

// A Node deleted while its updater had released its Lease for maintenance,
// and a new Node of that name created: the release was made for the Node
// that is gone, so it does not gate the new one (simulation seed 40, where
// the re-created node waited for an updater that would never renew).
func TestAPlannedReleaseObservedBeforeTheNodeWasCreatedDoesNotGateIt(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: false,
		FailurePolicy: FailurePolicyKeepGated})
	released := lease("updater", "n1", "", t0)
	released.Annotations = map[string]string{nodev1alpha1.ReasonAnnotation: nodev1alpha1.ReasonUpdating}
	f := newFixture(t, opts, released)
	f.clock.Step(10 * time.Second)
	node := newNode("n1")
	if err := f.client.Tracker().Add(node); err != nil {
		t.Fatal(err)
	}
	f.nodeIndexer().Add(node.DeepCopy())
	f.live("n1")
	f.sync("n1")
	if r := f.condition("n1").Reason; !f.tainted("n1") || r != string(causeNew) {
		t.Fatalf("new node: tainted %v, reason %s; want gated as %s", f.tainted("n1"), r, causeNew)
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Errorf("still gated (%s) by a release made before the node existed", f.condition("n1").Reason)
	}
	// A release made once the node exists (its updater came up, then
	// released) is a request for maintenance.
	f.clock.Step(time.Second)
	f.renew("updater", "n1")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("updater", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	if r := f.condition("n1").Reason; !f.tainted("n1") || r != nodev1alpha1.ReasonPlannedMaintenance {
		t.Errorf("after a release in this node's boot: tainted %v, reason %s; want %s", f.tainted("n1"), r, nodev1alpha1.ReasonPlannedMaintenance)
	}
}

// A node held for a failure is judged afresh when the guard lifts (docs/controller.md,
// failure taints are never owed): the failure gate it gets then waits for
// what fails at that moment. cni expired in the stale view and was held; the
// recovery gave its Lease, ready when the view went stale, a full duration
// of grace; kube-proxy's release, delivered with the recovery, tainted the
// node. kube-proxy's renewal ends that gate: cni, ready by the recovery,
// owes no renewal for an expiry only the stale view saw (simulation seed
// 3960348572464930654).
func TestAHeldNodeTaintedAtTheRecoveryWaitsOnlyForWhatFailsThen(t *testing.T) {
	f := newFixture(t, withCNI(guardOptions(), 0, FailurePolicyKeepGated), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	f.sync("n1")
	f.pass(5*time.Second, true)
	// The watch stalls: the view goes stale at +20s, both Leases expire
	// in it at +50s, and the node is held.
	f.pass(46*time.Second, false)
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonGatingSuspended || f.tainted("n1") {
		t.Fatalf("during the stall: tainted %v, condition %s; want held", f.tainted("n1"), c.Reason)
	}
	// The catching-up watch delivers kube-proxy's release, then the
	// canary's renewal: the view recovers.
	f.release("kube-proxy", "n1", "Crash")
	f.pass(5*time.Second, true)
	if f.c.canary.stale() {
		t.Fatal("the canary did not recover")
	}
	f.sync("n1")
	if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("after the recovery: tainted %v, condition %s; want tainted for kube-proxy", f.tainted("n1"), c.Reason)
	}
	f.clock.Step(5 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("kube-proxy renewed and cni is ready by the recovery's grace, yet the node stays gated: condition %s: %s",
			f.condition("n1").Reason, f.condition("n1").Message)
	}
}

// Found by the simulation (seed 3916660364228779899): a node found gated at a
// start fails in the eyes of a stale own view when the start grace of its
// Leases runs out in the stall, while its extensions may be renewing all
// along. The recovery judges every Lease as it was when the guard fired, so
// the gate it restarts is the restart's (ControllerStarted), not a failure
// (ExtensionsNotReady): the same whether its taint stayed on or another
// writer removed it during the stall and the guard held it off.
func TestAGateFoundAtStartIsTheRestartsAgainAfterAFailureOnlyTheStaleViewSaw(t *testing.T) {
	for _, removed := range []bool{false, true} {
		name := "its taint on"
		if removed {
			name = "its taint removed by another writer during the stall"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, guardOptions(), readyNode("n1", withTaint), lease("kube-proxy", "n1", "holder", t0))
			f.sync("n1")
			if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonControllerStarted {
				t.Fatalf("at the start: tainted %v, condition %s; want found gated", f.tainted("n1"), c.Reason)
			}
			f.pass(5*time.Second, true)
			// The watch stalls: the view goes stale at +20s.
			f.pass(20*time.Second, false)
			f.sync("n1")
			if !f.c.viewStale {
				t.Fatal("the own view is not stale 20 s after the last canary renewal")
			}
			if removed {
				f.updateNode("n1", func(n *v1.Node) { n.Spec.Taints = nil })
				f.sync("n1")
				if c := f.condition("n1"); f.tainted("n1") || c.Reason != nodev1alpha1.ReasonGatingSuspended {
					t.Fatalf("taint removed during the stall: tainted %v, condition %s; want held", f.tainted("n1"), c.Reason)
				}
			}
			// kube-proxy's start grace (40 s + 10 s) runs out in the stale
			// view: the found gate's reason says what the view sees.
			f.pass(30*time.Second, false)
			f.sync("n1")
			want := nodev1alpha1.ReasonExtensionsNotReady
			if removed {
				want = nodev1alpha1.ReasonGatingSuspended
			}
			if c := f.condition("n1"); c.Reason != want {
				t.Fatalf("kube-proxy expired in the stale view: condition %s, want %s", c.Reason, want)
			}
			// The view recovers: kube-proxy was ready when the guard fired
			// and is ready again by the recovery's grace.
			f.pass(6*time.Second, true)
			if f.c.canary.stale() {
				t.Fatal("the canary did not recover")
			}
			f.sync("n1")
			if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonControllerStarted {
				t.Fatalf("after the recovery: tainted %v, condition %s (%s); want the gate found at start, %s",
					f.tainted("n1"), c.Reason, c.Message, nodev1alpha1.ReasonControllerStarted)
			}
			f.clock.Step(time.Second)
			f.renew("kube-proxy", "n1")
			f.sync("n1")
			if f.tainted("n1") {
				t.Fatalf("kube-proxy renewed after the recovery, yet the node stays gated: condition %s", f.condition("n1").Reason)
			}
		})
	}
}

// The other side of the rule above: a gate found at start whose extension
// failed while the view was still current is a failure's, and the recovery
// leaves it so even when every extension is ready by then (kube-proxy came
// back, cni has not renewed since the start).
func TestAGateFoundAtStartThatFailedBeforeAStallStaysAFailureAfterIt(t *testing.T) {
	f := newFixture(t, withCNI(guardOptions(), 0, FailurePolicyKeepGated), readyNode("n1", withTaint),
		lease("kube-proxy", "n1", "holder", t0), lease("cni", "n1", "holder", t0))
	f.sync("n1")
	f.pass(5*time.Second, true)
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("kube-proxy released on a current view: condition %s, want %s", c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
	f.pass(5*time.Second, true)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// The watch stalls (stale 15 s after the canary's renewal at +10s) and
	// catches up at +30s, within cni's start grace.
	f.pass(16*time.Second, false)
	f.sync("n1")
	if !f.c.viewStale {
		t.Fatal("the own view is not stale 16 s after the last canary renewal")
	}
	f.pass(5*time.Second, true)
	if f.c.canary.stale() {
		t.Fatal("the canary did not recover")
	}
	f.sync("n1")
	if c := f.condition("n1"); !f.tainted("n1") || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("after the recovery: tainted %v, condition %s; want still gated as the failure it was, %s",
			f.tainted("n1"), c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
}

// When a blast-radius suspension lifts, every node it held that still fails
// is judged in that step, tainted with its gate begun when its failure was
// first held. A renewal the controller observes in that very instant came
// after the hold was judged (the hold read no renewal), so it ends the gate
// whether it came before the lift, between the lift and the node's sync, or
// after the sync: what a held node ends with does not depend on which of
// them a worker reached first. Simulation seed 9210168856590487975 (with two
// workers, the held n8's renewal was delivered between the lift and n8's
// sync) brought the judgement at the lift; seed 17597418052033749223 (a
// controller that started, suspended and lifted in one instant, a held
// node's renewal delivered before the sync that lifted) brought the
// renewal in the hold's instant: before it, a held node whose sync came
// first stayed tainted until its next renewal, and one whose renewal came
// before the lift was never tainted.
func TestAHeldNodesRenewalInTheInstantItsHoldBeganEndsItWhetherTheLiftComesBeforeOrAfterIt(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	f := newFixture(t, testOptions(), objs...) // cluster threshold 50 %
	for _, n := range names {
		f.sync(n)
	}
	f.clock.Step(time.Second)
	for _, n := range names[:5] {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	// n1 and n2 are tainted; n3 brings 3 of 6 failing, the threshold: n3,
	// n4 and n5 are held, from this instant.
	for _, n := range []string{"n3", "n4", "n5"} {
		if c := f.condition(n); f.tainted(n) || c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Fatalf("%s: tainted %v, condition %s; want held", n, f.tainted(n), c.Reason)
		}
	}
	// In the same instant n5 comes back first (4 of 6 still fail), then n1
	// and n2 (their gates, begun in this instant, wait for a later
	// renewal, but they no longer fail): 2 failing, the suspension lifts
	// and queues n3 and n4.
	f.renew("kube-proxy", "n5")
	f.sync("n5")
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("the suspension lifted with 4 of 6 nodes failing")
	}
	for _, n := range []string{"n1", "n2"} {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); s {
		t.Fatal("the suspension did not lift with 2 of 6 nodes failing")
	}
	// n3's sync comes before its renewal (it is tainted: it still fails),
	// n4's after it.
	f.sync("n3")
	if c := f.condition("n3"); !f.tainted("n3") || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("n3 still failing after the lift: tainted %v, condition %s; want tainted, %s", f.tainted("n3"), c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
	f.renew("kube-proxy", "n3")
	f.renew("kube-proxy", "n4")
	f.sync("n3")
	f.sync("n4")
	for _, n := range []string{"n3", "n4", "n5"} {
		if c := f.condition(n); f.tainted(n) || c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonExtensionsReady {
			t.Errorf("%s after its renewal in the instant its hold began: tainted %v, condition %s/%s; want untainted, True/%s",
				n, f.tainted(n), c.Status, c.Reason, nodev1alpha1.ReasonExtensionsReady)
		}
	}
	// n1 and n2's gates began in this instant by a taint, not a hold: a
	// renewal in it may have come before their failure, and does not end
	// them; the next one does.
	for _, n := range []string{"n1", "n2"} {
		if !f.tainted(n) {
			t.Errorf("%s, tainted for a failure in this instant, lost its taint to a renewal in the same instant", n)
		}
	}
	f.clock.Step(5 * time.Second)
	for _, n := range []string{"n1", "n2"} {
		f.renew("kube-proxy", n)
		f.sync(n)
		if f.tainted(n) {
			t.Errorf("%s still tainted after a renewal after its gate's start: condition %s", n, f.condition(n).Reason)
		}
	}
}

// The own view's recovery restarts a gate that began held at the recovery,
// as any gate whose taint is on the node: a renewal the catching-up watch
// delivers in the recovery's instant may be one the stall held back, so it
// does not end the restarted gate; the next one does (simulation seed
// 16796596741113341386 found the model keeping the hold's rule after the
// restart).
func TestAGateBegunHeldAndRestartedByTheRecoveryWaitsForARenewalAfterIt(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	f := newFixture(t, guardOptions(), objs...) // cluster threshold 50 %
	f.canaryRenewed()
	f.syncAll(names...)
	f.clock.Step(time.Second)
	for _, n := range names[:3] {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if c := f.condition("n3"); f.tainted("n3") || c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("n3, the third of six to fail: tainted %v, condition %s; want held", f.tainted("n3"), c.Reason)
	}
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.sync("n3")
	if !f.tainted("n3") {
		t.Fatalf("n3 still failing after the lift is not tainted (condition %s)", f.condition("n3").Reason)
	}
	// The Lease watch stalls: the view turns stale, then recovers.
	f.pass(16*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the own view did not turn stale")
	}
	f.passUntilRecovered()
	// In the recovery's instant the catching-up watch delivers a renewal.
	f.renew("kube-proxy", "n3")
	f.sync("n3")
	if !f.tainted("n3") {
		t.Errorf("n3's restarted gate ended with a renewal observed in the recovery's instant (condition %s)", f.condition("n3").Reason)
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n3")
	f.sync("n3")
	if f.tainted("n3") {
		t.Errorf("n3 still tainted after a renewal after the recovery (condition %s)", f.condition("n3").Reason)
	}
}

// What a held node's gate waits for is judged at the lift, and a renewal
// in the lift's instant counts whether its delivery came before or after the
// node's sync: the extension that renewed is not in the gate's scope either
// way. The scope shows once an own-view recovery restarts the gate keeping
// it: the node is then ungated by the renewal of what still failed, not held
// for one of what had come back (simulation seed 15330235846551453348: the
// model opened n6's gate at the lift and saw kube-proxy renew after it, the
// controller synced n6 after the renewal).
func TestAHeldNodesGateWaitsForWhatFailsAtTheLiftWhicheverOrderItsInstantTook(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n, twoExtensions), lease("cni", n, "holder", t0), lease("kube-proxy", n, "holder", t0))
	}
	f := newFixture(t, guardOptions(), objs...) // cluster threshold 50 %
	f.canaryRenewed()
	f.syncAll(names...)
	f.clock.Step(time.Second)
	// n1 and n2 lose kube-proxy and are tainted; n3 and n4 lose both and
	// bring 4 of 6 failing: held.
	for _, n := range names[:4] {
		f.release("kube-proxy", n, "Crash")
		if n == "n3" || n == "n4" {
			f.release("cni", n, "Crash")
		}
		f.sync(n)
	}
	for _, n := range []string{"n3", "n4"} {
		if c := f.condition(n); f.tainted(n) || c.Reason != nodev1alpha1.ReasonGatingSuspended {
			t.Fatalf("%s: tainted %v, condition %s; want held", n, f.tainted(n), c.Reason)
		}
	}
	f.clock.Step(time.Second)
	// n1 and n2 come back: 2 of 6 fail, the suspension lifts. In its
	// instant kube-proxy renews on n3 and n4; n3's sync comes before the
	// renewal's delivery (and again after it), n4's only after it.
	for _, n := range []string{"n1", "n2"} {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); s {
		t.Fatal("the suspension did not lift with 2 of 6 nodes failing")
	}
	f.sync("n3")
	f.renew("kube-proxy", "n3")
	f.renew("kube-proxy", "n4")
	f.syncAll("n3", "n4")
	for _, n := range []string{"n3", "n4"} {
		if c := f.condition(n); !f.tainted(n) || c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
			t.Fatalf("%s, cni still failing after the lift: tainted %v, condition %s; want tainted, %s", n, f.tainted(n), c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
		}
	}
	// The Lease watch stalls: the view turns stale, then recovers, and the
	// recovery restarts both gates.
	f.pass(16*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the own view did not turn stale")
	}
	f.passUntilRecovered()
	f.clock.Step(time.Second)
	for _, n := range []string{"n3", "n4"} {
		f.renew("cni", n)
		f.sync(n)
		if f.tainted(n) {
			t.Errorf("%s still tainted after cni, all that failed at the lift, renewed after the recovery (condition %s)", n, f.condition(n).Reason)
		}
	}
}

// A Lease the boot record marks dead on the renewal it still shows is not
// ready when the own view goes stale, though the start grace makes it look
// observed at the start: it gets no grace at the recovery, and a renewal in
// the stall runs out on its own time (simulation seed 12555028893769159383:
// a controller started in an outage of its writes gave the recovery's grace
// to such a Lease, and kept a node whose extension died in the stall
// untainted past the expiry).
func TestALeaseTheBootRecordMarksDeadGetsNoRecoveryGrace(t *testing.T) {
	dead := t0.Add(-time.Minute)
	node := readyNode("n1", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.BootAnnotation] = bootRecord{BootID: n.Status.NodeInfo.BootID, UID: n.UID,
			Dead: map[string]int64{"kube-proxy": dead.UnixMicro()}}.String()
	})
	f := newFixture(t, guardOptions(), node, lease("kube-proxy", "n1", "holder", dead))
	f.canaryRenewed()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatalf("n1, its kube-proxy marked dead and not renewed since, is not tainted at the start (condition %s)", f.condition("n1").Reason)
	}
	// The canary's renewals fail; the Lease watch goes on.
	f.pass(16*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the own view did not turn stale")
	}
	f.pass(time.Second, false)
	renewed := f.clock.Now()
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("n1 still tainted after kube-proxy renewed (condition %s)", f.condition("n1").Reason)
	}
	// kube-proxy dies; the view recovers.
	f.passUntilRecovered()
	// The renewal runs out 50 s after it (40 s + 10 s grace), not 50 s
	// after the recovery.
	f.clock.SetTime(renewed.Add(50*time.Second + time.Second))
	f.canaryRenewed()
	f.checkView()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Errorf("n1 untainted %s after kube-proxy's last renewal, past its expiry: the Lease got the recovery's grace (condition %s)",
			f.clock.Since(renewed), f.condition("n1").Reason)
	}
}

// A Lease ready when the own-view guard fired gets the recovery's grace also
// when it was released and renewed again while the view was stale: the
// stale view may hide its later renewals as much as any other Lease's, and
// it is held at the recovery (simulation seed 3821303460705370583: n3's cni
// crashed and came back during an outage of the controller's writes, and
// expired after the recovery on its last observed renewal, two seconds
// before the grace the model and docs/controller.md give it).
func TestALeaseReleasedAndRenewedWhileTheViewIsStaleGetsTheRecoverysGrace(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.canaryRenewed()
	f.sync("n1")
	// The canary's renewals fail; the Lease watch goes on.
	f.pass(16*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the own view did not turn stale")
	}
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	f.pass(time.Second, false)
	renewed := f.clock.Now()
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// kube-proxy dies; the view recovers.
	f.passUntilRecovered()
	recovered := f.clock.Now()
	f.sync("n1")
	if !recovered.After(renewed.Add(time.Second)) {
		t.Fatalf("recovered at %s, too soon after the renewal at %s to tell the two expiries apart", recovered, renewed)
	}
	// Past the last renewal's expiry (40 s + 10 s grace), within the
	// recovery's.
	f.clock.SetTime(renewed.Add(50*time.Second + time.Second))
	f.canaryRenewed()
	f.checkView()
	f.sync("n1")
	if f.tainted("n1") {
		t.Errorf("n1 tainted %s after kube-proxy's last renewal and %s after the recovery: the Lease, ready when the guard fired, got no recovery grace (condition %s)",
			f.clock.Since(renewed), f.clock.Since(recovered), f.condition("n1").Reason)
	}
	f.clock.SetTime(recovered.Add(50*time.Second + time.Second))
	f.canaryRenewed()
	f.checkView()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Errorf("n1 untainted past the recovery's grace (condition %s)", f.condition("n1").Reason)
	}
}

// A held node that recovers before the Node cache shows the hold has its
// recovery written: the cache still says True/ExtensionsReady, as it did
// before the controller's GatingSuspended write, but the API server holds
// that write (simulation seeds 9197560688786608429, 6163426813997312058 and
// 1221797598538672297 with -sim.per-event: the condition said
// GatingSuspended until the hold's own watch event came back and the
// controller put it right then).
func TestAHeldNodeThatRecoversBeforeTheCacheShowsItsHoldIsWrittenReady(t *testing.T) {
	// The node says what this controller last wrote on it.
	f := newFixture(t, guardOptions(), readyNode("n1", func(n *v1.Node) {
		n.Status.Conditions[0].Message = "Every required system extension is ready."
	}))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// The watch stalls: the view turns stale, then the Lease runs out.
	f.pass(51*time.Second, false)
	if !f.c.canary.stale() {
		t.Fatal("the own view did not turn stale")
	}
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Fatalf("n1's condition after its Lease ran out in the stall: %s, want %s", c.Reason, nodev1alpha1.ReasonGatingSuspended)
	}
	// The catching-up watch delivers a renewal before the cache shows the
	// GatingSuspended write.
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if c := f.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != nodev1alpha1.ReasonExtensionsReady {
		t.Errorf("n1's condition once its renewal was observed: %s/%s (%s), want True/%s: the cache's stale True is not what the node holds",
			c.Status, c.Reason, c.Message, nodev1alpha1.ReasonExtensionsReady)
	}
}

// A gate that ends before the Node cache shows the taint this controller
// wrote for it has its taint removed: the cache shows nothing to remove, but
// the API server holds the taint, and the condition is written ready in the
// same sync (simulation seed 11785018759012118346 with -sim.per-event: a
// node tainted at a suspension's lift recovered before the taint's own watch
// event came back, and carried the readiness taint beside a True condition
// until that event was handled).
func TestAGateThatEndsBeforeTheCacheShowsItsTaintHasTheTaintRemoved(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.canaryRenewed()
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	// The taint is written; its watch event has not come back.
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if !f.tainted("n1") {
		t.Fatal("n1 not tainted for its failure")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if c := f.condition("n1"); c.Status != v1.ConditionTrue {
		t.Fatalf("n1's condition once kube-proxy renewed: %s/%s, want True", c.Status, c.Reason)
	}
	if f.tainted("n1") {
		t.Errorf("n1 carries the readiness taint beside a True condition: the ungate removed nothing, as the stale cache showed no taint")
	}
}

// A taint this controller removed is added again when the node needs it
// before the Node cache shows the removal: the cache still shows a taint,
// and an addition computed from it adds nothing, so the write starts from a
// fresh read (simulation seed 1487896603008007614 with -sim.per-event: a
// held node's taint, added by another writer and removed by the controller,
// was wanted back at the lift a moment later and stayed off, beside a False
// condition, until the removal's watch event came back).
func TestATaintRemovedAndWantedBackBeforeTheCacheShowsTheRemovalIsAddedAgain(t *testing.T) {
	f := crashedAndTainted(t, guardOptions())
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	// The ungate's removal is written; its watch event has not come back.
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if f.tainted("n1") {
		t.Fatal("n1 still tainted once kube-proxy renewed")
	}
	crashAgainBeforeTheCacheShowsTheUngate(t, f)
}

// crashAgainBeforeTheCacheShowsTheUngate crashes n1's kube-proxy again a
// second after an ungate whose watch event has not come back, and requires
// n1 tainted beside its False condition: computed from the cache, which
// still shows the taint, the addition would add nothing.
func crashAgainBeforeTheCacheShowsTheUngate(t *testing.T, f *fixture) {
	t.Helper()
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if c := f.condition("n1"); c.Status != v1.ConditionFalse {
		t.Fatalf("n1's condition once kube-proxy crashed again: %s/%s, want False", c.Status, c.Reason)
	}
	if !f.tainted("n1") {
		t.Errorf("n1 failing and untainted: the addition, computed from a cache that still showed the removed taint, added nothing")
	}
}

// A renewal handled before the Node cache shows the ungate's own condition
// write does not write the condition again: the cache's False is older than
// what the node holds, not another writer's drift, and a rewrite from it
// moves the condition's heartbeat and transition time on a node at steady
// state (TestSteadyStateNoNodeWrites failed on a loaded CI machine: the
// True condition written a second time, a second after the first).
func TestARenewalBeforeTheCacheShowsTheUngateDoesNotRewriteTheCondition(t *testing.T) {
	f := crashedAndTainted(t, guardOptions())
	f.writes()
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectWrites("patch nodes", "patch nodes/status")
	written := f.condition("n1")
	// The next renewal comes before the watch shows either write.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.writes() {
		if a.GetSubresource() == "status" {
			t.Errorf("the condition was written again although the node holds it: %s", patchOf(t, a))
		}
	}
	if got := f.condition("n1"); !got.LastTransitionTime.Equal(&written.LastTransitionTime) || !got.LastHeartbeatTime.Equal(&written.LastHeartbeatTime) {
		t.Errorf("condition times moved: transition %s → %s, heartbeat %s → %s", written.LastTransitionTime, got.LastTransitionTime,
			written.LastHeartbeatTime, got.LastHeartbeatTime)
	}
	// Once the cache shows the writes, a later renewal writes nothing.
	f.refresh("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectWrites()
}

// An escalation that waited for its turn of the eviction rate is held when,
// in the instant its turn comes, another node's Lease expires and trips the
// blast radius: the count is brought up to date before the turn evicts, as
// before a failure taint, even though the expired node's own evaluation has
// not run yet (simulation seed 10902770050846289540: the turn evicted the
// node and the suspension began a moment later).
func TestAnEscalationWhoseTurnComesAsAnotherLeaseExpiresIntoASuspensionIsHeld(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Timeout = time.Minute
	opts.Eviction.NodesPerSecond = 0.05 // a turn every 20 s
	names := []string{"a", "b", "c", "d", "e", "f"}
	f := newFixture(t, opts, append(readyNodes(names...), pod("web", "b"))...)
	f.c.primeBlastRadius(f.ctx)
	f.syncAll(names...)
	start := f.clock.Now()
	at := func(d time.Duration) {
		t.Helper()
		for f.clock.Now().Before(start.Add(d)) {
			f.clock.Step(time.Second)
			if s := int(f.clock.Since(start) / time.Second); s%10 == 1 {
				f.renew("kube-proxy", "d")
				f.renew("kube-proxy", "e")
				f.renew("kube-proxy", "f")
				if s <= 31 {
					f.renew("kube-proxy", "c") // c's last renewal at 31 s expires at 81 s
				}
			}
		}
	}
	escalate := func(name string) time.Duration {
		t.Helper()
		wait, err := f.c.escalateNode(f.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}
	at(time.Second)
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	at(6 * time.Second)
	f.release("kube-proxy", "b", "Crash")
	f.sync("b")
	at(61 * time.Second)
	f.sync("a")
	if wait := escalate("a"); wait != 0 {
		t.Fatalf("a's escalation waits %s, want its turn now", wait)
	}
	at(66 * time.Second)
	f.sync("b")
	if wait := escalate("b"); wait != 15*time.Second {
		t.Fatalf("b's escalation waits %s, want 15s (the next turn, 20 s after a's)", wait)
	}
	f.writes()
	// b's turn; c's Lease expires in this instant: a, b and c fail, 3 of 6
	// at a 50 % threshold. b's turn is handled before c's evaluation.
	at(81 * time.Second)
	escalate("b")
	if got := evictionsOf(f); len(got) != 0 {
		t.Errorf("b's pods evicted at its turn (%q) although c's expiry in the same instant suspends evictions", got)
	}
	if s, _ := f.c.blast.suspended(""); !s {
		t.Error("3 of 6 nodes failing and evictions not suspended")
	}
}

// crashedAndTainted is a fixture whose ready node n1 was tainted for its
// kube-proxy's crash a second after the start, the cache showing the taint;
// the extensions in renewing renewed at the start.
func crashedAndTainted(t *testing.T, opts Options, renewing ...string) *fixture {
	t.Helper()
	f := newFixture(t, opts, readyNodes("n1")...)
	f.canaryRenewed()
	for _, ext := range renewing {
		f.renew(ext, "n1")
	}
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("n1 not tainted for its failure")
	}
	return f
}

// canaryWrites counts the writes of the canary Lease among actions.
func canaryWrites(actions []core.Action) int {
	n := 0
	for _, a := range actions {
		// Creates and updates carry the object.
		w, ok := a.(interface{ GetObject() runtime.Object })
		if !ok || (a.GetVerb() != "create" && a.GetVerb() != "update") {
			continue
		}
		if l, ok := w.GetObject().(*coordinationv1.Lease); ok && l.Name == nodev1alpha1.ControllerCanaryLease {
			n++
		}
	}
	return n
}

// A Lease whose renewals lagged just before a stall expires by the clock
// while the canary, observed a few seconds before the stall, still calls the
// view current: its renewal may be on its way unseen. Its expiry counts only
// once the view's horizon (the renewTime of the last own canary renewal
// observed) is past it; until then the controller asks its canary for a
// renewal that would vouch for it, and when the view goes stale instead the
// own-view guard holds the node and the recovery gives the Lease its grace.
// Before the fix the expiry counted at once and the node was tainted from a
// view 5 s old: test/integration/faults' TestEtcdRestartAndPause under load,
// 7 healthy nodes tainted as etcd resumed, the patches sent during the pause.
func TestALeaseExpiringPastTheViewsHorizonWaitsForARenewalThatVouchesForIt(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1")...)
	f.sync("n1")
	// n1's extension renewed at 0 s (expiry at 50 s), and its next
	// renewals lag; the canary is observed every 5 s up to 45 s, then the
	// watch stalls.
	f.pass(45*time.Second, true)
	f.pass(5*time.Second, false)
	if f.c.canary.stale() {
		t.Fatal("view stale 5 s after the last canary renewal observed")
	}
	f.writes()
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("n1 tainted at its expiry by the clock, 5 s past the view's horizon")
	}
	if c := f.condition("n1"); c.Status != v1.ConditionTrue {
		t.Errorf("n1's condition %s/%s at an expiry the view does not vouch for, want True", c.Status, c.Reason)
	}
	if n := canaryWrites(f.writes()); n != 1 {
		t.Errorf("%d renewals of the canary asked for to vouch for the expiry, want 1", n)
	}
	// Another sync while that renewal is on its way asks for none.
	f.sync("n1")
	if n := canaryWrites(f.writes()); n != 0 {
		t.Errorf("%d more renewals of the canary asked for the same expiry, want none", n)
	}

	// The stall outlasts three intervals: held, never tainted.
	f.pass(15*time.Second, false)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("n1 tainted while the view is stale")
	}
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("n1's condition %s/%s in the stall, want %s", c.Status, c.Reason, nodev1alpha1.ReasonGatingSuspended)
	}
	// The stall ends. The Lease was ready as of the horizon when the view
	// went stale, so the recovery gives it its grace: the node is not
	// tainted before the lagging renewal arrives, nor after.
	f.passUntilRecovered()
	f.sync("n1")
	f.expectTainted(map[string]bool{"n1": false})
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectTainted(map[string]bool{"n1": false})
	if n := taintAdds(f); n != 0 {
		t.Errorf("%d taint writes, want none", n)
	}
}

// An expiry the view does not vouch for yet counts as soon as a renewal of
// the canary written after it is observed: the node waits a round trip, not
// a canary interval, and is queued when the horizon passes its expiry.
func TestAnExpiryCountsOnceTheCanaryRenewalAskedForIsObserved(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1", "n2")...)
	f.syncAll("n1", "n2")
	// n2 keeps renewing; n1 does not. The canary is observed at 45 s,
	// not at 50 s (its renewal then is still on its way).
	f.pass(49*time.Second, true, "n2")
	f.clock.Step(time.Second)
	f.syncAll("n1", "n2")
	f.expectTainted(map[string]bool{"n1": false, "n2": false})
	queuedInOrder(f)
	// The renewal the sync asked for is observed.
	f.canaryRenewed()
	if f.c.queue.Len() != 1 {
		t.Fatalf("%d nodes queued when the horizon passed n1's expiry, want n1 alone", f.c.queue.Len())
	}
	key, _ := f.c.queue.Get()
	f.c.queue.Done(key)
	if key != "n1" {
		t.Fatalf("queued %s, want n1", key)
	}
	f.sync("n1")
	f.expectTainted(map[string]bool{"n1": true, "n2": false})
}

// The worker whose sync sends the canary renewal an expiry waits for is free
// once that renewal is answered. The nodes whose expiries came due while it
// was in flight are judged again then, and the first of them sends the next
// renewal: expiries that keep coming cost a renewal per round trip, none of
// them waits for the canary's next periodic renewal, and the sender's own
// node is not held out of the queue for the whole burst (make bench-scale at
// 1,000 nodes, 2026-12-02: 3 s behind its expiry, where the others took a
// round trip).
func TestTheExpiriesThatCameDueDuringAConfirmationAreJudgedAgainWhenItIsAnswered(t *testing.T) {
	f := newFixture(t, guardOptions(), readyNodes("n1", "n2")...)
	f.syncAll("n1", "n2")
	f.canaryRenewed()
	// n1's Lease expires at 50 s, n2's, renewed at 1 s, at 51 s; the
	// canary is observed every 5 s up to 45 s.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n2")
	f.pass(48*time.Second, true)
	entered, release := make(chan time.Time, 2), make(chan struct{})
	f.client.PrependReactor("update", "leases", func(a core.Action) (bool, runtime.Object, error) {
		if l := a.(core.UpdateAction).GetObject().(*coordinationv1.Lease); l.Name == nodev1alpha1.ControllerCanaryLease {
			entered <- l.Spec.RenewTime.Time
			<-release
		}
		return false, nil, nil
	})
	f.clock.Step(time.Second)
	synced := make(chan error, 1)
	go func() { synced <- f.c.syncNode(f.ctx, "n1") }()
	select {
	case sent := <-entered:
		if !sent.Equal(f.clock.Now()) {
			t.Fatalf("n1's sync sent a renewal at %s, want at its expiry %s", sent, f.clock.Now())
		}
	case err := <-synced:
		t.Fatalf("n1's sync at its expiry sent no canary renewal (sync: %v)", err)
	}
	// n2 expires while that renewal is in flight: its need is left to the
	// next renewal.
	f.clock.Step(time.Second)
	f.sync("n2")
	queuedInOrder(f)
	release <- struct{}{}
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case sent := <-entered:
		t.Fatalf("n1's sync sent another renewal (at %s) once its own was answered, instead of returning", sent)
	}
	queued := queuedInOrder(f)
	if !slices.Contains(queued, "n2") {
		t.Fatalf("n2, whose expiry came due during n1's renewal, not judged again when it was answered (queued %v)", queued)
	}
	go func() { synced <- f.c.syncNode(f.ctx, "n2") }()
	select {
	case sent := <-entered:
		if !sent.Equal(f.clock.Now()) {
			t.Errorf("n2's sync sent a renewal at %s, want now, %s", sent, f.clock.Now())
		}
	case err := <-synced:
		t.Fatalf("n2 judged again sent no renewal for its expiry (sync: %v)", err)
	}
	release <- struct{}{}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	f.expectTainted(map[string]bool{"n1": false, "n2": false})
}
