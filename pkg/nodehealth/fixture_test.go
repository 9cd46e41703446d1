package nodehealth

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/sim"
)

const (
	testNS  = "node-extension-lease"
	testKey = nodev1alpha1.DefaultReadinessTaintKey
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func testOptions() Options {
	return Options{
		LeaseNamespace: testNS,
		TaintKey:       testKey,
		TaintEffect:    v1.TaintEffectNoSchedule,
		Rules: []Rule{{Name: "kube-proxy", Extension: "kube-proxy", Selector: labels.Everything(), AffectsReadiness: true,
			FailurePolicy: FailurePolicyKeepGated}},
		RenewalGrace:             10 * time.Second,
		RegistrationGrace:        30 * time.Second,
		MaintenanceReasons:       sets.New(nodev1alpha1.ReasonUpdating),
		LeavingNodeTaints:        sets.New(nodev1alpha1.DefaultLeavingNodeTaints()...),
		LifecycleConditionMaxAge: nodev1alpha1.DefaultLifecycleConditionMaxAge,
		Eviction:                 EvictionOptions{Mode: EvictionModeEvict, Timeout: 5 * time.Minute, NodesPerSecond: 100, Force: true}, // pod() declares no controller
		BlastRadius:              BlastRadiusOptions{ClusterThreshold: 0.5, ZoneThreshold: 0.55},
		Identity:                 "controller-a",
	}
}

// fixture runs the controller against a fake clientset whose informers are
// fed by hand: syncs are explicit and the clock only moves when a test says.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	c        *Controller
	factory  informers.SharedInformerFactory
}

func newFixture(t *testing.T, opts Options, objects ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureAt(t, t0, opts, objects...)
}

// newFixtureAt is newFixture with the controller starting at start: the
// Leases among objects are first seen then.
func newFixtureAt(t *testing.T, start time.Time, opts Options, objects ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(start)
	recorder := record.NewFakeRecorder(1000)
	c, err := NewController(ctx, Config{Client: client, Nodes: factory.Core().V1().Nodes(),
		Leases: factory.Coordination().V1().Leases().Informer(), Recorder: recorder, Clock: clk, Options: opts,
		Queues: promptQueues(clk)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, clock: clk, recorder: recorder, c: c, factory: factory}
	for _, obj := range objects {
		switch o := obj.(type) {
		case *v1.Node:
			f.nodeIndexer().Add(o.DeepCopy())
		case *coordinationv1.Lease:
			f.leaseIndexer().Add(o.DeepCopy())
			c.leaseChanged(nil, o.DeepCopy())
		}
	}
	t.Cleanup(func() { c.queue.ShutDown(); c.evictions.ShutDown() })
	client.ClearActions()
	return f
}

func (f *fixture) nodeIndexer() interface {
	Add(interface{}) error
	Update(interface{}) error
	Delete(interface{}) error
} {
	return f.factory.Core().V1().Nodes().Informer().GetIndexer()
}

func (f *fixture) leaseIndexer() interface {
	Add(interface{}) error
	Update(interface{}) error
	Delete(interface{}) error
} {
	return f.factory.Coordination().V1().Leases().Informer().GetIndexer()
}

// sync runs one sync of a node and then, like an informer would, copies the
// node the API now holds into the cache.
func (f *fixture) sync(name string) {
	f.t.Helper()
	if err := f.c.syncNode(f.ctx, name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	f.refresh(name)
}

func (f *fixture) refresh(name string) {
	f.t.Helper()
	node, err := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", name)
	if err != nil {
		return
	}
	if err := f.nodeIndexer().Update(node.(*v1.Node).DeepCopy()); err != nil {
		f.t.Fatal(err)
	}
}

// node returns the node as the API holds it.
func (f *fixture) node(name string) *v1.Node {
	f.t.Helper()
	node, err := f.client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return node
}

// updateNode changes a node in the API and in the cache (a kubelet or a
// person did it).
func (f *fixture) updateNode(name string, mutate func(*v1.Node)) {
	f.t.Helper()
	node := f.node(name)
	mutate(node)
	// A write moves the resourceVersion, as on a real API server (the fake
	// keeps the one it is given).
	if rv, err := strconv.ParseInt(node.ResourceVersion, 10, 64); err == nil {
		node.ResourceVersion = strconv.FormatInt(rv+1, 10)
	}
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, node, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refresh(name)
	f.client.ClearActions()
}

// putLease creates or replaces a Lease and delivers it like the informer.
func (f *fixture) putLease(lease *coordinationv1.Lease) {
	f.t.Helper()
	old, _, _ := f.leaseIndexer().(interface {
		GetByKey(string) (interface{}, bool, error)
	}).GetByKey(lease.Namespace + "/" + lease.Name)
	if old == nil {
		f.leaseIndexer().Add(lease.DeepCopy())
	} else {
		f.leaseIndexer().Update(lease.DeepCopy())
	}
	f.c.leaseChanged(old, lease.DeepCopy())
}

// deleteLease deletes the Lease from the cache and hands the deletion to the
// controller's own handler, as the informer does.
func (f *fixture) deleteLease(lease *coordinationv1.Lease) {
	f.leaseIndexer().Delete(lease)
	f.c.deleteLease(lease.DeepCopy())
}

// renew renews the extension's Lease on a node now (with a renewTime the
// extension's own, possibly skewed, clock says).
func (f *fixture) renew(ext, node string) *coordinationv1.Lease {
	l := lease(ext, node, "holder", f.clock.Now())
	f.putLease(l)
	return l
}

func (f *fixture) release(ext, node, reason string) {
	l := lease(ext, node, "", f.clock.Now())
	l.Annotations = map[string]string{nodev1alpha1.ReasonAnnotation: reason, nodev1alpha1.MessageAnnotation: "stopping"}
	f.putLease(l)
}

// writes returns the write actions since the last call, as "verb resource[/sub]".
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	f.client.ClearActions()
	return out
}

func describe(actions []core.Action) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// expectWrites checks the exact writes made since the last call.
func (f *fixture) expectWrites(want ...string) []core.Action {
	f.t.Helper()
	actions := f.writes()
	got := describe(actions)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		f.t.Fatalf("writes: got %q, want %q", got, want)
	}
	return actions
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) expectEvent(substr string) {
	f.t.Helper()
	events := f.events()
	for _, e := range events {
		if strings.Contains(e, substr) {
			return
		}
	}
	f.t.Fatalf("no event containing %q in %q", substr, events)
}

func (f *fixture) tainted(name string) bool {
	return nodeutil.HasTaint(f.node(name), testKey, v1.TaintEffectNoSchedule)
}

func (f *fixture) condition(name string) v1.NodeCondition {
	f.t.Helper()
	for _, c := range f.node(name).Status.Conditions {
		if c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
			return c
		}
	}
	f.t.Fatalf("node %s has no %s condition", name, nodev1alpha1.SystemExtensionsReadyCondition)
	return v1.NodeCondition{}
}

func newNode(name string, mutate ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Labels: map[string]string{}},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{BootID: "boot-1"}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

// readyNode is a node that was ungated in its current boot before the
// controller (re)started.
func readyNode(name string, mutate ...func(*v1.Node)) *v1.Node {
	return newNode(name, append([]func(*v1.Node){func(n *v1.Node) {
		n.Annotations = map[string]string{
			nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`,
			nodev1alpha1.BootAnnotation:             bootRecord{BootID: n.Status.NodeInfo.BootID, UID: n.UID}.String(),
		}
		n.Status.Conditions = []v1.NodeCondition{{Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: v1.ConditionTrue, Reason: "ExtensionsReady"}}
	}}, mutate...)...)
}

func withTaint(n *v1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: testKey, Effect: v1.TaintEffectNoSchedule})
}

func withZone(zone string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[v1.LabelTopologyZone] = zone }
}

// kubeProxyNodes are a ready node and its kube-proxy Lease, renewed at t0,
// for each name, in zone ("": without the zone label).
func kubeProxyNodes(zone string, names ...string) []runtime.Object {
	var objs []runtime.Object
	for _, n := range names {
		node := readyNode(n)
		if zone != "" {
			node = readyNode(n, withZone(zone))
		}
		objs = append(objs, node, lease("kube-proxy", n, "holder", t0))
	}
	return objs
}

// syncNodes syncs every Node among objs, in their order.
func (f *fixture) syncNodes(objs []runtime.Object) {
	for _, o := range objs {
		if n, ok := o.(*v1.Node); ok {
			f.sync(n.Name)
		}
	}
}

// leaseNameFor is nodev1alpha1.LeaseName for the names tests choose, which
// always pass its checks.
func leaseNameFor(ext, node string) string {
	name, err := nodev1alpha1.LeaseName(ext, node)
	if err != nil {
		panic(err)
	}
	return name
}

func lease(ext, node, holder string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: leaseNameFor(ext, node), Labels: nodev1alpha1.LeaseLabels(ext, node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

// patchOf decodes a node patch action.
func patchOf(t *testing.T, a core.Action) map[string]interface{} {
	t.Helper()
	p, ok := a.(core.PatchAction)
	if !ok {
		t.Fatalf("action %v is not a patch", a)
	}
	var out map[string]interface{}
	if err := json.Unmarshal(p.GetPatch(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) live(name string) {
	f.c.mu.Lock()
	f.c.live.Insert(name)
	f.c.mu.Unlock()
}

func fmtTaints(n *v1.Node) string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, fmt.Sprintf("%s:%s", t.Key, t.Effect))
	}
	return strings.Join(out, ",")
}

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
	return newFixtureAt(f.t, f.clock.Now(), opts, initial...)
}

func (f *fixture) state(name string) nodeState {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return *f.c.nodes[name]
}

// withCNI adds a second required extension, cni, on every node, with a
// startup timeout and its failure policy.
func withCNI(opts Options, timeout time.Duration, policy FailurePolicy) Options {
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true,
		StartupTimeout: timeout, FailurePolicy: policy})
	return opts
}

// rebootedWithOldLeases puts n1 in service with kube-proxy and cni renewed,
// lets wait pass, and reboots it: the Leases of the previous boot are still
// within their 40 s.
func (f *fixture) rebootedWithOldLeases(wait func()) {
	f.renew("kube-proxy", "n1")
	f.renew("cni", "n1")
	f.sync("n1")
	wait()
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
}

// kubeProxyFailedOpenWhileCNIGates is a new node n1 whose kube-proxy
// (startup timeout 1 m, Ungate) failed open while cni, which never renewed
// (KeepGated), keeps it gated.
func kubeProxyFailedOpenWhileCNIGates(t *testing.T) (*fixture, Options) {
	opts := testOptions()
	opts.Rules[0].StartupTimeout = time.Minute
	opts.Rules[0].FailurePolicy = FailurePolicyUngate
	opts = withCNI(opts, 0, FailurePolicyKeepGated)
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	return f, opts
}

// promptDelays is the fixture's work queue: a delayed item (AddAfter, a
// rate-limited retry) is due on the fake clock and is in the queue from the
// instant it is due for whoever looks (Len, Get), not when the workqueue's
// delaying goroutine gets to it (sim.DueItems): a test that stepped the
// clock and drained the queue could find an item due in that instant
// arriving after it, under load
// (TestAnExpiryCountsOnceTheCanaryRenewalAskedForIsObserved failed 18 of 600
// runs, two at a time on 2 cores). A Get that would block waits for an Add,
// not for the clock: the fixture's tests step the clock and then look.
type promptDelays struct {
	workqueue.TypedRateLimitingInterface[string]
	limiter workqueue.TypedRateLimiter[string]
	clk     *testingclock.FakeClock
	due     sim.DueItems
}

func promptQueues(clk *testingclock.FakeClock) QueueFactory {
	return func(name string, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
		return &promptDelays{
			TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
				workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk}),
			limiter: limiter, clk: clk,
		}
	}
}

func (q *promptDelays) AddAfter(item string, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	q.due.Add(item, q.clk.Now().Add(d))
}

func (q *promptDelays) AddRateLimited(item string) { q.AddAfter(item, q.limiter.When(item)) }

// addDue queues the items due by the clock's now.
func (q *promptDelays) addDue() {
	for _, item := range q.due.Take(q.clk.Now()) {
		q.Add(item)
	}
}

func (q *promptDelays) Len() int {
	q.addDue()
	return q.TypedRateLimitingInterface.Len()
}

func (q *promptDelays) Get() (string, bool) {
	q.addDue()
	return q.TypedRateLimitingInterface.Get()
}
