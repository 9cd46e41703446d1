package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"reflect"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Watch is one watch a client opened. Its events wait in the API until
// Deliver sends them, one at a time, on an unbuffered channel: when the send
// returns, the watcher has received the event.
type Watch struct {
	gvr     schema.GroupVersionResource
	sel     selector
	key     string // client, resource and selectors: the delivery order's sort key
	seq     int
	api     *API
	pending []watch.Event // objects shared with the history: copied when sent
	// upTo is the resourceVersion up to which the watcher has every event
	// (its bookmark's: CloseWatches); zero while a watch from "" or "0"
	// has initial ADDED events left (initial of them) at openRV.
	upTo, openRV int64
	initial      int
	ch           chan watch.Event
	stopped      chan struct{}
	stop         sync.Once
}

// ResultChan is the channel events arrive on; it is closed by CloseWatches.
func (w *Watch) ResultChan() <-chan watch.Event { return w.ch }

// Stop is the watcher hanging up: its undelivered events are dropped with
// it (its next watch or list brings their state).
func (w *Watch) Stop() {
	w.stop.Do(func() {
		close(w.stopped)
		w.api.mu.Lock()
		w.api.watches = slices.DeleteFunc(w.api.watches, func(o *Watch) bool { return o == w })
		w.api.mu.Unlock()
	})
}

// openWatch serves a watch request from the history: from a resourceVersion,
// the events after it (410 Gone if Compact forgot them); from "" or "0", an
// ADDED event for each current object first.
func (a *API) openWatch(client int, action clienttesting.Action) (*Watch, error) {
	act, ok := action.(clienttesting.WatchActionImpl)
	if !ok {
		return nil, fmt.Errorf("sim: unexpected watch action %T", action)
	}
	opts := act.ListOptions
	if opts.SendInitialEvents != nil {
		// As a server without the WatchList feature refuses it: a
		// reflector that tries WatchList falls back to list and watch.
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")})
	}
	sel, err := newSelector(act.Namespace, opts)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watchSeq++
	w := &Watch{gvr: act.Resource, sel: sel, seq: a.watchSeq, api: a,
		key: fmt.Sprintf("%d %s %q %q %q", client, act.Resource, act.Namespace, opts.LabelSelector, opts.FieldSelector),
		ch:  make(chan watch.Event), stopped: make(chan struct{})}
	switch opts.ResourceVersion {
	case "", "0":
		for _, key := range a.keys(w.gvr, act.Namespace) {
			if obj := a.objects[w.gvr][key]; sel.matches(obj) {
				w.pending = append(w.pending, watch.Event{Type: watch.Added, Object: obj})
			}
		}
		w.openRV, w.initial = a.rv, len(w.pending)
		if w.initial == 0 {
			w.upTo = a.rv
		}
	default:
		from, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", opts.ResourceVersion))
		}
		if from < a.compacted {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, a.compacted))
		}
		w.upTo = from
		for _, e := range a.history {
			if e.rv > from {
				w.offer(e)
			}
		}
	}
	a.watches = append(a.watches, w)
	if a.owed[w.key] > 0 {
		a.owed[w.key]--
	}
	return w, nil
}

// record appends e to the history and queues it on the watches it concerns.
func (a *API) record(e event) {
	if _, ok := a.types[e.gvr]; !ok {
		a.types[e.gvr] = reflect.TypeOf(e.obj).Elem()
	}
	a.history = append(a.history, e)
	for _, w := range a.watches {
		w.offer(e)
	}
}

// offer queues e as w sees it: a watch with a selector sees an object that
// stops matching as DELETED and one that starts matching as ADDED.
func (w *Watch) offer(e event) {
	if e.gvr != w.gvr {
		return
	}
	now := e.typ != watch.Deleted && w.sel.matches(e.obj)
	before := e.prev != nil && w.sel.matches(e.prev)
	switch {
	case now && before:
		w.pending = append(w.pending, watch.Event{Type: watch.Modified, Object: e.obj})
	case now:
		w.pending = append(w.pending, watch.Event{Type: watch.Added, Object: e.obj})
	case before && e.typ == watch.Deleted:
		w.pending = append(w.pending, watch.Event{Type: watch.Deleted, Object: e.obj})
	case before:
		gone := e.prev.DeepCopyObject()
		accessor(gone).SetResourceVersion(strconv.FormatInt(e.rv, 10))
		w.pending = append(w.pending, watch.Event{Type: watch.Deleted, Object: gone})
	}
}

// Deliver delivers up to max pending events and returns how many it did.
// Each goes to a watch drawn at random among those whose next event is not
// stalled, so events of one watch arrive in order and only events of
// different watches are reordered. It returns once each delivered event was
// received by its watcher.
func (a *API) Deliver(max int) int {
	a.deliverMu.Lock()
	defer a.deliverMu.Unlock()
	n := 0
	for n < max {
		a.mu.Lock()
		var ready []*Watch
		for _, w := range a.watches {
			if len(w.pending) > 0 && !a.stalled(w.gvr, w.pending[0].Object) {
				ready = append(ready, w)
			}
		}
		if len(ready) == 0 {
			a.mu.Unlock()
			break
		}
		// Sorted by what the watch is, not when it was opened: informers
		// open their watches in goroutine order.
		slices.SortFunc(ready, func(x, y *Watch) int {
			return cmp.Or(strings.Compare(x.key, y.key), x.seq-y.seq)
		})
		w := Pick(a.deliver, ready)
		ev := w.pending[0]
		w.pending = w.pending[1:]
		rv := rvOf(ev.Object)
		tracked := a.isTracked(w.gvr)
		if tracked {
			a.pending[rv]++
		}
		a.delivered++
		a.mu.Unlock()
		select {
		case w.ch <- watch.Event{Type: ev.Type, Object: ev.Object.DeepCopyObject()}:
			n++
			w.delivered(rv)
			if a.Trace != nil {
				a.Trace.Add("deliver %s %s %s rv=%d", w.key, ev.Type, keyOf(ev.Object), rv)
			}
		case <-w.stopped:
			if tracked {
				a.mu.Lock()
				a.seenRV(rv)
				a.mu.Unlock()
			}
		}
	}
	return n
}

// delivered notes that the watcher received the event of rv; deliverMu is
// held.
func (w *Watch) delivered(rv int64) {
	if w.initial == 0 {
		w.upTo = max(w.upTo, rv)
		return
	}
	if w.initial--; w.initial == 0 {
		w.upTo = w.openRV
	}
}

// DeliverAll delivers every deliverable event, in Deliver's order.
func (a *API) DeliverAll() int { return a.Deliver(math.MaxInt) }

// Pending is the number of events waiting on open watches, stalled or not.
func (a *API) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, w := range a.watches {
		n += len(w.pending)
	}
	return n
}

// Deliverable is the number of events Deliver could deliver now: those
// waiting on open watches whose next event is not stalled, counted up to
// the first stalled one of each watch.
func (a *API) Deliverable() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, w := range a.watches {
		for _, ev := range w.pending {
			if a.stalled(w.gvr, ev.Object) {
				break
			}
			n++
		}
	}
	return n
}

// Stall holds gvr's events for which match is true (all if match is nil) and
// every later event of the same watch, as a stuck watch connection does;
// writes still succeed. match must not modify the object.
func (a *API) Stall(gvr schema.GroupVersionResource, match func(runtime.Object) bool) {
	if match == nil {
		match = func(runtime.Object) bool { return true }
	}
	a.mu.Lock()
	a.stalls[gvr] = match
	a.mu.Unlock()
}

// Unstall lets gvr's held events be delivered again.
func (a *API) Unstall(gvr schema.GroupVersionResource) {
	a.mu.Lock()
	delete(a.stalls, gvr)
	a.mu.Unlock()
}

func (a *API) stalled(gvr schema.GroupVersionResource, obj runtime.Object) bool {
	match, ok := a.stalls[gvr]
	return ok && match(obj)
}

// CloseWatches ends gvr's open watches, as a server or connection drop does.
// Their undelivered events are not lost: a reflector re-watches from the last
// resourceVersion it received and the history replays them (or, if Compact
// forgot them, gets 410 and relists). Settle waits for those re-watches.
//
// Each watch gets a BOOKMARK of what it delivered before it closes, as
// kube-apiserver sends its watchers when it shuts down. Without one, a watch
// that delivered nothing (stalled, or opened just before) would leave the
// choice to the reflector's clock of real time: closed less than a second
// after it opened with no event, a reflector takes it for a broken watch
// and lists again after a back-off, which reads past a stall; otherwise it
// re-watches from its resourceVersion. How much real time a simulated second
// takes is no part of a seed (seed 5177122390577962639 failed in about one
// run of seven under -race).
func (a *API) CloseWatches(gvr schema.GroupVersionResource) {
	a.deliverMu.Lock()
	defer a.deliverMu.Unlock()
	a.mu.Lock()
	var closed []*Watch
	a.watches = slices.DeleteFunc(a.watches, func(w *Watch) bool {
		if w.gvr != gvr {
			return false
		}
		a.owed[w.key]++
		closed = append(closed, w)
		return true
	})
	typ := a.types[gvr]
	a.mu.Unlock()
	for _, w := range closed {
		if w.upTo > 0 && typ != nil {
			bookmark := reflect.New(typ).Interface().(runtime.Object)
			accessor(bookmark).SetResourceVersion(strconv.FormatInt(w.upTo, 10))
			select {
			case w.ch <- watch.Event{Type: watch.Bookmark, Object: bookmark}:
			case <-w.stopped:
			}
		}
		close(w.ch)
	}
}

// Compact forgets the history up to rv: a watch from an older resourceVersion
// gets 410 Gone ("too old resource version"). Compact(a.ResourceVersion())
// forgets it all.
func (a *API) Compact(rv int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.compacted = max(a.compacted, rv)
	a.history = slices.DeleteFunc(a.history, func(e event) bool { return e.rv <= a.compacted })
}

type trackedInformer struct {
	gvr   schema.GroupVersionResource
	inf   Informer
	count *atomic.Int64 // notifications its Track handler received
}

// Informer is what Track needs of an informer: a cache.SharedInformer, or
// an informer of another kind (a controller's own Lease informer) that
// calls its handlers in the order they were added.
type Informer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	IsStopped() bool
}

// Track tells Settle to wait for inf, an informer of gvr, to have processed
// what was delivered to it. Track every informer of a tracked resource, and
// before its first event is delivered: Settle counts each delivered event of
// a tracked resource until a tracked informer's handler sees its
// resourceVersion.
func (a *API) Track(gvr schema.GroupVersionResource, inf Informer) error {
	seen := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(runtime.Object); ok {
			a.mu.Lock()
			a.seenRV(rvOf(o))
			a.mu.Unlock()
		}
	}
	count := &atomic.Int64{}
	a.mu.Lock()
	a.tracked = append(a.tracked, trackedInformer{gvr: gvr, inf: inf, count: count})
	a.mu.Unlock()
	// Counted before the delivery is marked seen: once Settle finds
	// nothing waiting, Seen already includes the notification, so a driver
	// comparing its own handlers' count with it waits for them. The other
	// order left a window in which Settle saw nothing pending and the old
	// count, and took handlers that had not run yet for idle ones.
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { count.Add(1); seen(obj) },
		UpdateFunc: func(_, obj any) { count.Add(1); seen(obj) },
		DeleteFunc: func(obj any) { count.Add(1); seen(obj) },
	})
	return err
}

// Seen is how many notifications (adds, updates, deletes) the handler Track
// added to inf has received. Every handler of a shared informer receives the
// same notifications in the same order, so a driver whose own handlers count
// theirs can tell when they have all run: a shared informer runs each handler
// on a goroutine of its own, and Settle only waits for Track's.
func (a *API) Seen(inf Informer) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tracked {
		if t.inf == inf {
			return t.count.Load()
		}
	}
	return 0
}

func (a *API) isTracked(gvr schema.GroupVersionResource) bool {
	return slices.ContainsFunc(a.tracked, func(t trackedInformer) bool { return t.gvr == gvr })
}

// seenRV counts a delivery of rv as processed; a.mu is held. A relist can
// show a tracked informer an rv that another informer's watch was sent: then
// that informer's delivery is counted early.
func (a *API) seenRV(rv int64) {
	if a.pending[rv] > 0 {
		if a.pending[rv]--; a.pending[rv] == 0 {
			delete(a.pending, rv)
		}
	}
}

// Settle waits until the simulation is quiet: every delivered event of a
// tracked resource was seen by a tracked informer, every tracked informer has
// a watch open, every watch CloseWatches ended was re-opened, and idle (the
// driver's check that its queues are empty and its workers wait) held for
// SettlePolls consecutive polls, SettlePoll apart, in which nothing was
// delivered or written. It delivers nothing itself. See the package doc for
// what this does not guarantee. It returns ctx's error, with what it was
// waiting for.
func (a *API) Settle(ctx context.Context, idle func() bool) error {
	streak, last, spins := 0, a.progress(), 0
	for {
		waiting := a.waitingFor()
		now := a.progress()
		if waiting == "" && now == last && idle() {
			streak++
			if need, lists := a.quietPolls(); streak >= need {
				a.mu.Lock()
				a.settled = lists
				a.mu.Unlock()
				return nil
			}
		} else {
			streak = 0
		}
		last = now
		if ctx.Err() != nil {
			if waiting == "" {
				waiting = "the driver's idle check"
			}
			return fmt.Errorf("sim: settle: %w, waiting for %s", ctx.Err(), waiting)
		}
		// Informers catch up within microseconds: yield to them rather
		// than sleep a timer's millisecond. The idle polls do sleep, to
		// leave the handlers Settle cannot see time to run.
		if waiting != "" && spins < 10000 {
			spins++
			goruntime.Gosched()
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(a.SettlePoll):
		}
	}
}

// quietPolls is how many consecutive quiet polls Settle needs now, and the
// lists served so far: those are settled if Settle returns on this poll (a
// list served after it is the next Settle's).
func (a *API) quietPolls() (int, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lists != a.settled {
		return max(a.SettlePolls, a.ListSettlePolls), a.lists
	}
	return a.SettlePolls, a.lists
}

// progress changes with every delivery and every write.
func (a *API) progress() [2]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return [2]int64{int64(a.delivered), a.rv}
}

// waitingFor says what the API still waits for, "" if nothing.
func (a *API) waitingFor() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	live := map[schema.GroupVersionResource]int{}
	a.tracked = slices.DeleteFunc(a.tracked, func(t trackedInformer) bool {
		if t.inf.IsStopped() {
			// What it was sent and had not processed never will be:
			// forget all counts rather than wait forever.
			clear(a.pending)
			return true
		}
		live[t.gvr]++
		return false
	})
	if len(a.pending) > 0 {
		return fmt.Sprintf("informers to process %d delivered events", len(a.pending))
	}
	for _, w := range a.watches {
		live[w.gvr]--
	}
	for gvr, n := range live {
		if n > 0 {
			return fmt.Sprintf("%d informers of %s to open their watch", n, gvr)
		}
	}
	for key, n := range a.owed {
		if n > 0 {
			return fmt.Sprintf("%d re-watches of %s", n, key)
		}
	}
	return ""
}

// selector is what a list or watch request selects.
type selector struct {
	ns     string
	labels labels.Selector
	fields fields.Selector
}

func newSelector(ns string, opts metav1.ListOptions) (selector, error) {
	s := selector{ns: ns, labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if s.labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.FieldSelector != "" {
		if s.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	return s, nil
}

// matches evaluates field selectors on the object's JSON paths
// (metadata.name, spec.nodeName, status.phase...): kube-apiserver supports a
// few such fields per type, and these are the ones clients use.
func (s selector) matches(obj runtime.Object) bool {
	m := accessor(obj)
	if s.ns != "" && m.GetNamespace() != s.ns {
		return false
	}
	if !s.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if s.fields.Empty() {
		return true
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	set := fields.Set{}
	for _, r := range s.fields.Requirements() {
		v, _, _ := unstructured.NestedFieldNoCopy(u, strings.Split(r.Field, ".")...)
		if v != nil {
			set[r.Field] = fmt.Sprint(v)
		}
	}
	return s.fields.Matches(set)
}

func keyOf(obj runtime.Object) types.NamespacedName {
	m := accessor(obj)
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
}
