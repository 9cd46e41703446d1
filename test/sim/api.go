package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// API is the fake API server: one object store with a cluster-wide
// resourceVersion, its event history and the watches opened on it. Install
// it into every fake clientset of a simulation.
type API struct {
	scheme  *runtime.Scheme
	seed    uint64 // of UIDs, generated names and random faults
	deliver *Rand  // the delivery order; drawn only by Deliver

	// Clock stamps creation and deletion timestamps; nil stamps Epoch.
	Clock clock.PassiveClock
	// EvictionHook, if set, decides each eviction (pods/eviction create) of
	// an existing pod: an error refuses it, as a PodDisruptionBudget does
	// (a plain error becomes 429 TooManyRequests, an API status error is
	// returned as it is). It runs without the API's lock, so it may read
	// the API.
	EvictionHook func(pod *corev1.Pod) error
	// servedHooks are OnServed's, by client.
	servedHooks map[*clienttesting.Fake]func(clienttesting.Action, error)
	// takenHooks are BeforeServe's, by client.
	takenHooks map[*clienttesting.Fake]func(clienttesting.Action)
	// Trace, if set, gets a line for each event Deliver delivers.
	Trace *Trace
	// OnStore, if set, sees every write the API applies (prev is nil for a
	// creation): what a client's request log cannot say, since a request
	// refused with a conflict or a fault is logged like one applied. It
	// runs under the API's lock and must not call the API.
	OnStore func(gvr schema.GroupVersionResource, obj, prev runtime.Object)
	// SettlePolls (3) is how many consecutive polls Settle needs to find
	// everything caught up and idle; SettlePoll (200µs, which Linux timers
	// round up to about 1ms) is the wall-clock pause between two.
	SettlePolls int
	SettlePoll  time.Duration
	// ListSettlePolls (3) is how many Settle needs, if more than
	// SettlePolls, when an informer listed a tracked resource since Settle
	// last returned. Settle counts the listed items until the informer's
	// handlers see them, but not the deletions a list implies: those reach
	// the handlers first, except after a list of nothing.
	ListSettlePolls int

	mu      sync.Mutex
	clients int
	rv      int64
	objects map[schema.GroupVersionResource]map[types.NamespacedName]runtime.Object
	// counts numbers what is derived from the seed by hashing, not drawn
	// in call order: the UIDs of each gvr/ns/name, the names generated from
	// each generateName, the writes (for random faults) of each object.
	counts    map[string]int
	history   []event
	compacted int64
	watches   []*Watch
	watchSeq  int
	owed      map[string]int                               // re-watches owed by watches CloseWatches ended
	types     map[schema.GroupVersionResource]reflect.Type // each gvr's object type (its bookmarks')
	stalls    map[schema.GroupVersionResource]func(runtime.Object) bool
	faults    []*Fault
	faultRate float64
	tracked   []trackedInformer
	pending   map[int64]int // resourceVersions delivered to a tracked resource and not yet seen by its informer
	delivered int
	lists     int64 // lists of a tracked resource served
	settled   int64 // lists when Settle last returned
	// deliverMu orders Deliver and CloseWatches: a watch's channel is only
	// sent on or closed while it is held.
	deliverMu sync.Mutex
}

// event is one write as the watch history keeps it; obj and prev (the object
// before, nil for an ADDED) are never modified once recorded.
type event struct {
	rv        int64
	gvr       schema.GroupVersionResource
	typ       watch.EventType
	obj, prev runtime.Object
}

// NewAPI returns an empty API. scheme must know every type the clientsets
// list (for the List kinds); rng seeds UIDs, generated names, random faults
// and the delivery order.
func NewAPI(scheme *runtime.Scheme, rng *Rand) *API {
	return &API{
		scheme:  scheme,
		rv:      1, // as etcd's first revision: a list at "0" would read as "any"
		seed:    rng.Uint64(),
		deliver: rng.Fork(),
		objects: map[schema.GroupVersionResource]map[types.NamespacedName]runtime.Object{},
		counts:  map[string]int{},
		owed:    map[string]int{},
		types:   map[schema.GroupVersionResource]reflect.Type{},
		stalls:  map[schema.GroupVersionResource]func(runtime.Object) bool{},
		pending: map[int64]int{},

		SettlePolls:     3,
		SettlePoll:      200 * time.Microsecond,
		ListSettlePolls: 3,
	}
}

// Install makes f's clientset a client of a: its reactors answer every
// request from a, ahead of the fake's own ObjectTracker (which stays empty).
// Each installed fake is one client; the order of Install calls is part of
// the delivery order's determinism.
func (a *API) Install(f *clienttesting.Fake) { a.InstallGated(f, nil) }

// OnServed tells hook of every request of f (watches aside) once it was
// answered, with the error answered (a 409 of an injected conflict or a
// failed precondition among them), before f's caller sees the answer. It
// runs with f's lock held: it must not make requests through f.
func (a *API) OnServed(f *clienttesting.Fake, hook func(action clienttesting.Action, err error)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.servedHooks == nil {
		a.servedHooks = map[*clienttesting.Fake]func(clienttesting.Action, error){}
	}
	a.servedHooks[f] = hook
}

// BeforeServe tells hook of every request of f (watches aside) as the API
// server takes it up: once the gate released it (InstallGated), before it is
// served. What hook writes through another client lands just before the
// request: an update or patch of the same object then carries a stale
// resourceVersion. It runs with f's lock held: it must not make requests
// through f.
func (a *API) BeforeServe(f *clienttesting.Fake, hook func(action clienttesting.Action)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.takenHooks == nil {
		a.takenHooks = map[*clienttesting.Fake]func(clienttesting.Action){}
	}
	a.takenHooks[f] = hook
}

// InstallGated installs f as Install does, and holds each of its requests
// (watches aside) at g until the driver releases it (Gate). f should serve the
// goroutines of g alone: a fake holds its lock while its reactors run, and a
// held request lets go of it, so the fake's other users may go on meanwhile,
// but a request of theirs made while a goroutine of g runs is taken for that
// goroutine's.
func (a *API) InstallGated(f *clienttesting.Fake, g *Gate) {
	a.mu.Lock()
	client := a.clients
	a.clients++
	a.mu.Unlock()
	f.PrependReactor("*", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if g != nil {
			// Invokes holds f's lock while the reactors run: held with
			// it, this request would keep every other goroutine of g
			// from reaching the gate.
			f.Unlock()
			g.wait(action)
			f.Lock()
		}
		a.mu.Lock()
		taken := a.takenHooks[f]
		a.mu.Unlock()
		if taken != nil {
			taken(action)
		}
		obj, err := a.serve(action)
		a.mu.Lock()
		hook := a.servedHooks[f]
		a.mu.Unlock()
		if hook != nil {
			hook(action, err)
		}
		return true, obj, err
	})
	f.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := a.openWatch(client, action)
		if err != nil {
			return true, nil, err
		}
		return true, w, nil
	})
}

// ResourceVersion is the cluster's last resourceVersion.
func (a *API) ResourceVersion() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rv
}

// Objects returns copies of gvr's objects in namespace/name order.
func (a *API) Objects(gvr schema.GroupVersionResource) []runtime.Object {
	a.mu.Lock()
	defer a.mu.Unlock()
	var objs []runtime.Object
	for _, k := range a.keys(gvr, "") {
		objs = append(objs, a.objects[gvr][k].DeepCopyObject())
	}
	return objs
}

// keys are gvr's object keys in ns ("" for all) in namespace/name order.
func (a *API) keys(gvr schema.GroupVersionResource, ns string) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(a.objects[gvr]))
	for k := range a.objects[gvr] {
		if ns == "" || k.Namespace == ns {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

func (a *API) serve(action clienttesting.Action) (runtime.Object, error) {
	gvr, ns, sub := action.GetResource(), action.GetNamespace(), action.GetSubresource()
	switch act := action.(type) {
	case clienttesting.GetActionImpl:
		a.mu.Lock()
		defer a.mu.Unlock()
		obj, ok := a.objects[gvr][types.NamespacedName{Namespace: ns, Name: act.Name}]
		if !ok {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), act.Name)
		}
		return obj.DeepCopyObject(), nil
	case clienttesting.ListActionImpl:
		return a.list(gvr, act.Kind, ns, act.ListOptions)
	case clienttesting.CreateActionImpl:
		m, err := meta.Accessor(act.Object)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if sub == "eviction" {
			return a.evict(gvr, ns, m.GetName())
		}
		return a.write("create", gvr, sub, ns, m.GetName(), func() (runtime.Object, error) {
			return a.create(gvr, sub, ns, act.Object)
		})
	case clienttesting.UpdateActionImpl:
		m, err := meta.Accessor(act.Object)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return a.write("update", gvr, sub, ns, m.GetName(), func() (runtime.Object, error) {
			return a.update(gvr, sub, ns, m.GetName(), act.Object.DeepCopyObject())
		})
	case clienttesting.PatchActionImpl:
		return a.write("patch", gvr, sub, ns, act.Name, func() (runtime.Object, error) {
			return a.patch(gvr, sub, ns, act.Name, act.PatchType, act.Patch)
		})
	case clienttesting.DeleteActionImpl:
		return a.write("delete", gvr, sub, ns, act.Name, func() (runtime.Object, error) {
			return a.delete(gvr, ns, act.Name, act.DeleteOptions.Preconditions)
		})
	}
	return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), action.GetVerb())
}

func (a *API) list(gvr schema.GroupVersionResource, kind schema.GroupVersionKind, ns string, opts metav1.ListOptions) (runtime.Object, error) {
	sel, err := newSelector(ns, opts)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Only a queued fault fails a list (an API server or etcd outage), not
	// the random fault rate, which is of writes. Nothing is applied: a lost
	// answer is a timeout.
	switch kind := a.queuedFault("list", gvr, "", ""); kind {
	case NoFault:
	case Conflict:
		return nil, apierrors.NewBadRequest("sim: a list cannot conflict")
	case LostAnswer:
		return nil, errTimeout()
	default:
		return nil, kind.refusal(gvr, "")
	}
	// The list is always the current state: right for "", "0" and
	// NotOlderThan, the only semantics reflectors ask for. Exact needs
	// past states, which the history could rebuild but nothing here uses.
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && opts.ResourceVersion != strconv.FormatInt(a.rv, 10) {
		return nil, apierrors.NewBadRequest("sim: resourceVersionMatch=Exact is only served at the current resourceVersion")
	}
	list, err := a.scheme.New(kind.GroupVersion().WithKind(kind.Kind + "List"))
	if err != nil {
		return nil, err
	}
	// A reflector lists at "0" or at the resourceVersion it last synced,
	// never at "" unless told its own is too old, which a list here never
	// says: a list at a resourceVersion is an informer's. Each item reaches
	// the informer's handlers once it has replaced its store, after the
	// deletions the list implies, and Settle waits for them as for
	// delivered events. A list at "" (a client's own read) is not waited for.
	informers := opts.ResourceVersion != "" && a.isTracked(gvr)
	if informers {
		a.lists++
	}
	var items []runtime.Object
	for _, k := range a.keys(gvr, ns) {
		if obj := a.objects[gvr][k]; sel.matches(obj) {
			items = append(items, obj.DeepCopyObject())
			if informers {
				a.pending[rvOf(obj)]++
			}
		}
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(strconv.FormatInt(a.rv, 10))
	return list, nil
}

// write serves one write, applying any fault due to it.
func (a *API) write(verb string, gvr schema.GroupVersionResource, sub, ns, name string, apply func() (runtime.Object, error)) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kind := a.faultFor(verb, gvr, sub, ns, name)
	if err := kind.refusal(gvr, name); err != nil {
		return nil, err
	}
	obj, err := apply()
	if kind == LostAnswer {
		return nil, errTimeout()
	}
	return obj, err
}

func (a *API) create(gvr schema.GroupVersionResource, sub, ns string, in runtime.Object) (runtime.Object, error) {
	if sub != "" {
		return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "create "+sub)
	}
	obj := in.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	switch {
	case m.GetNamespace() == "":
		m.SetNamespace(ns)
	case m.GetNamespace() != ns:
		return nil, apierrors.NewBadRequest("the namespace of the object does not match the namespace of the request")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(a.generateName(m.GetGenerateName()))
	}
	if m.GetName() == "" {
		return nil, apierrors.NewBadRequest("name or generateName is required")
	}
	if m.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	key := types.NamespacedName{Namespace: ns, Name: m.GetName()}
	if _, ok := a.objects[gvr][key]; ok {
		return nil, apierrors.NewAlreadyExists(gvr.GroupResource(), m.GetName())
	}
	m.SetUID(a.uid(gvr, key))
	m.SetCreationTimestamp(a.now())
	m.SetDeletionTimestamp(nil)
	m.SetGeneration(1)
	a.store(gvr, key, obj, nil)
	return obj.DeepCopyObject(), nil
}

// update writes obj over name. Like kube-apiserver: a set resourceVersion
// other than the current one is a 409; the main resource keeps the stored
// status and the status subresource changes only the status (of types with a
// Status field, which all have the subresource); a write that changes
// nothing is not written (no new resourceVersion, no event); generation
// counts changes outside metadata and status.
func (a *API) update(gvr schema.GroupVersionResource, sub, ns, name string, obj runtime.Object) (runtime.Object, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	old, ok := a.objects[gvr][key]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	m, om := accessor(obj), accessor(old)
	if m.GetName() != name || (m.GetNamespace() != "" && m.GetNamespace() != ns) {
		return nil, apierrors.NewBadRequest("the name or namespace of the object does not match the request")
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	switch sub {
	case "":
		if st := structField(obj, "Status"); st.IsValid() {
			st.Set(structField(old, "Status"))
		}
	case "status":
		if !structField(obj, "Status").IsValid() {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name+"/status")
		}
		next := old.DeepCopyObject()
		structField(next, "Status").Set(structField(obj, "Status"))
		obj, m = next, accessor(next)
	default:
		return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "update "+sub)
	}
	// What a client cannot change by writing the object.
	m.SetNamespace(ns)
	m.SetUID(om.GetUID())
	m.SetCreationTimestamp(om.GetCreationTimestamp())
	m.SetDeletionTimestamp(om.GetDeletionTimestamp())
	m.SetGeneration(om.GetGeneration())
	m.SetResourceVersion(om.GetResourceVersion())
	if apiequality.Semantic.DeepEqual(obj, old) {
		return obj, nil
	}
	if !apiequality.Semantic.DeepEqual(specOf(obj), specOf(old)) {
		m.SetGeneration(om.GetGeneration() + 1)
	}
	if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		return a.remove(gvr, key, obj), nil
	}
	a.store(gvr, key, obj, old)
	return obj.DeepCopyObject(), nil
}

// patch applies a JSON, merge or strategic merge patch the way the API server
// does, then writes the result as an update: a patch that carries a stale
// metadata.resourceVersion gets the update's 409.
func (a *API) patch(gvr schema.GroupVersionResource, sub, ns, name string, pt types.PatchType, data []byte) (runtime.Object, error) {
	old, ok := a.objects[gvr][types.NamespacedName{Namespace: ns, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	js, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			patched, err = p.Apply(js)
		}
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(js, data)
	case types.StrategicMergePatchType:
		// Only built-in types have patch strategies; kube-apiserver refuses
		// strategic merge patches of custom resources.
		if gvks, _, kerr := kubescheme.Scheme.ObjectKinds(old); kerr != nil || len(gvks) == 0 {
			return nil, apierrors.NewGenericServerResponse(415, "patch", gvr.GroupResource(), name, "strategic merge patch is not supported for custom resources", 0, false)
		}
		patched, err = strategicpatch.StrategicMergePatch(js, data, old)
	default:
		return nil, apierrors.NewGenericServerResponse(415, "patch", gvr.GroupResource(), name, fmt.Sprintf("sim: patch type %s is not supported", pt), 0, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj := reflect.New(reflect.TypeOf(old).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return a.update(gvr, sub, ns, name, obj)
}

// delete removes name, or only marks it deleted while it has finalizers.
func (a *API) delete(gvr schema.GroupVersionResource, ns, name string, pre *metav1.Preconditions) (runtime.Object, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	old, ok := a.objects[gvr][key]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	om := accessor(old)
	if pre != nil && ((pre.UID != nil && *pre.UID != om.GetUID()) || (pre.ResourceVersion != nil && *pre.ResourceVersion != om.GetResourceVersion())) {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, errors.New("precondition failed"))
	}
	if len(om.GetFinalizers()) == 0 {
		return a.remove(gvr, key, old), nil
	}
	if om.GetDeletionTimestamp() != nil {
		return old.DeepCopyObject(), nil
	}
	obj := old.DeepCopyObject()
	now := a.now()
	accessor(obj).SetDeletionTimestamp(&now)
	a.store(gvr, key, obj, old)
	return obj.DeepCopyObject(), nil
}

// evict serves pods/eviction: EvictionHook decides, then the pod is deleted.
func (a *API) evict(gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	a.mu.Lock()
	kind := a.faultFor("create", gvr, "eviction", ns, name)
	pod, ok := a.objects[gvr][types.NamespacedName{Namespace: ns, Name: name}]
	a.mu.Unlock()
	if err := kind.refusal(gvr, name); err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	if p, isPod := pod.(*corev1.Pod); isPod && a.EvictionHook != nil {
		if err := a.EvictionHook(p.DeepCopy()); err != nil {
			if _, isStatus := err.(apierrors.APIStatus); isStatus {
				return nil, err
			}
			return nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget: "+err.Error(), 0)
		}
	}
	a.mu.Lock()
	_, err := a.delete(gvr, ns, name, &metav1.Preconditions{UID: ptrTo(accessor(pod).GetUID())})
	a.mu.Unlock()
	if kind == LostAnswer {
		return nil, errTimeout()
	}
	if err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// store writes obj (already a private copy) at a new resourceVersion.
func (a *API) store(gvr schema.GroupVersionResource, key types.NamespacedName, obj, prev runtime.Object) {
	a.rv++
	accessor(obj).SetResourceVersion(strconv.FormatInt(a.rv, 10))
	if a.objects[gvr] == nil {
		a.objects[gvr] = map[types.NamespacedName]runtime.Object{}
	}
	a.objects[gvr][key] = obj
	typ := watch.Modified
	if prev == nil {
		typ = watch.Added
	}
	a.record(event{rv: a.rv, gvr: gvr, typ: typ, obj: obj, prev: prev})
	if a.OnStore != nil {
		a.OnStore(gvr, obj, prev)
	}
}

// remove deletes key; the DELETED event carries the last state at the
// deletion's resourceVersion, as kube-apiserver's does.
func (a *API) remove(gvr schema.GroupVersionResource, key types.NamespacedName, last runtime.Object) runtime.Object {
	a.rv++
	gone := last.DeepCopyObject()
	accessor(gone).SetResourceVersion(strconv.FormatInt(a.rv, 10))
	delete(a.objects[gvr], key)
	a.record(event{rv: a.rv, gvr: gvr, typ: watch.Deleted, obj: gone, prev: last})
	return gone.DeepCopyObject()
}

func (a *API) now() metav1.Time {
	t := Epoch
	if a.Clock != nil {
		t = a.Clock.Now()
	}
	return metav1.NewTime(t.Truncate(time.Second)) // as it reads back from a real server
}

// uid derives the UID from the seed and the object's identity, not from a
// counter, so that creations racing in worker goroutines still get the
// UIDs of their seed.
func (a *API) uid(gvr schema.GroupVersionResource, key types.NamespacedName) types.UID {
	h := a.count("uid/" + gvr.String() + "/" + key.String())
	return types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", h>>32, h>>16&0xffff, h&0xffff, a.seed&0xffff, h>>16))
}

func (a *API) generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // kube-apiserver's
	h := a.count("name/" + prefix)
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = alphabet[h%uint64(len(alphabet))]
		h /= uint64(len(alphabet))
	}
	return prefix + string(suffix)
}

// count counts one more id and returns a hash of the seed, id and count.
func (a *API) count(id string) uint64 {
	a.counts[id]++
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%d", a.seed, id, a.counts[id]))
	return binary.LittleEndian.Uint64(sum[:8])
}

func accessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("sim: %T has no object metadata: %v", obj, err))
	}
	return m
}

// structField is the settable struct field name of *obj, or the zero Value.
func structField(obj runtime.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName(name)
}

// specOf is obj without metadata and status: what generation counts.
func specOf(obj runtime.Object) runtime.Object {
	c := obj.DeepCopyObject()
	for _, name := range []string{"TypeMeta", "ObjectMeta", "Status"} {
		if f := structField(c, name); f.IsValid() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return c
}

func rvOf(obj runtime.Object) int64 {
	rv, _ := strconv.ParseInt(accessor(obj).GetResourceVersion(), 10, 64)
	return rv
}

func ptrTo[T any](v T) *T { return &v }
