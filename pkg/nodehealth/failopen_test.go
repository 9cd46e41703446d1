package nodehealth

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
