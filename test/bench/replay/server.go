package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// server speaks the part of the Kubernetes API the controller uses: LIST and WATCH
// (including watch-list streams, which client-go's reflectors use by default) of Nodes
// and of the Leases of one namespace; GET, POST and PUT of Leases (leader election,
// the canary); GET and PATCH of Nodes and their status; POST and PATCH of Events
// (answered, not stored). It keeps every object in memory with a global
// resourceVersion, and a bounded history so a re-watch from a recent version resumes.
// Everything else is answered 404 and counted, so a run shows if the controller asked
// for something the replay does not serve.
type server struct {
	leaseNamespace string

	mu      sync.Mutex
	rv      int64
	nodes   map[string]*corev1.Node
	leases  map[string]*coordinationv1.Lease // by namespace/name
	history []event                          // recent events of both kinds, oldest first
	watches map[*watcher]struct{}

	eventsSent  atomic.Int64 // watch events written to clients (not bookmarks)
	nodeWrites  atomic.Int64 // PATCHes of Nodes (any subresource)
	leaseWrites atomic.Int64 // POST/PUT of Leases by the controller
	unknown     atomic.Int64
	unknownMu   sync.Mutex
	unknownSeen map[string]bool
	dropped     atomic.Int64 // watches closed because the client fell behind

	// silenced Leases are no longer renewed (an extension that crashed);
	// lastRenew is the renewTime each kept, and tainted when each Node
	// first received the readiness taint after silence began (under mu).
	silenced  map[string]bool
	lastRenew map[string]time.Time
	tainted   map[string]time.Time
}

type event struct {
	kind string // "nodes" or "leases"
	typ  watch.EventType
	obj  runtime.Object
	ns   string
	rv   int64
}

type watcher struct {
	kind, ns string
	ch       chan event
	closed   bool
}

// historyLimit bounds the events kept for re-watches: a little more than a minute of
// renewals at 5,000 events/s.
const historyLimit = 400_000

// watcherBuffer is how many events a watch may fall behind before it is closed, like
// kube-apiserver's cacher closes a watch whose client does not keep up.
const watcherBuffer = 100_000

func newServer(leaseNamespace string) *server {
	return &server{leaseNamespace: leaseNamespace, nodes: map[string]*corev1.Node{},
		leases: map[string]*coordinationv1.Lease{}, watches: map[*watcher]struct{}{}, unknownSeen: map[string]bool{},
		silenced: map[string]bool{}, lastRenew: map[string]time.Time{}, tainted: map[string]time.Time{}}
}

// put stores obj with the next resourceVersion and sends the event to the watches.
// Callers hold s.mu.
func (s *server) put(kind string, typ watch.EventType, obj runtime.Object) {
	s.rv++
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	ns := m.GetNamespace()
	switch o := obj.(type) {
	case *corev1.Node:
		s.nodes[o.Name] = o
	case *coordinationv1.Lease:
		s.leases[o.Namespace+"/"+o.Name] = o
	}
	e := event{kind: kind, typ: typ, obj: obj, ns: ns, rv: s.rv}
	s.history = append(s.history, e)
	if len(s.history) > historyLimit {
		s.history = append(s.history[:0:0], s.history[len(s.history)-historyLimit/2:]...)
	}
	for w := range s.watches {
		if w.kind != kind || (w.ns != "" && w.ns != ns) || w.closed {
			continue
		}
		select {
		case w.ch <- e:
		default:
			w.closed = true
			close(w.ch)
			s.dropped.Add(1)
			logf("replay server: closed a %s watch: the client fell %d events behind", w.kind, watcherBuffer)
		}
	}
}

// renew renews the Lease of ns/name as its holder would: a new renewTime and a
// managedFields timestamp, nothing else.
func (s *server) renew(key string, now metav1.MicroTime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.leases[key]
	if old == nil || s.silenced[key] {
		return
	}
	l := old.DeepCopy()
	l.Spec.RenewTime = &now
	if len(l.ManagedFields) > 0 {
		t := metav1.NewTime(now.Time)
		l.ManagedFields[0].Time = &t
	}
	s.put("leases", watch.Modified, l)
}

var (
	protobufInfo, _ = runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	jsonInfo, _     = runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
)

func groupVersion(kind string) schema.GroupVersion {
	if kind == "leases" {
		return coordinationv1.SchemeGroupVersion
	}
	return corev1.SchemeGroupVersion
}

// route is a parsed request path.
type route struct {
	kind, ns, name, sub string
}

func parsePath(p string) (route, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api" && parts[1] == "v1":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis" && parts[1] == "coordination.k8s.io" && parts[2] == "v1":
		parts = parts[3:]
	default:
		return route{}, false
	}
	var r route
	if len(parts) >= 2 && parts[0] == "namespaces" {
		r.ns = parts[1]
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return route{}, false
	}
	r.kind = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.sub = parts[2]
	}
	return r, true
}

func (s *server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r, ok := parsePath(req.URL.Path)
	if !ok {
		s.notServed(w, req)
		return
	}
	q := req.URL.Query()
	switch {
	case (r.kind == "nodes" || r.kind == "leases") && r.name == "" && req.Method == http.MethodGet && q.Get("watch") == "true":
		s.serveWatch(w, req, r)
	case (r.kind == "nodes" || r.kind == "leases") && r.name == "" && req.Method == http.MethodGet:
		s.serveList(w, req, r)
	case r.kind == "nodes" && r.name != "" && req.Method == http.MethodGet:
		s.mu.Lock()
		n := s.nodes[r.name]
		s.mu.Unlock()
		if n == nil {
			s.writeStatus(w, req, apierrors.NewNotFound(corev1.Resource("nodes"), r.name))
			return
		}
		s.writeObject(w, req, http.StatusOK, "nodes", n)
	case r.kind == "nodes" && r.name != "" && req.Method == http.MethodPatch:
		s.patchNode(w, req, r)
	case r.kind == "leases" && req.Method == http.MethodGet && r.name != "":
		s.mu.Lock()
		l := s.leases[r.ns+"/"+r.name]
		s.mu.Unlock()
		if l == nil {
			s.writeStatus(w, req, apierrors.NewNotFound(coordinationv1.Resource("leases"), r.name))
			return
		}
		s.writeObject(w, req, http.StatusOK, "leases", l)
	case r.kind == "leases" && (req.Method == http.MethodPost || req.Method == http.MethodPut):
		s.writeLease(w, req, r)
	case r.kind == "events" && req.Method == http.MethodPost:
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", req.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	case r.kind == "events" && req.Method == http.MethodPatch:
		s.writeObject(w, req, http.StatusOK, "events", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns}})
	default:
		s.notServed(w, req)
	}
}

func (s *server) notServed(w http.ResponseWriter, req *http.Request) {
	s.unknown.Add(1)
	key := req.Method + " " + req.URL.Path
	s.unknownMu.Lock()
	if !s.unknownSeen[key] {
		s.unknownSeen[key] = true
		logf("replay server: not served: %s", key)
	}
	s.unknownMu.Unlock()
	http.NotFound(w, req)
}

// negotiate picks protobuf when the client accepts it (the controller does), JSON
// otherwise.
func negotiate(req *http.Request) runtime.SerializerInfo {
	if strings.Contains(req.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
		return protobufInfo
	}
	return jsonInfo
}

func (s *server) writeObject(w http.ResponseWriter, req *http.Request, code int, kind string, obj runtime.Object) {
	info := negotiate(req)
	gv := groupVersion(kind)
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, &buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (s *server) writeStatus(w http.ResponseWriter, req *http.Request, err *apierrors.StatusError) {
	st := err.Status()
	b, _ := json.Marshal(&st)
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}

func (s *server) serveList(w http.ResponseWriter, req *http.Request, r route) {
	s.mu.Lock()
	rv := strconv.FormatInt(s.rv, 10)
	var obj runtime.Object
	if r.kind == "nodes" {
		l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		for _, n := range s.nodes {
			l.Items = append(l.Items, *n)
		}
		obj = l
	} else {
		l := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		for _, x := range s.leases {
			if r.ns == "" || x.Namespace == r.ns {
				l.Items = append(l.Items, *x)
			}
		}
		obj = l
	}
	s.mu.Unlock()
	s.writeObject(w, req, http.StatusOK, r.kind, obj)
}

// serveWatch streams events as kube-apiserver does: length-delimited protobuf frames
// of metav1.WatchEvent (JSON lines for a JSON client), flushed whenever the queue is
// empty. A watch-list request (sendInitialEvents=true) first gets every object as
// ADDED, then the bookmark that ends the initial events.
func (s *server) serveWatch(w http.ResponseWriter, req *http.Request, r route) {
	q := req.URL.Query()
	info := negotiate(req)
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return
	}
	var from int64
	if v := q.Get("resourceVersion"); v != "" {
		from, _ = strconv.ParseInt(v, 10, 64)
	}
	initial := q.Get("sendInitialEvents") == "true"
	wt := &watcher{kind: r.kind, ns: r.ns, ch: make(chan event, watcherBuffer)}

	s.mu.Lock()
	var backlog []event
	startRV := s.rv
	switch {
	case initial:
		if r.kind == "nodes" {
			for _, n := range s.nodes {
				backlog = append(backlog, event{kind: "nodes", typ: watch.Added, obj: n})
			}
		} else {
			for _, l := range s.leases {
				if r.ns == "" || l.Namespace == r.ns {
					backlog = append(backlog, event{kind: "leases", typ: watch.Added, obj: l})
				}
			}
		}
	case from > 0 && from < s.rv:
		if len(s.history) == 0 || s.history[0].rv > from+1 {
			s.mu.Unlock()
			s.writeStatus(w, req, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", from)))
			return
		}
		for _, e := range s.history {
			if e.rv > from && e.kind == r.kind && (r.ns == "" || e.ns == r.ns) {
				backlog = append(backlog, e)
			}
		}
	}
	s.watches[wt] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, wt)
		s.mu.Unlock()
	}()

	mediaType := info.MediaType
	if info.StreamSerializer == nil {
		http.Error(w, "no stream serializer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mediaType+";stream=watch")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	framer := info.StreamSerializer.Framer.NewFrameWriter(w)
	embedded := scheme.Codecs.EncoderForVersion(info.Serializer, groupVersion(r.kind))
	enc := restclientwatch.NewEncoder(streaming.NewEncoder(framer, info.StreamSerializer.Serializer), embedded)
	send := func(e event) error {
		if err := enc.Encode(&watch.Event{Type: e.typ, Object: e.obj}); err != nil {
			return err
		}
		s.eventsSent.Add(1)
		return nil
	}
	for _, e := range backlog {
		if err := send(e); err != nil {
			return
		}
	}
	if initial {
		var bm runtime.Object
		am := metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(startRV, 10),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}
		if r.kind == "nodes" {
			bm = &corev1.Node{ObjectMeta: am}
		} else {
			bm = &coordinationv1.Lease{ObjectMeta: am}
		}
		if err := enc.Encode(&watch.Event{Type: watch.Bookmark, Object: bm}); err != nil {
			return
		}
	}
	flusher.Flush()
	timeout := q.Get("timeoutSeconds")
	var done <-chan struct{} = req.Context().Done()
	expire := make(chan struct{})
	if secs, err := strconv.Atoi(timeout); err == nil && secs > 0 {
		t := time.AfterFunc(time.Duration(secs)*time.Second, func() { close(expire) })
		defer t.Stop()
	}
	for {
		select {
		case <-done:
			return
		case <-expire:
			return
		case e, ok := <-wt.ch:
			if !ok {
				return
			}
			if e.rv <= startRV && initial {
				continue
			}
			if err := send(e); err != nil {
				return
			}
			if len(wt.ch) == 0 {
				flusher.Flush()
			}
		}
	}
}

func (s *server) decodeBody(req *http.Request, into runtime.Object) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, into)
	return err
}

func (s *server) writeLease(w http.ResponseWriter, req *http.Request, r route) {
	var l coordinationv1.Lease
	if err := s.decodeBody(req, &l); err != nil {
		s.writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	l.Namespace = r.ns
	s.leaseWrites.Add(1)
	s.mu.Lock()
	old := s.leases[r.ns+"/"+l.Name]
	switch {
	case req.Method == http.MethodPost && old != nil:
		s.mu.Unlock()
		s.writeStatus(w, req, apierrors.NewAlreadyExists(coordinationv1.Resource("leases"), l.Name))
		return
	case req.Method == http.MethodPut && old == nil:
		s.mu.Unlock()
		s.writeStatus(w, req, apierrors.NewNotFound(coordinationv1.Resource("leases"), l.Name))
		return
	case req.Method == http.MethodPut && l.ResourceVersion != "" && l.ResourceVersion != old.ResourceVersion:
		s.mu.Unlock()
		s.writeStatus(w, req, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, fmt.Errorf("the object has been modified")))
		return
	}
	typ := watch.Modified
	if old == nil {
		typ = watch.Added
		l.UID = uuid.NewUUID()
		l.CreationTimestamp = metav1.Now()
	} else {
		l.UID, l.CreationTimestamp = old.UID, old.CreationTimestamp
	}
	s.put("leases", typ, &l)
	s.mu.Unlock()
	code := http.StatusOK
	if typ == watch.Added {
		code = http.StatusCreated
	}
	s.writeObject(w, req, code, "leases", &l)
}

// patchNode applies a JSON merge patch (the controller's taint and annotation writes,
// which carry metadata.resourceVersion: a stale one is a 409 as on a real server) or
// a strategic merge patch (its status writes).
func (s *server) patchNode(w http.ResponseWriter, req *http.Request, r route) {
	patch, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	s.nodeWrites.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.nodes[r.name]
	if old == nil {
		s.writeStatus(w, req, apierrors.NewNotFound(corev1.Resource("nodes"), r.name))
		return
	}
	var pm struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(patch, &pm)
	if pm.Metadata.ResourceVersion != "" && pm.Metadata.ResourceVersion != old.ResourceVersion {
		s.writeStatus(w, req, apierrors.NewConflict(corev1.Resource("nodes"), r.name, fmt.Errorf("the object has been modified")))
		return
	}
	orig, err := json.Marshal(old)
	if err != nil {
		return
	}
	var patched []byte
	switch types.PatchType(strings.Split(req.Header.Get("Content-Type"), ";")[0]) {
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(orig, patch)
	case types.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(orig, patch, corev1.Node{})
	default:
		err = fmt.Errorf("unsupported patch type %q", req.Header.Get("Content-Type"))
	}
	if err != nil {
		s.writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	var n corev1.Node
	if err := json.Unmarshal(patched, &n); err != nil {
		s.writeStatus(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if len(s.silenced) > 0 && hasReadinessTaint(&n) && !hasReadinessTaint(old) {
		if _, seen := s.tainted[n.Name]; !seen {
			s.tainted[n.Name] = time.Now()
		}
	}
	s.put("nodes", watch.Modified, &n)
	s.writeObject(w, req, http.StatusOK, "nodes", &n)
}

// silence stops renewing the Leases of keys and returns the renewTime each
// last had.
func (s *server) silence(keys []string) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(keys))
	for _, k := range keys {
		s.silenced[k] = true
		if l := s.leases[k]; l != nil && l.Spec.RenewTime != nil {
			out[k] = l.Spec.RenewTime.Time
		}
	}
	return out
}

// taintedAt is when node received the readiness taint after silence began;
// zero when it has not.
func (s *server) taintedAt(node string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tainted[node]
}

func hasReadinessTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == nodev1alpha1.DefaultReadinessTaintKey {
			return true
		}
	}
	return false
}
