package heartbeat_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"nodehealth.io/heartbeat"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// contentTypes records the Content-Type of every successful response (the
// API server may answer errors in JSON).
type contentTypes struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	seen map[string]string // "GET /path" -> content type
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err == nil && resp.StatusCode < 300 {
		c.mu.Lock()
		c.seen[req.Method+" "+req.URL.Path] = resp.Header.Get("Content-Type")
		c.mu.Unlock()
	}
	return resp, err
}

// The lean client against the real API server: every call the renewer makes,
// in protobuf, with the API server's errors classified as the renewer needs
// (NotFound creates, Conflict re-reads), and the Node's UID read as
// metadata only.
func TestTheLeanClientMakesEveryCallOfTheRenewerAgainstTheRealAPIServer(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	node := testenv.CreateNode(t, "n-lean", nil)
	leaseNS := testenv.NewNamespace(t, "lease")

	rec := &contentTypes{seen: map[string]string{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec })
	c, err := heartbeat.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.GetLease(ctx, leaseNS, "kube-proxy.n-lean"); !apierrors.IsNotFound(err) {
		t.Fatalf("GetLease of a missing Lease: %v, want NotFound", err)
	}
	created, err := c.CreateLease(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: "kube-proxy.n-lean"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("p1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	again := created.DeepCopy()
	again.ResourceVersion = ""
	if _, err := c.CreateLease(ctx, again); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating it twice: %v, want AlreadyExists", err)
	}
	got, err := c.GetLease(ctx, leaseNS, created.Name)
	if err != nil || ptr.Deref(got.Spec.HolderIdentity, "") != "p1" || got.UID != created.UID {
		t.Fatalf("GetLease: %+v, %v", got, err)
	}
	got.Spec.HolderIdentity = ptr.To("p2")
	updated, err := c.UpdateLease(ctx, got)
	if err != nil || ptr.Deref(updated.Spec.HolderIdentity, "") != "p2" {
		t.Fatalf("UpdateLease: %+v, %v", updated, err)
	}
	if _, err := c.UpdateLease(ctx, got); !apierrors.IsConflict(err) {
		t.Errorf("UpdateLease with a stale resourceVersion: %v, want Conflict", err)
	}

	// The lean client's scheme has no Node type: it can only decode the
	// answer because the API server sent the metadata alone.
	uid, err := c.NodeUID(ctx, node.Name)
	if err != nil || uid != node.UID {
		t.Errorf("NodeUID: %q, %v; want %q", uid, err, node.UID)
	}
	if _, err := c.NodeUID(ctx, "no-such-node"); !apierrors.IsNotFound(err) {
		t.Errorf("NodeUID of a missing Node: %v, want NotFound", err)
	}
	user, err := c.ReviewSelf(ctx)
	if err != nil || user.Username == "" {
		t.Errorf("ReviewSelf: %+v, %v", user, err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for call, ct := range rec.seen {
		if !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
			t.Errorf("%s answered in %q, want protobuf", call, ct)
		}
	}
	for _, call := range []string{
		"GET /apis/coordination.k8s.io/v1/namespaces/" + leaseNS + "/leases/kube-proxy.n-lean",
		"POST /apis/coordination.k8s.io/v1/namespaces/" + leaseNS + "/leases",
		"PUT /apis/coordination.k8s.io/v1/namespaces/" + leaseNS + "/leases/kube-proxy.n-lean",
		"POST /apis/authentication.k8s.io/v1/selfsubjectreviews",
		"GET /api/v1/nodes/n-lean",
	} {
		if _, ok := rec.seen[call]; !ok {
			t.Errorf("no successful %s recorded: %v", call, rec.seen)
		}
	}
}
