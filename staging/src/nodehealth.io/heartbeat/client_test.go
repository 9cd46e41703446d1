package heartbeat

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// apiServer answers the lean client's requests like kube-apiserver: protobuf
// bodies, metav1.Status errors, metadata-only objects on request.
type apiServer struct {
	t *testing.T

	mu       sync.Mutex
	requests []string // "METHOD path content-type"
}

func (s *apiServer) encode(w http.ResponseWriter, status int, mediaType string, obj runtime.Object) {
	info, ok := runtime.SerializerInfoForMediaType(leanCodecs.SupportedMediaTypes(), mediaType)
	if !ok {
		s.t.Fatalf("no serializer for %s", mediaType)
	}
	var gv runtime.GroupVersioner = schema.GroupVersions{coordinationv1.SchemeGroupVersion, authenticationv1.SchemeGroupVersion, metav1.SchemeGroupVersion, {Version: "v1"}}
	data, err := runtime.Encode(leanCodecs.EncoderForVersion(info.Serializer, gv), obj)
	if err != nil {
		s.t.Fatal(err)
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
	s.mu.Unlock()
	if len(body) > 0 && r.Header.Get("Content-Type") != runtime.ContentTypeProtobuf {
		s.t.Errorf("%s %s sent %q, want protobuf", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	if !strings.HasPrefix(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
		s.t.Errorf("%s %s accepts %q, want protobuf first", r.Method, r.URL.Path, r.Header.Get("Accept"))
	}
	const leases = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l", ResourceVersion: "7"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("p")}}
	gr := coordinationv1.Resource("leases")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == leases+"/missing":
		s.encode(w, http.StatusNotFound, runtime.ContentTypeJSON, &apierrors.NewNotFound(gr, "missing").ErrStatus)
	case r.Method == http.MethodGet && r.URL.Path == leases+"/l":
		s.encode(w, http.StatusOK, runtime.ContentTypeProtobuf, lease)
	case r.Method == http.MethodPost && r.URL.Path == leases:
		s.encode(w, http.StatusCreated, runtime.ContentTypeProtobuf, lease)
	case r.Method == http.MethodPut && r.URL.Path == leases+"/l":
		s.encode(w, http.StatusConflict, runtime.ContentTypeProtobuf, &apierrors.NewConflict(gr, "l", nil).ErrStatus)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
		s.encode(w, http.StatusCreated, runtime.ContentTypeProtobuf, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:sa", Extra: podBound("n1", "uid-1")}}})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/n1":
		if !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata;g=meta.k8s.io;v=v1") {
			s.t.Errorf("the Node is read with Accept %q, want its metadata only", r.Header.Get("Accept"))
		}
		s.encode(w, http.StatusOK, runtime.ContentTypeJSON, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-from-node"}})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/n2":
		s.encode(w, http.StatusForbidden, runtime.ContentTypeJSON, &apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n2", nil).ErrStatus)
	default:
		s.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}
}

func TestLeanClientSpeaksProtobufAndKeepsAPIErrors(t *testing.T) {
	srv := &apiServer{t: t}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := NewClient(&rest.Config{Host: ts.URL, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if _, err := c.GetLease(ctx, "ns", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("GetLease of a missing Lease: %v, want NotFound", err)
	}
	l, err := c.GetLease(ctx, "ns", "l")
	if err != nil || l.ResourceVersion != "7" || ptr.Deref(l.Spec.HolderIdentity, "") != "p" {
		t.Errorf("GetLease: %+v, %v", l, err)
	}
	if l, err := c.CreateLease(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l"}}); err != nil || l.Name != "l" {
		t.Errorf("CreateLease: %+v, %v", l, err)
	}
	if _, err := c.UpdateLease(ctx, l); !apierrors.IsConflict(err) {
		t.Errorf("UpdateLease: %v, want Conflict", err)
	}
	user, err := c.ReviewSelf(ctx)
	if err != nil || user.Extra[extraNodeUID][0] != "uid-1" {
		t.Errorf("ReviewSelf: %+v, %v", user, err)
	}
	if uid, err := c.NodeUID(ctx, "n1"); err != nil || uid != "uid-from-node" {
		t.Errorf("NodeUID: %q, %v", uid, err)
	}
	if _, err := c.NodeUID(ctx, "n2"); !apierrors.IsForbidden(err) {
		t.Errorf("NodeUID of a forbidden Node: %v, want Forbidden", err)
	}
	if n := len(srv.requests); n != 7 {
		t.Errorf("%d requests, want 7: %v", n, srv.requests)
	}
}

func TestNewClientRefusesBadConfig(t *testing.T) {
	if _, err := NewClient(nil); err == nil {
		t.Error("nil config accepted")
	}
	if _, err := NewClient(&rest.Config{Host: "https://127.0.0.1:6443", QPS: 5}); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("QPS without burst: %v", err)
	}
}
