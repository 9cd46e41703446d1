package nodehealth

import (
	"fmt"
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
