package nodehealth

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// recordingHandler records the events it receives, in order.
type recordingHandler struct {
	mu     sync.Mutex
	events []string
	// log, when set, records every event too, after tag: one log for
	// several handlers shows the order they were called in.
	log *recordingHandler
	tag string
}

func (r *recordingHandler) record(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
	if r.log != nil {
		r.log.record(r.tag + s)
	}
}

func (r *recordingHandler) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recordingHandler) OnAdd(obj interface{}, initial bool) {
	l := obj.(*coordinationv1.Lease)
	r.record("add " + l.Name + map[bool]string{true: " initial", false: ""}[initial])
}

func (r *recordingHandler) OnUpdate(_, obj interface{}) {
	l := obj.(*coordinationv1.Lease)
	r.record("update " + l.Name + " " + ptr.Deref(l.Spec.HolderIdentity, ""))
}

func (r *recordingHandler) OnDelete(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r.record("delete " + obj.(*coordinationv1.Lease).Name)
}

func testLease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ext", Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
	}
}

// The direct informer delivers the initial list before it reports synced,
// then every add, update and delete to each of its handlers, in the order they
// were added, from a namespace only, with the transform applied to what it
// stores; it reports stopped once Run returned.
func TestDirectLeaseInformerDelivers(t *testing.T) {
	client := fake.NewClientset(testLease("kube-proxy.n1", "a"),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "kube-proxy.n9"}})
	inf := NewDirectLeaseInformer(client, "ext", TransformLease)
	if err := inf.AddIndexers(cache.Indexers{leaseNodeIndex: indexLeaseByNode}); err != nil {
		t.Fatal(err)
	}
	order := &recordingHandler{}
	h := &recordingHandler{log: order, tag: "first "}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		t.Fatal(err)
	}
	second := &recordingHandler{log: order, tag: "second "}
	if _, err := inf.AddEventHandler(second); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(ctx) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("not synced")
	}
	if got := h.got(); len(got) != 1 || got[0] != "add kube-proxy.n1 initial" {
		t.Fatalf("events by the time it synced: %q, want the initial list", got)
	}
	if _, err := inf.AddEventHandler(&recordingHandler{}); err == nil || !strings.Contains(err.Error(), "before Run") {
		t.Fatalf("a handler after Run: got error %v, want one saying to add it before Run", err)
	}

	leases := client.CoordinationV1().Leases("ext")
	if _, err := leases.Create(ctx, testLease("csi.n2", "b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Update(ctx, testLease("kube-proxy.n1", "c"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(ctx, "csi.n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add kube-proxy.n1 initial", "add csi.n2", "update kube-proxy.n1 c", "delete csi.n2"}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(h.got()) >= len(want), nil
	}); err != nil {
		t.Fatalf("events: %q, want %q", h.got(), want)
	}
	if got := h.got(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events: %q, want %q", got, want)
	}
	var wantOrder []string
	for _, e := range want {
		wantOrder = append(wantOrder, "first "+e, "second "+e)
	}
	if got := order.got(); strings.Join(got, ",") != strings.Join(wantOrder, ",") {
		t.Fatalf("events of both handlers: %q, want each to the first, then to the second: %q", got, wantOrder)
	}

	obj, ok, err := inf.GetIndexer().GetByKey("ext/kube-proxy.n1")
	if err != nil || !ok {
		t.Fatalf("stored Lease: ok=%v err=%v", ok, err)
	}
	if l := obj.(*coordinationv1.Lease); l.ManagedFields != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "c" {
		t.Fatalf("stored Lease: managedFields %v (want dropped by the transform), holder %q (want c)", l.ManagedFields, ptr.Deref(l.Spec.HolderIdentity, ""))
	}
	byNode, err := inf.GetIndexer().ByIndex(leaseNodeIndex, "n1")
	if err != nil || len(byNode) != 1 {
		t.Fatalf("Leases of n1 by index: %d (err %v), want 1", len(byNode), err)
	}

	if inf.IsStopped() {
		t.Fatal("the informer reports stopped while Run runs")
	}
	cancel()
	<-done
	stopped = true
	if !inf.IsStopped() {
		t.Fatal("the informer does not report stopped after Run returned")
	}
}
