package nodehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// restart starts a new controller on the nodes the API holds now and the
// Leases the old controller's cache holds, as after a restart or a failover,
// and returns its fixture.
func (f *fixture) restart(opts Options) *fixture {
	f.t.Helper()
	nodes, err := f.client.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var initial []runtime.Object
	for i := range nodes.Items {
		initial = append(initial, &nodes.Items[i])
	}
	for _, obj := range f.factory.Coordination().V1().Leases().Informer().GetStore().List() {
		initial = append(initial, obj.(*coordinationv1.Lease).DeepCopy())
	}
	g := newFixture(f.t, opts, initial...)
	g.clock.SetTime(f.clock.Now())
	return g
}

// A node released by failurePolicy Ungate stays released after a restart:
// the boot record says which extensions failed open in this boot, so the new
// controller neither taints the node nor counts it as failing (issue 9
// defect 3).
func TestFailOpenSurvivesARestart(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].StartupTimeout = time.Minute
	opts.Rules[0].FailurePolicy = FailurePolicyUngate
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("Ungate kept the node gated")
	}
	rec, ok := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if !ok || len(rec.FailedOpen) != 1 || rec.FailedOpen[0] != "kube-proxy" {
		t.Fatalf("boot record %q does not name the failed-open extension", f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	}

	g := f.restart(opts)
	g.sync("n1")
	if g.tainted("n1") {
		t.Fatalf("the restarted controller tainted a node released by failing open: %s", fmtTaints(g.node("n1")))
	}
	g.c.mu.Lock()
	st := g.c.nodes["n1"]
	failing, gated := st.failing, st.gated
	g.c.mu.Unlock()
	if failing || gated {
		t.Fatalf("after the restart: failing=%v gated=%v, want neither", failing, gated)
	}
	g.expectWrites()

	// Once the extension comes up, the record forgets it, so that a later
	// failure is a failure, also for a controller started after that.
	g.renew("kube-proxy", "n1")
	g.sync("n1")
	rec, _ = parseBootRecord(g.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if len(rec.FailedOpen) != 0 {
		t.Fatalf("boot record still names %v after the extension became ready", rec.FailedOpen)
	}
	g.release("kube-proxy", "n1", "Crash")
	h := g.restart(opts)
	h.sync("n1")
	if !h.tainted("n1") {
		t.Fatal("a failure after the failed-open extension came up must gate, also after a restart")
	}
}

// Found by the simulation: a startup timeout is for an extension that never
// comes up after the gate began. One that came up and then died while
// another extension still kept the node gated did start: failing it open
// would ungate the node with that extension down, and failing it closed
// would call a crash a startup timeout.
func TestAnExtensionThatCameUpAndDiedDuringTheGateHasNoStartupTimeout(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 30 * time.Second, FailurePolicy: FailurePolicyUngate})
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	// cni comes up and dies; kube-proxy never comes up.
	f.clock.Step(5 * time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	f.clock.Step(25 * time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the node was ungated while kube-proxy never came up")
	}
	f.clock.Step(time.Minute)
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatalf("the node was ungated with cni down: cni failed open although it came up after the gate began (condition %s)", f.condition("n1").Reason)
	}
	if r := f.condition("n1").Reason; r == nodev1alpha1.ReasonStartupTimeout {
		t.Errorf("condition %s: cni came up, its later failure is not a startup timeout", r)
	}
}

// Found by the simulation: StartupTimeout says a late extension keeps the
// node gated; once it comes up while another extension still has to renew,
// the reason is the gate's own again (here NodeRegistered).
func TestTheStartupTimeoutReasonEndsWhenTheLateExtensionComesUp(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 30 * time.Second, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(31 * time.Second)
	f.sync("n1")
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Fatalf("condition %s after cni's startup timeout, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated although kube-proxy never renewed")
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonNodeRegistered {
		t.Errorf("condition %s once cni came up, want %s", r, nodev1alpha1.ReasonNodeRegistered)
	}
}

// After a reboot the extension's Lease from the previous boot may still be
// within its duration when the startup timeout passes: the extension has not
// come up in this boot, so the timeout is reported all the same (seed 22 of
// the simulation, where the old Lease outlived an 11 s timeout by a second).
func TestAStartupTimeoutIsReportedWhileTheLeaseOfThePreviousBootIsStillValid(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: 5 * time.Second, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	f.sync("n1")
	f.clock.Step(2 * time.Second)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if r := f.condition("n1").Reason; r != string(causeRebooted) {
		t.Fatalf("condition %s after the reboot, want %s", r, causeRebooted)
	}
	f.clock.Step(6 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated although cni never renewed in this boot")
	}
	if r := f.condition("n1").Reason; r != nodev1alpha1.ReasonStartupTimeout {
		t.Errorf("condition %s once cni's startup timeout passed with its old Lease still valid, want %s", r, nodev1alpha1.ReasonStartupTimeout)
	}
}

// After a restart every Lease counts as observed at the start, so a
// non-gating extension that had expired looks ready until its grace runs out
// again, and the condition's message then says again what the node already
// holds: nothing to write (simulation seed 84, a write at steady state).
func TestAConditionTheNodeAlreadyHoldsIsNotRewrittenAfterARestart(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: false,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	f.sync("n1")
	for i := 0; i < 5; i++ {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
	}
	held := f.condition("n1")
	if held.Status != v1.ConditionTrue || !strings.Contains(held.Message, "updater (LeaseExpired") {
		t.Fatalf("condition %s/%s %q, want True naming the expired updater", held.Status, held.Reason, held.Message)
	}

	g := newFixture(t, opts, f.node("n1"), lease("kube-proxy", "n1", "holder", t0), lease("updater", "n1", "holder", t0))
	g.sync("n1")
	g.expectWrites()
	for i := 0; i < 5; i++ {
		g.clock.Step(10 * time.Second)
		g.renew("kube-proxy", "n1")
		g.sync("n1")
	}
	if c := g.condition("n1"); c.Message != held.Message {
		t.Fatalf("message %q after the updater's grace ran out again, want %q", c.Message, held.Message)
	}
	g.expectWrites()
}

// The boot record stays readable however many extensions fail open: 64
// extensions of 63-character names would list 4.2 KiB, over what the Node
// cache keeps of the record (nodeutil.MaxBootRecordLength), and a record the
// cache replaces by a marker tells a restarted controller nothing. The list
// is capped like the start-up timeline, the rest counted, and the capped
// record is stable: the next sync does not rewrite it.
func TestTheFailedOpenListInTheBootRecordIsBounded(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	for i := range nodev1alpha1.MaxSystemExtensions {
		name := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), i)
		opts.Rules = append(opts.Rules, Rule{Name: name, Extension: name, Selector: labels.Everything(), AffectsReadiness: true,
			StartupTimeout: time.Minute, FailurePolicy: FailurePolicyUngate})
	}
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatalf("every extension failed open, yet the node is gated: %s", f.condition("n1").Message)
	}
	value := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]
	if len(value) > nodeutil.MaxBootRecordLength {
		t.Fatalf("boot record of %d bytes, over the %d the Node cache keeps", len(value), nodeutil.MaxBootRecordLength)
	}
	cached, _ := nodeutil.TransformNode(f.node("n1"))
	rec, ok := parseBootRecord(cached.(*v1.Node).Annotations[nodev1alpha1.BootAnnotation])
	if !ok {
		t.Fatalf("the cached boot record does not parse: %q", value)
	}
	if len(rec.FailedOpen) != maxFailedOpen || rec.FailedOpenOmitted != nodev1alpha1.MaxSystemExtensions-maxFailedOpen {
		t.Errorf("failedOpen lists %d and omits %d, want %d and the rest", len(rec.FailedOpen), rec.FailedOpenOmitted, maxFailedOpen)
	}
	if first := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), 0); rec.FailedOpen[0] != first {
		t.Errorf("first listed %s, want %s (name order)", rec.FailedOpen[0], first)
	}
	f.writes()
	f.sync("n1")
	f.expectWrites()
}
