package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	nhfake "nodehealth.io/client-go/clientset/versioned/fake"
	nhscheme "nodehealth.io/client-go/clientset/versioned/scheme"
	nhinformers "nodehealth.io/client-go/informers/externalversions"
)

var (
	nodesGVR   = corev1.SchemeGroupVersion.WithResource("nodes")
	leasesGVR  = coordinationv1.SchemeGroupVersion.WithResource("leases")
	shadowsGVR = updatesv1alpha1.SchemeGroupVersion.WithResource("bottlerocketshadows")
)

const leaseNS = "kube-node-lease"

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := nhscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// seen records what one informer's handler was told, in order.
type seen struct {
	mu     sync.Mutex
	events []string // "ADD ns/name rv"
}

func (s *seen) handler() cache.ResourceEventHandler {
	add := func(kind string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, _ := meta.Accessor(obj)
		s.mu.Lock()
		s.events = append(s.events, fmt.Sprintf("%s %s/%s %s", kind, m.GetNamespace(), m.GetName(), m.GetResourceVersion()))
		s.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { add("ADD", obj) },
		UpdateFunc: func(_, obj any) { add("UPDATE", obj) },
		DeleteFunc: func(obj any) { add("DELETE", obj) },
	}
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// env is an API with a fake kube clientset and Node and Lease informers built
// as production builds them.
type env struct {
	t                 *testing.T
	ctx               context.Context
	api               *API
	client            *fake.Clientset
	nodeInf, leaseInf cache.SharedIndexInformer
	nodes, leases     *seen
}

func newEnv(t *testing.T, seed uint64) *env {
	t.Helper()
	e := &env{t: t, api: NewAPI(testScheme(t), NewRand(seed)), client: fake.NewSimpleClientset(), nodes: &seen{}, leases: &seen{}}
	e.api.Trace = &Trace{}
	e.api.Install(&e.client.Fake)
	factory := informers.NewSharedInformerFactory(e.client, 0)
	e.nodeInf = factory.Core().V1().Nodes().Informer()
	e.leaseInf = factory.Coordination().V1().Leases().Informer()
	for _, x := range []struct {
		gvr schema.GroupVersionResource
		inf cache.SharedIndexInformer
		s   *seen
	}{{nodesGVR, e.nodeInf, e.nodes}, {leasesGVR, e.leaseInf, e.leases}} {
		if err := e.api.Track(x.gvr, x.inf); err != nil {
			t.Fatal(err)
		}
		if _, err := x.inf.AddEventHandler(x.s.handler()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	e.settle()
	return e
}

func (e *env) settle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := e.api.Settle(ctx, func() bool { return true }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) must(_ any, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func lease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: leaseNS}}
}

func mergePatch(rv string, labels map[string]string) []byte {
	m := map[string]any{"labels": labels}
	if rv != "" {
		m["resourceVersion"] = rv
	}
	b, _ := json.Marshal(map[string]any{"metadata": m})
	return b
}

// storeRVs is an informer store as namespace/name → resourceVersion.
func storeRVs(inf cache.SharedIndexInformer) map[string]string {
	out := map[string]string{}
	for _, obj := range inf.GetStore().List() {
		m, _ := meta.Accessor(obj)
		out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
	}
	return out
}

// apiRVs is the API's objects of gvr in storeRVs' form.
func apiRVs(a *API, gvr schema.GroupVersionResource) map[string]string {
	out := map[string]string{}
	for _, obj := range a.Objects(gvr) {
		m, _ := meta.Accessor(obj)
		out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkOrdered fails unless each object's events came in strictly increasing
// resourceVersion (an UPDATE at the same resourceVersion, a relist's, is
// allowed) and no object was ADDED while the informer already had it.
func checkOrdered(t *testing.T, events []string) {
	t.Helper()
	last, present := map[string]int{}, map[string]bool{}
	for _, ev := range events {
		f := strings.Fields(ev)
		rv, _ := strconv.Atoi(f[2])
		switch {
		case f[0] == "ADD" && present[f[1]]:
			t.Errorf("%s: added again while present (events %q)", ev, events)
		case rv < last[f[1]] || (rv == last[f[1]] && f[0] != "UPDATE"):
			t.Errorf("%s: out of order after rv %d (events %q)", ev, last[f[1]], events)
		}
		last[f[1]], present[f[1]] = rv, f[0] != "DELETE"
	}
}

func TestAnInformerSeesCreatesUpdatesAndDeletesInPerWatchFIFOOrder(t *testing.T) {
	e := newEnv(t, 1)
	ctx := e.ctx
	nodes, leases := e.client.CoreV1().Nodes(), e.client.CoordinationV1().Leases(leaseNS)
	for i := range 3 {
		e.must(nodes.Create(ctx, node(fmt.Sprint("n", i)), metav1.CreateOptions{}))
		e.must(leases.Create(ctx, lease(fmt.Sprint("n", i)), metav1.CreateOptions{}))
	}
	for i := range 3 {
		e.must(nodes.Patch(ctx, fmt.Sprint("n", i), types.MergePatchType, mergePatch("", map[string]string{"step": "1"}), metav1.PatchOptions{}))
		l, err := leases.Get(ctx, fmt.Sprint("n", i), metav1.GetOptions{})
		e.must(nil, err)
		l.Spec.HolderIdentity = ptrTo("kubelet")
		e.must(leases.Update(ctx, l, metav1.UpdateOptions{}))
	}
	e.must(nil, nodes.Delete(ctx, "n1", metav1.DeleteOptions{}))
	e.must(nil, leases.Delete(ctx, "n2", metav1.DeleteOptions{}))

	if got := e.api.DeliverAll(); got != 14 {
		t.Errorf("delivered %d events, want 14 (6 creates, 6 updates, 2 deletes)", got)
	}
	e.settle()

	want := map[string][]string{
		"nodes":  {"ADD /n0", "ADD /n1", "ADD /n2", "UPDATE /n0", "UPDATE /n1", "UPDATE /n2", "DELETE /n1"},
		"leases": {"ADD kube-node-lease/n0", "ADD kube-node-lease/n1", "ADD kube-node-lease/n2", "UPDATE kube-node-lease/n0", "UPDATE kube-node-lease/n1", "UPDATE kube-node-lease/n2", "DELETE kube-node-lease/n2"},
	}
	for name, s := range map[string]*seen{"nodes": e.nodes, "leases": e.leases} {
		got := s.list()
		checkOrdered(t, got)
		var kinds []string
		for _, ev := range got {
			f := strings.Fields(ev)
			kinds = append(kinds, f[0]+" "+f[1])
		}
		if strings.Join(kinds, ",") != strings.Join(want[name], ",") {
			t.Errorf("%s informer saw %q, want %q", name, kinds, want[name])
		}
	}
	if !equalMaps(storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR)) || !equalMaps(storeRVs(e.leaseInf), apiRVs(e.api, leasesGVR)) {
		t.Errorf("stores differ from the API after everything was delivered")
	}
	// Deliveries interleave the two watches: the order of kinds in the trace
	// is not all Nodes then all Leases.
	if tr := e.api.Trace.String(); !strings.Contains(tr, "leases") || strings.Index(tr, "leases") > strings.LastIndex(tr, "nodes") {
		t.Logf("trace did not interleave watches (possible, unlikely):\n%s", tr)
	}
}

func TestAStalledLeaseWatchHoldsEventsWhileNodeEventsFlowAndWritesSucceed(t *testing.T) {
	e := newEnv(t, 2)
	ctx := e.ctx
	e.api.Stall(leasesGVR, nil)
	e.must(e.client.CoreV1().Nodes().Create(ctx, node("a"), metav1.CreateOptions{}))
	l, err := e.client.CoordinationV1().Leases(leaseNS).Create(ctx, lease("a"), metav1.CreateOptions{})
	e.must(nil, err)
	l.Spec.HolderIdentity = ptrTo("a")
	renewed, err := e.client.CoordinationV1().Leases(leaseNS).Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("a write to a stalled resource failed: %v", err)
	}

	e.api.DeliverAll()
	e.settle()
	if _, ok := storeRVs(e.nodeInf)["/a"]; !ok {
		t.Errorf("the Node event was held with the Leases'")
	}
	if len(storeRVs(e.leaseInf)) != 0 || e.api.Pending() != 2 {
		t.Errorf("stalled Lease events reached the informer (store %v, %d pending)", storeRVs(e.leaseInf), e.api.Pending())
	}

	e.api.Unstall(leasesGVR)
	e.api.DeliverAll()
	e.settle()
	if got := storeRVs(e.leaseInf)[leaseNS+"/a"]; got != renewed.ResourceVersion {
		t.Errorf("after Unstall the informer has the Lease at %q, want %q", got, renewed.ResourceVersion)
	}
	checkOrdered(t, e.leases.list())
}

func TestAStallMatchingOneLeaseHoldsTheLeasesBehindItOnTheSameWatch(t *testing.T) {
	e := newEnv(t, 3)
	e.api.Stall(leasesGVR, func(obj runtime.Object) bool { return obj.(*coordinationv1.Lease).Name == "a" })
	e.must(e.client.CoordinationV1().Leases(leaseNS).Create(e.ctx, lease("a"), metav1.CreateOptions{}))
	e.must(e.client.CoordinationV1().Leases(leaseNS).Create(e.ctx, lease("b"), metav1.CreateOptions{}))
	if n := e.api.DeliverAll(); n != 0 {
		t.Errorf("delivered %d events from behind a stalled one", n)
	}
	e.api.Unstall(leasesGVR)
	e.api.DeliverAll()
	e.settle()
	checkOrdered(t, e.leases.list())
	if len(storeRVs(e.leaseInf)) != 2 {
		t.Errorf("store %v after Unstall, want both Leases", storeRVs(e.leaseInf))
	}
}

func TestAfterCloseWatchesTheInformerResumesWithNoEventLostAndNoDuplicateProcessedAsNew(t *testing.T) {
	e := newEnv(t, 4)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	// The watch carries an event before it is closed, so that what is
	// replayed is an event it did not deliver (a watch that delivered
	// nothing: TestAStalledWatchClosedBeforeItDeliveredAnythingIsReWatchedNotRelisted).
	e.must(nodes.Create(ctx, node("a"), metav1.CreateOptions{}))
	e.api.DeliverAll()
	e.settle()

	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}))
	e.must(nodes.Create(ctx, node("b"), metav1.CreateOptions{}))
	e.api.Deliver(1) // one of the two; the other is dropped with the watch
	e.api.CloseWatches(nodesGVR)
	e.settle() // the re-watch, from the last resourceVersion received
	if e.api.Pending() == 0 {
		t.Fatalf("the re-watch replayed nothing; want the event the closed watch did not deliver")
	}
	e.must(nil, nodes.Delete(ctx, "a", metav1.DeleteOptions{}))
	e.api.DeliverAll()
	e.settle()

	got := e.nodes.list()
	checkOrdered(t, got)
	if len(got) != 4 {
		t.Errorf("informer saw %q, want ADD a, UPDATE a, ADD b, DELETE a once each", got)
	}
	if !equalMaps(storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR)) {
		t.Errorf("store %v, API %v", storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR))
	}
}

// A reflector takes a watch closed within a second of real time with no
// event for a broken one and lists again after a back-off, reading past a
// stall; the bookmark CloseWatches sends first makes it re-watch from its
// resourceVersion, whatever real time the watch lasted.
func TestAStalledWatchClosedBeforeItDeliveredAnythingIsReWatchedNotRelisted(t *testing.T) {
	e := newEnv(t, 6)
	e.api.Stall(leasesGVR, nil)
	e.must(e.client.CoordinationV1().Leases(leaseNS).Create(e.ctx, lease("a"), metav1.CreateOptions{}))
	e.client.ClearActions()
	e.api.CloseWatches(leasesGVR)
	e.settle()

	var verbs []string
	for _, a := range e.client.Actions() {
		if a.GetResource() == leasesGVR {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if strings.Join(verbs, ",") != "watch" {
		t.Errorf("after the close the reflector did %q, want one watch from its resourceVersion", verbs)
	}
	if len(storeRVs(e.leaseInf)) != 0 {
		t.Errorf("the informer has %v: a relist read past the stall", storeRVs(e.leaseInf))
	}
	e.api.Unstall(leasesGVR)
	e.api.DeliverAll()
	e.settle()
	if len(storeRVs(e.leaseInf)) != 1 {
		t.Errorf("store %v after Unstall, want the Lease", storeRVs(e.leaseInf))
	}
}

func TestAfterCompactAndCloseTheInformerRelistsOn410AndEndsWithTheAPIsState(t *testing.T) {
	e := newEnv(t, 5)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	e.must(nodes.Create(ctx, node("a"), metav1.CreateOptions{}))
	e.must(nodes.Create(ctx, node("b"), metav1.CreateOptions{}))
	e.api.DeliverAll()
	e.settle()

	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}))
	e.must(nil, nodes.Delete(ctx, "b", metav1.DeleteOptions{}))
	e.must(nodes.Create(ctx, node("c"), metav1.CreateOptions{}))
	e.api.Compact(e.api.ResourceVersion())
	e.client.ClearActions()
	e.api.CloseWatches(nodesGVR)
	start := time.Now()
	e.settle() // 410 on the re-watch, backoff, relist, watch
	t.Logf("re-watch, 410, backoff and relist took %v", time.Since(start).Round(time.Millisecond))

	var verbs []string
	for _, a := range e.client.Actions() {
		if a.GetResource() == nodesGVR {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if strings.Join(verbs, ",") != "watch,list,watch" {
		t.Errorf("after the close the reflector did %q, want watch (410), list, watch", verbs)
	}
	if !equalMaps(storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR)) {
		t.Errorf("store %v after the relist, API %v", storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR))
	}
	if e.api.Pending() != 0 {
		t.Errorf("%d events pending after a relist at the current resourceVersion", e.api.Pending())
	}
}

func TestAMergePatchWithAStaleResourceVersionGets409(t *testing.T) {
	e := newEnv(t, 6)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)
	stale := n.ResourceVersion
	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(stale, map[string]string{"x": "1"}), metav1.PatchOptions{}))
	_, err = nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(stale, map[string]string{"x": "2"}), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("merge patch at a stale resourceVersion: %v, want 409 Conflict", err)
	}
	n.Labels = map[string]string{"x": "3"}
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update at a stale resourceVersion: %v, want 409 Conflict", err)
	}
	// Without a resourceVersion, patches and updates are unconditional.
	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "4"}), metav1.PatchOptions{}))
	e.must(nodes.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`), metav1.PatchOptions{}))
	got, err := nodes.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/labels/x","value":"5"}]`), metav1.PatchOptions{})
	e.must(nil, err)
	if got.Labels["x"] != "5" || len(got.Spec.Taints) != 1 {
		t.Errorf("patched node %+v", got.ObjectMeta)
	}
}

func TestAWriteBeforeServeMakesThroughAnotherClientLandsBeforeTheRequestAndMakesItConflict(t *testing.T) {
	e := newEnv(t, 6)
	ctx := e.ctx
	n, err := e.client.CoreV1().Nodes().Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)
	// The controller's client and another writer's, both on the one API.
	ctrl, other := fake.NewSimpleClientset(), fake.NewSimpleClientset()
	e.api.Install(&ctrl.Fake)
	e.api.Install(&other.Fake)
	var taken []string
	e.api.BeforeServe(&ctrl.Fake, func(a clienttesting.Action) {
		taken = append(taken, a.GetVerb())
		if a.GetVerb() != "patch" {
			return
		}
		fresh, err := other.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		e.must(nil, err)
		fresh.Labels = map[string]string{"pool": "other"}
		e.must(other.CoreV1().Nodes().Update(ctx, fresh, metav1.UpdateOptions{}))
	})
	_, err = ctrl.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, mergePatch(n.ResourceVersion, map[string]string{"x": "1"}), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("a patch at the resourceVersion read before another writer's update: %v, want 409 Conflict", err)
	}
	got, err := ctrl.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	e.must(nil, err)
	if got.Labels["pool"] != "other" || got.Labels["x"] != "" {
		t.Errorf("labels %v, want the other writer's pool=other alone", got.Labels)
	}
	if want := []string{"patch", "get"}; !slices.Equal(taken, want) {
		t.Errorf("the hook saw %v, want %v: every request of the client, none of the other's", taken, want)
	}
}

func TestWritesBehaveAsKubeAPIServersDo(t *testing.T) {
	e := newEnv(t, 7)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)
	if n.UID == "" || n.Generation != 1 || n.CreationTimestamp.IsZero() || n.ResourceVersion == "" {
		t.Errorf("created node lacks uid, generation, creationTimestamp or resourceVersion: %+v", n.ObjectMeta)
	}
	if _, err := nodes.Create(ctx, node("a"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	// A write that changes nothing is not written.
	same, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
	e.must(nil, err)
	if same.ResourceVersion != n.ResourceVersion || e.api.Pending() != 1 {
		t.Errorf("no-op update moved the resourceVersion %s → %s or queued an event", n.ResourceVersion, same.ResourceVersion)
	}
	// The main resource ignores status; the status subresource only takes status.
	n.Status.Phase = corev1.NodeRunning
	n.Spec.Unschedulable = true
	upd, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
	e.must(nil, err)
	if upd.Status.Phase != "" || !upd.Spec.Unschedulable || upd.Generation != 2 {
		t.Errorf("update: status %q, unschedulable %v, generation %d; want status kept, spec written, generation 2", upd.Status.Phase, upd.Spec.Unschedulable, upd.Generation)
	}
	upd.Status.Phase = corev1.NodeRunning
	upd.Spec.Unschedulable = false
	st, err := nodes.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	e.must(nil, err)
	if st.Status.Phase != corev1.NodeRunning || !st.Spec.Unschedulable || st.Generation != 2 {
		t.Errorf("status update: status %q, unschedulable %v, generation %d", st.Status.Phase, st.Spec.Unschedulable, st.Generation)
	}
	// A finalizer holds a deletion until it is removed.
	fin := node("f")
	fin.Finalizers = []string{"example.com/hold"}
	e.must(nodes.Create(ctx, fin, metav1.CreateOptions{}))
	e.must(nil, nodes.Delete(ctx, "f", metav1.DeleteOptions{}))
	held, err := nodes.Get(ctx, "f", metav1.GetOptions{})
	e.must(nil, err)
	if held.DeletionTimestamp == nil {
		t.Fatalf("deleting a node with a finalizer did not mark it deleted")
	}
	held.Finalizers = nil
	e.must(nodes.Update(ctx, held, metav1.UpdateOptions{}))
	if _, err := nodes.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node still there after its last finalizer went: %v", err)
	}
	// generateName and UIDs come from the seed.
	gen := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "g-"}}
	g, err := nodes.Create(ctx, gen, metav1.CreateOptions{})
	e.must(nil, err)
	if e2 := NewAPI(testScheme(t), NewRand(7)); e2.generateName("g-") != g.Name || e2.uid(nodesGVR, types.NamespacedName{Name: "a"}) != n.UID {
		t.Errorf("generated name %q or uid %q is not the seed's", g.Name, n.UID)
	}
}

func TestFaultsRefuseOrLoseWrites(t *testing.T) {
	e := newEnv(t, 8)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)

	e.api.Inject(Fault{Verb: "patch", Resource: "nodes", Name: "a", Kind: LostAnswer})
	_, err = nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(n.ResourceVersion, map[string]string{"x": "1"}), metav1.PatchOptions{})
	if !apierrors.IsTimeout(err) {
		t.Errorf("lost answer: %v, want a timeout", err)
	}
	got, err := nodes.Get(ctx, "a", metav1.GetOptions{})
	e.must(nil, err)
	if got.Labels["x"] != "1" {
		t.Errorf("the write whose answer was lost was not applied: labels %v", got.Labels)
	}
	// Its retry, at the resourceVersion it read, now conflicts.
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(n.ResourceVersion, map[string]string{"x": "1"}), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("retry of the lost write: %v, want 409", err)
	}

	for kind, is := range map[FaultKind]func(error) bool{Conflict: apierrors.IsConflict, ServerError: apierrors.IsInternalError, Timeout: apierrors.IsTimeout} {
		e.api.Inject(Fault{Resource: "nodes", Subresource: "status", Kind: kind})
		_, err := nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{})
		if !is(err) {
			t.Errorf("%v fault: %v", kind, err)
		}
	}
	if now, _ := nodes.Get(ctx, "a", metav1.GetOptions{}); now.ResourceVersion != got.ResourceVersion {
		t.Errorf("a refused write was applied")
	}
	e.must(nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{})) // faults are used up

	// Random faults are the seed's: the same writes fail in another API of
	// the same seed.
	failures := func() string {
		a := NewAPI(testScheme(t), NewRand(99))
		c := fake.NewSimpleClientset()
		a.Install(&c.Fake)
		a.SetFaultRate(0.3)
		var out []string
		for i := range 40 {
			_, err := c.CoreV1().Nodes().Create(ctx, node(fmt.Sprint(i)), metav1.CreateOptions{})
			out = append(out, fmt.Sprint(apierrors.ReasonForError(err)))
		}
		return strings.Join(out, ",")
	}
	if a, b := failures(), failures(); a != b || !strings.Contains(a, "Conflict") {
		t.Errorf("random faults differ between runs of one seed, or none happened:\n%s\n%s", a, b)
	}
}

func TestAQueuedListFaultFailsTheListAndAnEndlessOneLastsUntilCleared(t *testing.T) {
	e := newEnv(t, 11)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	e.must(nodes.Create(ctx, node("a"), metav1.CreateOptions{}))
	e.api.Inject(Fault{Verb: "list", Resource: "nodes", Kind: ServerError})
	e.api.Inject(Fault{Verb: "patch", Resource: "nodes", Kind: Timeout, Count: -1})
	e.api.Inject(Fault{Verb: "update", Resource: "nodes", Kind: Conflict, Count: 2})
	if _, err := nodes.List(ctx, metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("list with a fault queued: %v, want 500", err)
	}
	if l, err := nodes.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("the next list: %v, %v, want the one node", l, err)
	}
	for range 3 {
		if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}); !apierrors.IsTimeout(err) {
			t.Errorf("patch during an endless fault: %v, want 504", err)
		}
	}
	e.api.ClearEndlessFaults()
	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}))
	a, err := nodes.Get(ctx, "a", metav1.GetOptions{})
	e.must(nil, err)
	if _, err := nodes.Update(ctx, a, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a counted fault left after ClearEndlessFaults: %v, want 409", err)
	}
}

func TestAnOutageRefusesTheWriteAFaultQueuedEarlierWouldHaveAppliedAndThatFaultWaitsForTheNextWrite(t *testing.T) {
	e := newEnv(t, 12)
	ctx := e.ctx
	nodes := e.client.CoreV1().Nodes()
	e.must(nodes.Create(ctx, node("a"), metav1.CreateOptions{}))
	e.api.Inject(Fault{Verb: "patch", Resource: "nodes", Kind: LostAnswer})
	e.api.Inject(Fault{Verb: "patch", Resource: "nodes", Kind: ServerError, Count: -1})
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("patch during an outage with a lost answer queued before it: %v, want 500", err)
	}
	if a, err := nodes.Get(ctx, "a", metav1.GetOptions{}); err != nil || a.Labels["x"] != "" {
		t.Errorf("a write during the outage was applied: %v, %v", a.Labels, err)
	}
	e.api.ClearEndlessFaults()
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "2"}), metav1.PatchOptions{}); !apierrors.IsTimeout(err) {
		t.Errorf("the first patch after the outage: %v, want the queued lost answer (504)", err)
	}
	if a, err := nodes.Get(ctx, "a", metav1.GetOptions{}); err != nil || a.Labels["x"] != "2" {
		t.Errorf("the write whose answer was lost after the outage was not applied: %v, %v", a.Labels, err)
	}
}

func TestEvictionDeletesThePodUnlessTheHookRefuses(t *testing.T) {
	e := newEnv(t, 9)
	ctx := e.ctx
	pods := e.client.CoreV1().Pods("default")
	for _, name := range []string{"p", "q"} {
		e.must(pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, metav1.CreateOptions{}))
	}
	e.api.EvictionHook = func(p *corev1.Pod) error {
		if p.Name == "q" {
			return fmt.Errorf("pdb blocks %s", p.Name)
		}
		return nil
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	e.must(nil, evict("p"))
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("evicted pod still there: %v", err)
	}
	if err := evict("q"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("eviction blocked by the hook: %v, want 429", err)
	}
	if _, err := pods.Get(ctx, "q", metav1.GetOptions{}); err != nil {
		t.Errorf("pod whose eviction was refused: %v", err)
	}
	if err := evict("gone"); !apierrors.IsNotFound(err) {
		t.Errorf("evicting a missing pod: %v, want NotFound", err)
	}
}

func TestOneAPIBacksTheKubeAndTheNodehealthClientsets(t *testing.T) {
	e := newEnv(t, 10)
	ctx := e.ctx
	nh := nhfake.NewSimpleClientset()
	e.api.Install(&nh.Fake)
	factory := nhinformers.NewSharedInformerFactory(nh, 0)
	inf := factory.Updates().V1alpha1().BottlerocketShadows().Informer()
	if err := e.api.Track(shadowsGVR, inf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	e.settle()

	n, err := e.client.CoreV1().Nodes().Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)
	shadows := nh.UpdatesV1alpha1().BottlerocketShadows()
	s, err := shadows.Create(ctx, &updatesv1alpha1.BottlerocketShadow{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	e.must(nil, err)
	if rvOf(s) != rvOf(n)+1 {
		t.Errorf("shadow at resourceVersion %s after node at %s: not one cluster-wide sequence", s.ResourceVersion, n.ResourceVersion)
	}
	if _, err := shadows.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"x":"1"}}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch of a custom resource: %v, want 415", err)
	}
	e.must(shadows.Patch(ctx, "a", types.MergePatchType, mergePatch(s.ResourceVersion, map[string]string{"x": "1"}), metav1.PatchOptions{}))
	e.api.DeliverAll()
	e.settle()
	if got := storeRVs(inf); got["/a"] != strconv.FormatInt(e.api.ResourceVersion(), 10) {
		t.Errorf("shadow informer store %v at API resourceVersion %d", got, e.api.ResourceVersion())
	}
}

func TestAReflectorTryingWatchListIsRefusedAndFallsBackToListAndWatch(t *testing.T) {
	e := newEnv(t, 11)
	e.must(e.client.CoreV1().Nodes().Create(e.ctx, node("a"), metav1.CreateOptions{}))
	e.client.ClearActions()
	// A plain ListWatch does not carry the fake clientset's "no WatchList"
	// marker, so the reflector tries WatchList (on by default in v0.37).
	nodes := e.client.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, o)
		},
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.Node{}, Handler: cache.ResourceEventHandlerFuncs{}})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go ctrl.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		t.Fatal("never synced")
	}
	if len(store.List()) != 1 {
		t.Errorf("store %v, want node a", store.ListKeys())
	}
	var calls []string
	for _, a := range e.client.Actions() {
		calls = append(calls, a.GetVerb())
	}
	if len(calls) < 2 || calls[0] != "watch" || calls[1] != "list" {
		t.Errorf("reflector calls %q, want a refused watch (WatchList) then list", calls)
	}
}

func TestTheSameSeedGivesTheSameDeliveryOrderAndTraceHash(t *testing.T) {
	run := func(t *testing.T, seed uint64) *Trace {
		e := newEnv(t, seed)
		for i := range 6 {
			e.must(e.client.CoreV1().Nodes().Create(e.ctx, node(fmt.Sprint("n", i)), metav1.CreateOptions{}))
			e.must(e.client.CoordinationV1().Leases(leaseNS).Create(e.ctx, lease(fmt.Sprint("n", i)), metav1.CreateOptions{}))
		}
		for e.api.Deliver(3) > 0 {
			e.settle()
		}
		return e.api.Trace
	}
	hashes := map[string]bool{}
	regressions := Regressions{{1, "first seed"}, {2, "second"}, {3, "third"}}
	Run(t, "twice", regressions.Seeds(), func(t *testing.T, seed uint64) *Trace {
		a, b := run(t, seed), run(t, seed)
		if a.Hash() != b.Hash() {
			t.Errorf("seed %d gave two traces:\n%s\n---\n%s", seed, a, b)
		}
		hashes[a.Hash()] = true
		return a
	})
	if len(hashes) < 2 {
		t.Errorf("every seed gave the same delivery order")
	}
}

func TestSettleReturnsWithTheStoresCaughtUp(t *testing.T) {
	e := newEnv(t, 12)
	const n = 40
	var total time.Duration
	for i := range n {
		e.must(e.client.CoreV1().Nodes().Create(e.ctx, node(fmt.Sprint("n", i)), metav1.CreateOptions{}))
		e.must(e.client.CoordinationV1().Leases(leaseNS).Create(e.ctx, lease(fmt.Sprint("n", i)), metav1.CreateOptions{}))
		e.api.Deliver(2)
		start := time.Now()
		e.settle()
		total += time.Since(start)
		// Straight after Settle, with no wait: both stores have what was
		// delivered, which is everything written.
		if !equalMaps(storeRVs(e.nodeInf), apiRVs(e.api, nodesGVR)) || !equalMaps(storeRVs(e.leaseInf), apiRVs(e.api, leasesGVR)) {
			t.Fatalf("step %d: stores not caught up after Settle", i)
		}
	}
	t.Logf("Settle after delivering 2 events: %v on average over %d steps", total/n, n)
}

// OnStore sees the writes the API applied, with the object before them, and
// none it refused: a client's request log records both alike.
func TestOnStoreSeesAppliedWritesAndNoRefusedOne(t *testing.T) {
	e := newEnv(t, 9)
	ctx := e.ctx
	var stored []string
	e.api.OnStore = func(gvr schema.GroupVersionResource, obj, prev runtime.Object) {
		n := obj.(*corev1.Node)
		was := "<none>"
		if prev != nil {
			was = prev.(*corev1.Node).Labels["x"]
		}
		stored = append(stored, fmt.Sprintf("%s %s: %s -> %s", gvr.Resource, n.Name, was, n.Labels["x"]))
	}
	nodes := e.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, node("a"), metav1.CreateOptions{})
	e.must(nil, err)
	e.must(nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(n.ResourceVersion, map[string]string{"x": "1"}), metav1.PatchOptions{}))
	// At the stale resourceVersion: 409, not stored.
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch(n.ResourceVersion, map[string]string{"x": "2"}), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("patch at a stale resourceVersion: %v, want 409", err)
	}
	e.api.Inject(Fault{Verb: "patch", Resource: "nodes", Name: "a", Kind: ServerError})
	if _, err := nodes.Patch(ctx, "a", types.MergePatchType, mergePatch("", map[string]string{"x": "3"}), metav1.PatchOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("patch with a server error injected: %v", err)
	}
	want := []string{"nodes a: <none> -> ", "nodes a:  -> 1"}
	if strings.Join(stored, "\n") != strings.Join(want, "\n") {
		t.Errorf("OnStore saw:\n%s\nwant:\n%s", strings.Join(stored, "\n"), strings.Join(want, "\n"))
	}
}

func TestAClassStreamIsTheSeedsOwnAndNilInTheSeedsThatDoNotDrawTheClass(t *testing.T) {
	const salt = 0x73616c74
	drawn := 0
	for seed := range uint64(200) {
		a, b := Stream(seed, salt, 0.3), Stream(seed, salt, 0.3)
		if (a == nil) != (b == nil) {
			t.Fatalf("seed %d: drawn once and not the other time", seed)
		}
		if a == nil {
			continue
		}
		drawn++
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("seed %d: two streams of one class differ (%d, %d)", seed, x, y)
		}
		if other := Stream(seed, salt+1, 1); other.Uint64() == Stream(seed, salt, 1).Uint64() {
			t.Fatalf("seed %d: two classes share a stream", seed)
		}
	}
	// 30 % of 200, give or take what a fair draw gives.
	if drawn < 40 || drawn > 80 {
		t.Errorf("%d of 200 seeds drew a class of share 0.3", drawn)
	}
	if Stream(7, salt, 0) != nil {
		t.Error("a class of share 0 was drawn")
	}
}
