// Package bench holds nodehealth's benchmarks: this Go benchmark of the node-health
// controller's per-event cost with no API server, and the scale benchmark against
// the real control plane in ./scale. Results are recorded in docs/benchmarks.md.
package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	controllersetup "nodehealth.io/nodehealth/internal/setup/controller"
	"nodehealth.io/nodehealth/pkg/nodehealth"
)

const (
	benchNamespace  = nodev1alpha1.DefaultLeaseNamespace
	benchExtensions = 5
	// maxInFlight bounds the updates sent but not yet handled by the controller:
	// the fake clientset's watch panics when more than 100 events are unread.
	maxInFlight = 50
)

// BenchmarkLeaseRenewal measures what one extension Lease renewal costs the
// node-health controller at steady state — every node ready, every Lease renewed
// in time — with no API server: the informer delivering the update and the Lease
// tracker. Such a renewal changes nothing, so it queues no node (the expiry timer
// each node holds re-evaluates it once per Lease duration); evals/s shows that.
// Renewals come through a fake clientset's watch, spread over N nodes × 5
// extensions as the renewals of a real cluster are; events/s includes the fake
// clientset and the informer.
//
// The controller is built by internal/setup/controller, as the binary builds it,
// so its Lease informer is the direct one (pkg/nodehealth/leaseinformer.go). Before
// issue 34 this benchmark built it with a shared Lease informer and a fake event
// recorder: the per-event figures in docs/benchmarks.md were measured that way, are
// not comparable with later runs and need re-measuring on a quiet machine.
//
//	go test ./test/bench -run='^$' -bench=. -cpu=1
func BenchmarkLeaseRenewal(b *testing.B) {
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchmarkEvents(b, nodes, renewLease) })
	}
}

// BenchmarkNodeEvaluation measures one full evaluation of a node with 5
// extensions — decoding its extension list, applying the rules, evaluating every
// Lease, the condition, the timers — forced by an update of a node label no rule
// selects on, so that nothing is written. ns/eval is the controller's own
// nodehealth_evaluation_duration_seconds, the sync alone.
func BenchmarkNodeEvaluation(b *testing.B) {
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchmarkEvents(b, nodes, touchNode) })
	}
}

// driver sends event i of a benchmark through the fake clientset.
type driver func(ctx context.Context, h *harness, i int)

type harness struct {
	client    *fake.Clientset
	nodeCount int
	nodes     []*corev1.Node
	leases    []*coordinationv1.Lease
}

func renewLease(ctx context.Context, h *harness, i int) {
	// Extension-major order: consecutive renewals belong to different nodes, as
	// renewals spread over a renew interval do.
	idx := (i%benchExtensions)*h.nodeCount + (i/benchExtensions)%h.nodeCount
	l := h.leases[idx]
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	updated, err := h.client.CoordinationV1().Leases(benchNamespace).Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		panic(err)
	}
	h.leases[idx] = updated
}

func touchNode(ctx context.Context, h *harness, i int) {
	idx := i % h.nodeCount
	n := h.nodes[idx]
	n.Labels["bench.nodehealth.io/generation"] = fmt.Sprint(i)
	updated, err := h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		panic(err)
	}
	h.nodes[idx] = updated
}

func benchmarkEvents(b *testing.B, nodeCount int, drive driver) {
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h := &harness{nodeCount: nodeCount}
	var objects []runtime.Object
	now := time.Now()
	for i := range nodeCount {
		node, nodeLeases := benchNode(b, fmt.Sprintf("node-%05d", i), now)
		objects = append(objects, node)
		h.nodes = append(h.nodes, node)
		for _, l := range nodeLeases {
			objects = append(objects, l)
		}
	}
	// Extension-major, to match renewLease.
	byName := map[string]*coordinationv1.Lease{}
	for _, o := range objects {
		if l, ok := o.(*coordinationv1.Lease); ok {
			byName[l.Name] = l
		}
	}
	for e := range benchExtensions {
		for _, n := range h.nodes {
			h.leases = append(h.leases, byName[extName(e)+"."+n.Name])
		}
	}
	// NewSimpleClientset, not NewClientset: the field-managed tracker of the latter
	// builds a REST mapper on every write, whose cost would be all this benchmark
	// measured (docs/benchmarks.md).
	client := fake.NewSimpleClientset(objects...)
	h.client = client
	// The controller's own Node patches are recorded but not applied: should it
	// write many at once, they would overflow the fake watch.
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		node, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", a.(k8stesting.PatchAction).GetName())
		return true, node, err
	})
	var rules []nodehealth.Rule
	for e := range benchExtensions {
		rules = append(rules, nodehealth.Rule{Name: extName(e), Extension: extName(e), Selector: labels.Everything(), AffectsReadiness: true})
	}
	reg := prometheus.NewRegistry()
	metrics := nodehealth.NewMetrics(reg)
	// Built as the binary builds it: its Node informer, its direct Lease
	// informer, its event broadcaster.
	c, err := controllersetup.New(ctx, controllersetup.Clients{Client: client, Leases: client}, controllersetup.Config{
		Options: nodehealth.Options{
			LeaseNamespace:    benchNamespace,
			TaintKey:          nodev1alpha1.DefaultReadinessTaintKey,
			TaintEffect:       corev1.TaintEffectNoSchedule,
			Rules:             rules,
			RenewalGrace:      10 * time.Second,
			RegistrationGrace: 30 * time.Second,
			Eviction:          nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeNone},
		},
		Metrics: metrics,
	})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 10) }()
	defer func() { cancel(); <-done }()
	// The initial sync of every node: the nodes are ready and carry everything the
	// controller would write, so a restarted controller has nothing to write.
	for testutil.ToFloat64(metrics.EvaluationsTotal) < float64(nodeCount) {
		time.Sleep(time.Millisecond)
	}
	waitIdle(b, metrics)
	writesBefore := countWrites(client)
	if writesBefore != 0 {
		b.Logf("the controller wrote %d times at start although every node was ready and up to date", writesBefore)
	}

	evalsBefore := testutil.ToFloat64(metrics.EvaluationsTotal)
	durBefore := histogramSum(b, reg)
	seenBefore := c.HandledEvents()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		drive(ctx, h, i)
		for int64(i+1)-(c.HandledEvents()-seenBefore) > maxInFlight {
			time.Sleep(10 * time.Microsecond)
		}
	}
	for c.HandledEvents()-seenBefore < int64(b.N) {
		time.Sleep(10 * time.Microsecond)
	}
	waitIdle(b, metrics)
	elapsed := time.Since(start) - idleWindow
	b.StopTimer()

	evals := testutil.ToFloat64(metrics.EvaluationsTotal) - evalsBefore
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(evals/elapsed.Seconds(), "evals/s")
	if evals > 0 {
		b.ReportMetric((histogramSum(b, reg)-durBefore)/evals*1e9, "ns/eval")
	}
	if writes := countWrites(client) - writesBefore; writes != 0 {
		b.Fatalf("the controller wrote nodes %d times at steady state", writes)
	}
}

// idleWindow is how long evaluations must not move for the controller to count as
// idle. It is subtracted from the measured time.
const idleWindow = 20 * time.Millisecond

// waitIdle waits until the controller's evaluation counter has not moved for
// idleWindow: every queued node was evaluated.
func waitIdle(b *testing.B, m *nodehealth.Metrics) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	last, lastChange := testutil.ToFloat64(m.EvaluationsTotal), time.Now()
	for time.Since(lastChange) < idleWindow {
		if time.Now().After(deadline) {
			b.Fatal("the controller did not become idle within a minute")
		}
		time.Sleep(time.Millisecond)
		if v := testutil.ToFloat64(m.EvaluationsTotal); v != last {
			last, lastChange = v, time.Now()
		}
	}
}

func histogramSum(b *testing.B, reg *prometheus.Registry) float64 {
	b.Helper()
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "nodehealth_evaluation_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	b.Fatal("nodehealth_evaluation_duration_seconds not found")
	return 0
}

// countWrites counts the controller's writes of Nodes through client: it only
// patches them (the benchmark's own writes are updates).
func countWrites(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

func extName(e int) string { return fmt.Sprintf("ext-%d", e) }

// benchNode returns a ready node whose extension list and boot record already say
// what the controller would write, and its renewed Leases.
func benchNode(b *testing.B, name string, now time.Time) (*corev1.Node, []*coordinationv1.Lease) {
	b.Helper()
	uid := types.UID("uid-" + name)
	var list []nodev1alpha1.SystemExtension
	for e := range benchExtensions {
		list = append(list, nodev1alpha1.SystemExtension{Name: extName(e), Source: nodev1alpha1.RuleSource(extName(e))})
	}
	encoded, err := nodev1alpha1.EncodeSystemExtensions(list, name, benchNamespace)
	if err != nil {
		b.Fatal(err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Labels: map[string]string{corev1.LabelHostname: name},
			Annotations: map[string]string{
				nodev1alpha1.SystemExtensionsAnnotation: encoded,
				nodev1alpha1.BootAnnotation:             fmt.Sprintf(`{"bootID":"boot-1","uid":%q}`, uid),
			}},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"},
			Conditions: []corev1.NodeCondition{{Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: corev1.ConditionTrue,
				Reason: "ExtensionsReady", Message: "Every required system extension is ready."}},
		},
	}
	var leases []*coordinationv1.Lease
	for e := range benchExtensions {
		leases = append(leases, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: extName(e) + "." + name, Namespace: benchNamespace,
				Labels: nodev1alpha1.LeaseLabels(extName(e), name)},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(extName(e) + "-" + name),
				LeaseDurationSeconds: ptr.To[int32](3600), // no expiry during the run: only renewals are measured
				RenewTime:            &metav1.MicroTime{Time: now},
			},
		})
	}
	return node, leases
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
