package heartbeat_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/clientset"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// runRenewer runs a Renewer until the returned stop function is called (or
// the test ends); stop waits for Run to return.
func runRenewer(t *testing.T, r *heartbeat.Renewer) (stop func()) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// An extension on node n1, with nothing but its pod-bound token, creates
// kube-proxy.n1 (owned by the Node, whose UID it read from a SelfSubjectReview:
// it has no Node permission), renews it, releases it when its probe fails,
// re-acquires it, and releases it on shutdown.
func TestLibraryCreatesRenewsReleases(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	testenv.CreateNode(t, "n1", nil)
	leaseNS := testenv.NewNamespace(t, "lease")
	ext := newExtension(t, "kube-proxy", "n1", leaseNS)

	// The extension's identity really cannot read Nodes: the ownerReference
	// below can only come from the SelfSubjectReview.
	if _, err := ext.sa.Client.CoreV1().Nodes().Get(testenv.Context(t), "n1", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the extension may read Nodes (%v); the test would not prove the SelfSubjectReview path", err)
	}

	// The lean client (protobuf, two API groups), as an extension without a
	// clientset builds it.
	client, err := heartbeat.NewClient(ext.sa.Config)
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Pointer[error]
	r, err := heartbeat.New(client, heartbeat.Options{
		Namespace:     leaseNS,
		NodeName:      "n1",
		Extension:     "kube-proxy",
		Holder:        ext.pod,
		LeaseDuration: 30 * time.Second,
		RenewInterval: time.Second,
		Probe: func(context.Context) error {
			if err := failing.Load(); err != nil {
				return *err
			}
			return nil
		},
		ProbePeriod:      500 * time.Millisecond,
		FailureThreshold: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRenewer(t, r)

	l := ext.waitLease(t, "created and held", heldBy(ext.pod))
	if l.Name != "kube-proxy.n1" {
		t.Errorf("lease name %q", l.Name)
	}
	ownedByNode(t, l, "n1")
	if l.Labels[nodev1alpha1.ExtensionLabel] != "kube-proxy" || l.Labels[nodev1alpha1.NodeLabel] != "n1" {
		t.Errorf("labels %v", l.Labels)
	}
	if d := l.Spec.LeaseDurationSeconds; d == nil || *d != 30 {
		t.Errorf("leaseDurationSeconds %v", d)
	}
	ext.waitLease(t, "renewed", renewedAfter(ext.pod, l.Spec.RenewTime))

	probeErr := errors.New("GET http://127.0.0.1:10256/healthz: 503 Service Unavailable")
	failing.Store(&probeErr)
	failedAt := time.Now()
	l = waitLeaseFor(t, leaseNS, ext.leaseName(), "released", time.Minute, releasedWith(heartbeat.ReasonProbeFailed))
	if took := time.Since(failedAt); took > 10*time.Second {
		t.Errorf("released %s after the probe started failing; want about 2 probe periods (1s), far less than the 30s lease", took)
	}
	if msg := l.Annotations[nodev1alpha1.MessageAnnotation]; msg != probeErr.Error() {
		t.Errorf("message %q", msg)
	}

	failing.Store(nil)
	ext.waitLease(t, "re-acquired", renewedAfter(ext.pod, l.Spec.RenewTime))

	stop()
	ctx := testenv.Context(t)
	if err := r.Release(ctx, heartbeat.ReasonTerminating, "kube-proxy is shutting down"); err != nil {
		t.Fatal(err)
	}
	l, err = env.Client.CoordinationV1().Leases(leaseNS).Get(ctx, ext.leaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !releasedWith(heartbeat.ReasonTerminating)(l) {
		t.Errorf("after shutdown: holder %v annotations %v", l.Spec.HolderIdentity, l.Annotations)
	}
}

// Deleting a Node garbage-collects its extension Leases, through the
// ownerReference the heartbeat wrote.
func TestDeletingNodeCollectsLeases(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	const node = "n-gc"
	testenv.CreateNode(t, node, nil)
	leaseNS := testenv.NewNamespace(t, "lease")

	var names []string
	for _, name := range []string{"kube-proxy", "cni"} {
		ext := newExtension(t, name, node, leaseNS)
		// Through the clientset adapter, as an extension that has one.
		r, err := heartbeat.New(clientset.New(ext.sa.Client), heartbeat.Options{Namespace: leaseNS, NodeName: node, Extension: name, Holder: ext.pod})
		if err != nil {
			t.Fatal(err)
		}
		stop := runRenewer(t, r)
		l := ext.waitLease(t, "held", heldBy(ext.pod))
		ownedByNode(t, l, node)
		// Stop renewing first: a renewer still running would create the
		// Lease again (owned by a Node that no longer exists, so collected
		// again), which makes the test about timing instead of ownership.
		stop()
		names = append(names, l.Name)
	}

	if err := env.DeleteNode(testenv.Context(t), node); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		err := framework.WaitForDeletion[*coordinationv1.Lease](testenv.Context(t),
			framework.NamedListWatch(env.Client.CoordinationV1().RESTClient(), "leases", leaseNS, name), leaseNS, name)
		if err != nil {
			t.Errorf("lease %s not garbage-collected with its Node: %v", name, err)
		}
	}
}

// A Lease name over 253 characters cannot exist; the library says so rather
// than truncating (which could name another node's Lease).
func TestLeaseNameOverLimitRefused(t *testing.T) {
	t.Parallel()
	node := strings.Repeat("n", 63) + "." + strings.Repeat("o", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 55)
	_, err := heartbeat.New(clientset.New(testenv.Env(t).Client), heartbeat.Options{NodeName: node, Extension: "device-plugin", Holder: "p"})
	if err == nil || !strings.Contains(err.Error(), "253") {
		t.Errorf("New: %v, want an error naming the 253-character limit", err)
	}
}
