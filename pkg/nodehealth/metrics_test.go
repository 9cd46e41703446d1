package nodehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// A series whose count returns to zero is deleted: extension names come from
// annotations and Lease names, so zero-valued series would pile up forever.
func TestNotReadySeriesAreDeletedAtZero(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.sync("n1")
	if got := testutil.ToFloat64(f.c.metrics.NotReadyNodes.WithLabelValues("kube-proxy")); got != 1 {
		t.Fatalf("kube-proxy not ready on %v nodes, want 1", got)
	}
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if n := testutil.CollectAndCount(f.c.metrics.NotReadyNodes); n != 0 {
		t.Fatalf("%d extension_not_ready_nodes series after every extension became ready, want 0", n)
	}
}

// The extension label set is capped: past the cap, further extensions share
// one series, and the counts stay right as nodes come and go.
func TestNotReadySeriesAreCapped(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	var nodes []*v1.Node
	for i := range 4 {
		nodes = append(nodes, readyNode(fmt.Sprintf("n%d", i), func(n *v1.Node) {
			n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = fmt.Sprintf(`[{"name":"ext%d"}]`, i)
		}))
	}
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	f := newFixture(t, opts, objs...)
	f.c.metrics.notReadySeries.limit = 2
	for i := range 4 {
		f.sync(fmt.Sprintf("n%d", i))
	}
	if n := testutil.CollectAndCount(f.c.metrics.NotReadyNodes); n != 3 {
		t.Fatalf("%d series, want 3 (two extensions and %s)", n, otherExtensionsLabel)
	}
	if got := testutil.ToFloat64(f.c.metrics.NotReadyNodes.WithLabelValues(otherExtensionsLabel)); got != 2 {
		t.Fatalf("%s counts %v nodes, want 2", otherExtensionsLabel, got)
	}
	for i := range 4 {
		f.renew(fmt.Sprintf("ext%d", i), fmt.Sprintf("n%d", i))
		f.sync(fmt.Sprintf("n%d", i))
	}
	if n := testutil.CollectAndCount(f.c.metrics.NotReadyNodes); n != 0 {
		t.Fatalf("%d series after every extension became ready, want 0", n)
	}
}

// histogram returns a histogram's sample count and sum.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A release is timed from the instant it was observed, not from the last
// renewal the released Lease still carries.
func TestDetectionLatencyOfAReleaseStartsAtTheRelease(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	renewed := f.clock.Now()
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(20 * time.Second)
	// Released as the heartbeat library does: renewTime keeps the last renewal.
	f.putLease(lease("kube-proxy", "n1", "", renewed))
	f.clock.Step(time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("a released extension must gate the node")
	}
	if n, sum := histogram(t, f.c.metrics.DetectionLatency); n != 1 || sum != 1 {
		t.Fatalf("detection latency: %d samples summing to %vs, want one of 1s (release observed 1s before the taint)", n, sum)
	}
}

// A deleted Lease is a failure like an expired one, and is timed from its
// deletion.
func TestDetectionLatencyOfADeletedLease(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	l := f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(5 * time.Second)
	f.deleteLease(l)
	f.clock.Step(2 * time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("a deleted Lease must gate the node")
	}
	if n, sum := histogram(t, f.c.metrics.DetectionLatency); n != 1 || sum != 2 {
		t.Fatalf("detection latency: %d samples summing to %vs, want one of 2s (deleted 2s before the taint)", n, sum)
	}
}

// nodehealth_longest_gate_seconds grows while a node stays gated, without
// any sync, keeps counting when the node's gate reason changes, reports the
// longest of several nodes, and has no series once no node is gated.
func TestLongestGateSeconds(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), readyNode("n2"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(f.c.metrics.LongestGate)
	expect := func(want string) {
		t.Helper()
		if want != "" {
			want = "# HELP nodehealth_longest_gate_seconds How long the longest-gated of the nodes gated for this reason has been gated without interruption (as seen by the current leader: a failover restarts the count). Series exist only for reasons some node is gated for.\n" +
				"# TYPE nodehealth_longest_gate_seconds gauge\n" + want
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nodehealth_longest_gate_seconds"); err != nil {
			t.Error(err)
		}
	}
	expect("")

	f.sync("n1") // kube-proxy has no Lease: gated
	f.clock.Step(30 * time.Second)
	f.sync("n2")
	f.clock.Step(90 * time.Second)
	expect(`nodehealth_longest_gate_seconds{reason="ExtensionsNotReady"} 120` + "\n")

	// n1 recovers: n2's gate is now the longest.
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	expect(`nodehealth_longest_gate_seconds{reason="ExtensionsNotReady"} 90` + "\n")

	// A change of reason keeps the node's gate age.
	f.c.mu.Lock()
	prev := f.c.contributions["n2"]
	next := prev
	next.reason = causeStartupExpiry
	f.c.updateContribution("n2", next)
	f.c.mu.Unlock()
	f.clock.Step(10 * time.Second)
	expect(`nodehealth_longest_gate_seconds{reason="StartupTimeout"} 100` + "\n")

	f.renew("kube-proxy", "n2")
	f.sync("n2")
	if f.tainted("n2") {
		t.Fatal("n2 still gated after its extension renewed")
	}
	expect("")
}

// observed returns the observation count and sum of one series of a
// histogram vector.
func observed(t *testing.T, vec *prometheus.HistogramVec, label string) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := vec.WithLabelValues(label).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// The extension label of the start-up histogram is capped like
// extension_not_ready_nodes: past the cap, extensions share "_other", and an
// extension that has a series keeps it.
func TestTheExtensionStartupLabelIsCapped(t *testing.T) {
	m := NewMetrics(nil)
	m.startupSeries.limit = 2
	c := &Controller{metrics: m}
	start := func(exts ...string) {
		d := decision{startup: &nodev1alpha1.StartupTimeline{Cause: string(causeRebooted)}, startupExtensions: map[string]time.Duration{}}
		for _, e := range exts {
			d.startupExtensions[e] = time.Second
		}
		c.observeStartup(d)
	}
	start("a")
	start("b", "c", "d")
	start("a", "e")
	if n := testutil.CollectAndCount(m.ExtensionStartup); n != 3 {
		t.Errorf("%d series, want 3 (two extensions and %s)", n, otherExtensionsLabel)
	}
	if count, _ := observed(t, m.ExtensionStartup, "a"); count != 2 {
		t.Errorf("a observed %d times, want 2", count)
	}
	if count, _ := observed(t, m.ExtensionStartup, otherExtensionsLabel); count != 3 {
		t.Errorf("%s observed %d times, want 3", otherExtensionsLabel, count)
	}
	// A start-up found at a controller start began earlier: not counted.
	c.observeStartup(decision{startup: &nodev1alpha1.StartupTimeline{Cause: string(causeRebooted), FoundAtStart: true}, startupExtensions: map[string]time.Duration{"a": time.Second}})
	if count, _ := observed(t, m.NodeStartup, startupReboot); count != 3 {
		t.Errorf("%d reboots observed, want 3", count)
	}
}
