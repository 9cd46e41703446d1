package delegated

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

// The API server of the test: token "reader" is alice, allowed get on
// /metrics; "other" is bob, allowed nothing; any other token is unknown.
func fakeAPIServer() (*fake.Clientset, *int) {
	client := fake.NewClientset()
	reviews := 0
	client.PrependReactor("create", "tokenreviews", func(a core.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(core.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "reader":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"readers"}}}
		case "other":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "bob"}}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a core.Action) (bool, runtime.Object, error) {
		reviews++
		sar := a.(core.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		attrs := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && sar.Spec.Groups[0] == "readers" && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get"
		return true, sar, nil
	})
	return client, &reviews
}

func TestMetricsRequestsNeedATokenTheAPIServerAuthenticatesAndAuthorizes(t *testing.T) {
	client, reviews := fakeAPIServer()
	a := New(client)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	get := func(path, auth string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		name, path, auth string
		want             int
	}{
		{"anonymous", "/metrics", "", http.StatusUnauthorized},
		{"not a bearer token", "/metrics", "Basic YWxpY2U6eA==", http.StatusUnauthorized},
		{"unknown token", "/metrics", "Bearer forged", http.StatusUnauthorized},
		{"authenticated, not allowed", "/metrics", "Bearer other", http.StatusForbidden},
		{"allowed", "/metrics", "Bearer reader", http.StatusOK},
		{"allowed /metrics only", "/debug/pprof/", "Bearer reader", http.StatusForbidden},
	} {
		if got := get(tc.path, tc.auth); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// Decisions are reused for CacheTTL, then asked again.
	before := *reviews
	if get("/metrics", "Bearer reader") != http.StatusOK || get("/metrics", "Bearer other") != http.StatusForbidden {
		t.Fatal("cached decisions changed")
	}
	if *reviews != before {
		t.Errorf("%d reviews for cached decisions", *reviews-before)
	}
	now = now.Add(CacheTTL + time.Second)
	get("/metrics", "Bearer reader")
	if *reviews != before+2 {
		t.Errorf("%d reviews after the cache expired, want 2", *reviews-before)
	}
}

func TestWithoutFilesTheCertificateIsSelfSigned(t *testing.T) {
	c, err := TLSConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Certificates) != 1 || c.MinVersion != 0x0303 {
		t.Errorf("TLS config %+v", c)
	}
}
