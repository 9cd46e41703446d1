package nodehealth

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
