package nodehealth

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
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
