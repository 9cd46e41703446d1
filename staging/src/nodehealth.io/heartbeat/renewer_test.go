package heartbeat

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat/clientset"
	"nodehealth.io/heartbeat/prommetrics"
)

const (
	testNode   = "n1"
	testExt    = "kube-proxy"
	testHolder = "kube-proxy-abcde"
	testNS     = nodev1alpha1.DefaultLeaseNamespace
	testLease  = "kube-proxy.n1"
	testUID    = types.UID("node-uid-1")
	// step is the granularity of simulated time.
	step = 50 * time.Millisecond
)

var leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// write is one Lease write the fake API server accepted or refused.
type write struct {
	at     time.Time
	verb   string
	holder string
	reason string
	err    error
}

// harness runs a Renewer against a fake clientset that enforces
// resourceVersion preconditions like a real API server, with a fake clock.
type harness struct {
	t      *testing.T
	clk    *testingclock.FakeClock
	client *fake.Clientset
	r      *Renewer
	reg    *prometheus.Registry

	mu       sync.Mutex
	writes   []write
	probeErr error
	// failWrites makes the next n writes fail with a 500.
	failWrites int
	// failUntil makes every write fail with a 500 before this time.
	failUntil time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// metric returns the value of the extension's counter or gauge name, of the
// series whose one variable label has value label ("" for none).
func (h *harness) metric(name, label string) float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var variable string
			for _, l := range m.GetLabel() {
				if l.GetName() != "extension" {
					variable = l.GetValue()
				}
			}
			if variable != label {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
		return 0
	}
	h.t.Fatalf("no metric %s", name)
	return 0
}

// The Prometheus implementation is the one the sidecar uses.
var _ Metrics = (*prommetrics.Metrics)(nil)

func newHarness(t *testing.T, opts Options, objects ...k8sruntime.Object) *harness {
	t.Helper()
	h := &harness{t: t, clk: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), reg: prometheus.NewRegistry()}
	h.client = fake.NewClientset(objects...)
	h.installReactors()
	if opts.NodeName == "" {
		opts.NodeName = testNode
	}
	if opts.Extension == "" {
		opts.Extension = testExt
	}
	if opts.Holder == "" {
		opts.Holder = testHolder
	}
	opts.Clock = h.clk
	m, err := prommetrics.New(h.reg, opts.Extension)
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics = m
	r, err := New(clientset.New(h.client), opts)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

// selfReview makes SelfSubjectReviews answer like a pod-bound token on node.
func (h *harness) selfReview(extra map[string]authenticationv1.ExtraValue) {
	h.client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:kube-proxy", Extra: extra}}}, nil
	})
}

func podBound(node string, uid types.UID) map[string]authenticationv1.ExtraValue {
	return map[string]authenticationv1.ExtraValue{extraNodeName: {node}, extraNodeUID: {string(uid)}}
}

func (h *harness) installReactors() {
	tracker := h.client.Tracker()
	h.selfReview(podBound(testNode, testUID))
	h.client.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		verb := action.GetVerb()
		if verb != "create" && verb != "update" {
			return false, nil, nil
		}
		lease := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		h.mu.Lock()
		defer h.mu.Unlock()
		rec := write{at: h.clk.Now(), verb: verb, holder: ptr.Deref(lease.Spec.HolderIdentity, ""), reason: lease.Annotations[nodev1alpha1.ReasonAnnotation]}
		if h.failWrites > 0 || rec.at.Before(h.failUntil) {
			h.failWrites = max(h.failWrites-1, 0)
			rec.err = apierrors.NewInternalError(errors.New("etcd is unhappy"))
			h.writes = append(h.writes, rec)
			return true, nil, rec.err
		}
		if verb == "update" {
			obj, err := tracker.Get(leasesGVR, lease.Namespace, lease.Name)
			if err != nil {
				return true, nil, err
			}
			stored := obj.(*coordinationv1.Lease)
			if lease.ResourceVersion != stored.ResourceVersion {
				rec.err = apierrors.NewConflict(leasesGVR.GroupResource(), lease.Name, errors.New("the object has been modified"))
				h.writes = append(h.writes, rec)
				return true, nil, rec.err
			}
			rv, _ := strconv.Atoi(stored.ResourceVersion)
			lease = lease.DeepCopy()
			lease.ResourceVersion = strconv.Itoa(rv + 1)
			if err := tracker.Update(leasesGVR, lease, lease.Namespace); err != nil {
				return true, nil, err
			}
			h.writes = append(h.writes, rec)
			return true, lease, nil
		}
		lease = lease.DeepCopy()
		lease.ResourceVersion = "1"
		if err := tracker.Create(leasesGVR, lease, lease.Namespace); err != nil {
			return true, nil, err
		}
		h.writes = append(h.writes, rec)
		return true, lease, nil
	})
}

func (h *harness) setProbe(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeErr = err
}

func (h *harness) probe(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.probeErr
}

func (h *harness) failNextWrites(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failWrites = n
}

func (h *harness) allWrites() []write {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]write(nil), h.writes...)
}

// start runs the Renewer until the test ends or stop is called.
func (h *harness) start() {
	h.t.Helper()
	_, ctx := ktesting.NewTestContext(h.t)
	ctx, h.cancel = context.WithCancel(ctx)
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		if err := h.r.Run(ctx); err != nil {
			h.t.Errorf("Run: %v", err)
		}
	}()
	h.t.Cleanup(h.stop)
	h.waitBlocked()
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.cancel = nil
}

// waitBlocked returns once Run waits on the fake clock again. Run is the only
// user of the clock and arms exactly one timer per round, and a fired timer
// leaves the clock's waiters at once, so "has a waiter" means "done with
// everything that was due".
func (h *harness) waitBlocked() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.clk.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("Run did not wait on the clock within 10s")
		}
		runtime.Gosched()
	}
}

// advance moves simulated time forward by d in small steps, letting Run do
// whatever falls due at each step.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	for end := h.clk.Now().Add(d); h.clk.Now().Before(end); {
		h.waitBlocked()
		h.clk.Step(step)
	}
	h.waitBlocked()
}

// eventually waits (in real time, without sleeping) for something Run does
// in reaction to a call from the test rather than to the clock.
func (h *harness) eventually(cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatal("condition not met within 10s")
		}
		runtime.Gosched()
	}
}

func (h *harness) lease() *coordinationv1.Lease {
	h.t.Helper()
	l, err := h.client.CoordinationV1().Leases(testNS).Get(context.Background(), testLease, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

func successful(ws []write) []write {
	var out []write
	for _, w := range ws {
		if w.err == nil {
			out = append(out, w)
		}
	}
	return out
}

func TestCreatesLeaseWithLabelsOwnerAndHolder(t *testing.T) {
	h := newHarness(t, Options{Register: true, AffectsReadiness: ptr.To(false)})
	h.start()

	l := h.lease()
	if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != testHolder {
		t.Errorf("holder %q, want %q", got, testHolder)
	}
	if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != 40 {
		t.Errorf("leaseDurationSeconds %d, want the default 40", got)
	}
	if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(h.clk.Now()) || l.Spec.AcquireTime == nil {
		t.Errorf("renewTime %v / acquireTime %v, want both now", l.Spec.RenewTime, l.Spec.AcquireTime)
	}
	want := map[string]string{
		nodev1alpha1.ExtensionLabel:        testExt,
		nodev1alpha1.NodeLabel:             testNode,
		nodev1alpha1.RegisterLabel:         "true",
		nodev1alpha1.AffectsReadinessLabel: "false",
	}
	for k, v := range want {
		if l.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (labels %v)", k, l.Labels[k], v, l.Labels)
		}
	}
	if len(l.OwnerReferences) != 1 {
		t.Fatalf("ownerReferences %v, want one to the Node", l.OwnerReferences)
	}
	ref := l.OwnerReferences[0]
	if ref.Kind != "Node" || ref.APIVersion != "v1" || ref.Name != testNode || ref.UID != testUID || ref.BlockOwnerDeletion != nil {
		t.Errorf("ownerReference %+v, want Node %s uid %s without blockOwnerDeletion", ref, testNode, testUID)
	}
	if !h.r.Holding() {
		t.Error("Holding() = false")
	}
	if v := h.metric("nodehealth_heartbeat_holding", ""); v != 1 {
		t.Errorf("holding gauge %v", v)
	}
}

func TestRenewCadenceWithinJitterBounds(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.advance(2 * time.Minute)

	ws := successful(h.allWrites())
	if len(ws) < 11 || len(ws) > 13 {
		t.Fatalf("%d writes in 2m with a 10s interval, want 11-13", len(ws))
	}
	lo := DefaultRenewInterval
	hi := time.Duration(float64(DefaultRenewInterval)*(1+DefaultJitterFactor)) + step
	var jittered bool
	for i := 1; i < len(ws); i++ {
		gap := ws[i].at.Sub(ws[i-1].at)
		if gap < lo || gap > hi {
			t.Errorf("renewal %d came %s after the previous one, want within [%s, %s]", i, gap, lo, hi)
		}
		if gap > lo+step {
			jittered = true
		}
		if ws[i].verb != "update" || ws[i].holder != testHolder {
			t.Errorf("renewal %d: %+v", i, ws[i])
		}
	}
	if !jittered {
		t.Error("no renewal interval was stretched by jitter")
	}
	if v := h.metric("nodehealth_heartbeat_renewals_total", ""); int(v) != len(ws) {
		t.Errorf("renewals metric %v, want %d", v, len(ws))
	}
}

func TestBackoffOnErrorsIsBoundedAndResets(t *testing.T) {
	h := newHarness(t, Options{})
	h.start() // created
	h.failNextWrites(12)
	h.advance(2 * time.Minute)

	ws := h.allWrites()
	var failed []write
	for _, w := range ws[1:] {
		if w.err != nil {
			failed = append(failed, w)
		}
	}
	if len(failed) != 12 {
		t.Fatalf("%d failed writes, want all 12 retried", len(failed))
	}
	// Each retry waits about twice as long as the one before, from 200ms,
	// and never more than 7s.
	prevGap := time.Duration(0)
	for i := 1; i < len(failed); i++ {
		gap := failed[i].at.Sub(failed[i-1].at)
		if gap > MaxRetryInterval+step {
			t.Errorf("retry %d after %s, more than the %s cap", i, gap, MaxRetryInterval)
		}
		if i == 1 && (gap < MinRetryInterval || gap > MinRetryInterval+2*step) {
			t.Errorf("first retry after %s, want about %s", gap, MinRetryInterval)
		}
		if gap < prevGap && prevGap < MaxRetryInterval {
			t.Errorf("retry %d after %s, shorter than the previous %s", i, gap, prevGap)
		}
		prevGap = gap
	}
	if prevGap < MaxRetryInterval-step {
		t.Errorf("last retry gap %s, want the cap %s reached", prevGap, MaxRetryInterval)
	}
	// Never hammers: 12 failures took well over half a minute.
	if span := failed[len(failed)-1].at.Sub(failed[0].at); span < 30*time.Second {
		t.Errorf("12 retries within %s", span)
	}
	// After the first success the normal cadence resumes.
	ok := successful(ws[1:])
	if len(ok) < 2 {
		t.Fatalf("no renewals after the errors: %+v", ws)
	}
	if gap := ok[1].at.Sub(ok[0].at); gap < DefaultRenewInterval {
		t.Errorf("after recovery the next renewal came after %s, want the renew interval", gap)
	}
	if v := h.metric("nodehealth_heartbeat_renewal_failures_total", ""); v != 12 {
		t.Errorf("renewal failures metric %v, want 12", v)
	}
}

func TestReleaseOnFailureThresholdAndReacquire(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: time.Second, FailureThreshold: 3, SuccessThreshold: 2})
	h.r.opts.Probe = h.probe
	h.start()
	if !h.r.Holding() {
		t.Fatal("not holding after a successful first probe")
	}

	h.setProbe(errors.New("GET http://127.0.0.1:10256/healthz: 503"))
	failedAt := h.clk.Now()
	h.advance(5 * time.Second)

	var release *write
	for _, w := range successful(h.allWrites()) {
		if w.holder == "" {
			release = &w
			break
		}
	}
	if release == nil {
		t.Fatalf("no release after 5 failed probes: %+v", h.allWrites())
	}
	// Probes at +1s, +2s, +3s fail; the third releases at once, not at the
	// next renewal.
	if d := release.at.Sub(failedAt); d < 3*time.Second || d > 3*time.Second+step {
		t.Errorf("released %s after the probe started failing, want 3s (3 failures, 1s apart)", d)
	}
	l := h.lease()
	if ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != ReasonProbeFailed ||
		l.Annotations[nodev1alpha1.MessageAnnotation] != "GET http://127.0.0.1:10256/healthz: 503" {
		t.Errorf("released lease: holder %v annotations %v", l.Spec.HolderIdentity, l.Annotations)
	}
	if h.r.Holding() {
		t.Error("Holding() after release")
	}

	// Released, nothing is written while the probe keeps failing.
	n := len(h.allWrites())
	h.advance(time.Minute)
	if got := len(h.allWrites()); got != n {
		t.Errorf("%d writes while released and failing", got-n)
	}

	// Two successes are needed to re-acquire.
	h.setProbe(nil)
	recoveredAt := h.clk.Now()
	h.advance(3 * time.Second)
	ws := successful(h.allWrites())
	last := ws[len(ws)-1]
	if last.holder != testHolder {
		t.Fatalf("not re-acquired after 3 successful probes: %+v", ws[n-1:])
	}
	if d := last.at.Sub(recoveredAt); d < 2*time.Second || d > 2*time.Second+step {
		t.Errorf("re-acquired %s after recovery, want 2s (success threshold 2)", d)
	}
	l = h.lease()
	if _, ok := l.Annotations[nodev1alpha1.ReasonAnnotation]; ok {
		t.Errorf("reason kept after re-acquiring: %v", l.Annotations)
	}
	if !l.Spec.AcquireTime.Time.Equal(last.at) {
		t.Errorf("acquireTime %v, want the re-acquisition %v", l.Spec.AcquireTime, last.at)
	}
	if v := h.metric("nodehealth_heartbeat_releases_total", ReasonProbeFailed); v != 1 {
		t.Errorf("releases{reason=ProbeFailed} = %v", v)
	}
	if c, err := testutil.GatherAndCount(h.reg, "nodehealth_heartbeat_probe_duration_seconds"); c != 2 || err != nil {
		t.Errorf("probe duration series %d, want success and failure", c)
	}
}

func TestFailuresBelowThresholdKeepRenewing(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: time.Second, FailureThreshold: 3})
	h.r.opts.Probe = h.probe
	h.start()
	for range 5 {
		h.setProbe(errors.New("slow"))
		h.advance(2 * time.Second) // two failures
		h.setProbe(nil)
		h.advance(time.Second)
	}
	for _, w := range h.allWrites() {
		if w.holder != testHolder {
			t.Fatalf("released although never 3 failures in a row: %+v", w)
		}
	}
	if n := len(successful(h.allWrites())); n < 2 {
		t.Errorf("%d renewals in 15s", n)
	}
}

func TestFirstProbeFailingCreatesReleasedLease(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: time.Second, FailureThreshold: 2})
	h.r.opts.Probe = h.probe
	h.setProbe(errors.New("connection refused"))
	h.start()
	if len(h.allWrites()) != 0 {
		t.Fatal("wrote before the failure threshold was reached")
	}
	h.advance(time.Second)
	l := h.lease()
	if ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != ReasonProbeFailed {
		t.Errorf("lease %+v, want created released with reason ProbeFailed", l)
	}
	if len(l.OwnerReferences) != 1 {
		t.Errorf("released lease without ownerReference")
	}
}

// SIGTERM: Run returns when its context ends, and the caller releases.
func TestReleaseOnShutdown(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.advance(30 * time.Second)
	h.stop()
	if err := h.r.Release(context.Background(), ReasonTerminating, "kube-proxy is shutting down"); err != nil {
		t.Fatal(err)
	}
	l := h.lease()
	if ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != ReasonTerminating ||
		l.Annotations[nodev1alpha1.MessageAnnotation] != "kube-proxy is shutting down" {
		t.Errorf("lease after shutdown: holder %v annotations %v", l.Spec.HolderIdentity, l.Annotations)
	}
	if v := h.metric("nodehealth_heartbeat_releases_total", ReasonTerminating); v != 1 {
		t.Errorf("releases{reason=Terminating} = %v", v)
	}
}

// A restart for a new configuration: Run returns and nothing is written, so
// the Lease stays held and valid for the next process.
func TestNoReleaseOnReloadExit(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.advance(15 * time.Second)
	before := h.lease()
	n := len(h.allWrites())
	h.stop()
	if got := len(h.allWrites()); got != n {
		t.Errorf("%d writes when Run's context ended", got-n)
	}
	after := h.lease()
	if after.ResourceVersion != before.ResourceVersion || ptr.Deref(after.Spec.HolderIdentity, "") != testHolder {
		t.Errorf("lease changed on exit: %+v", after)
	}

	// The next process (another holder name after a pod restart, or the same)
	// renews it without a release in between.
	r2, err := New(clientset.New(h.client), Options{NodeName: testNode, Extension: testExt, Holder: testHolder, Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	h2 := &harness{t: t, clk: h.clk, client: h.client, r: r2}
	h2.start()
	if got := ptr.Deref(h.lease().Spec.HolderIdentity, ""); got != testHolder {
		t.Errorf("holder %q after restart", got)
	}
	for _, w := range h.allWrites() {
		if w.holder == "" {
			t.Errorf("released across a restart: %+v", w)
		}
	}
}

func TestReleaseWhileRunningHoldsUntilResume(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	if err := h.r.Release(context.Background(), nodev1alpha1.ReasonUpdating, "draining for an OS update"); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Minute)
	l := h.lease()
	if ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != nodev1alpha1.ReasonUpdating {
		t.Fatalf("re-acquired while released by the caller: %+v", l)
	}
	// Resume wakes Run, which re-acquires without waiting for the clock.
	h.r.Resume()
	h.eventually(func() bool { return ptr.Deref(h.lease().Spec.HolderIdentity, "") == testHolder })
}

// Someone else (a person, kubectl label, another tool) changed the Lease:
// the renewal meets a conflict, reads the Lease again and renews on top of
// the other change at once, without a back-off.
func TestConflictRereadsAndKeepsOtherChanges(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	l := h.lease()
	l.Labels["team"] = "network"
	rv, _ := strconv.Atoi(l.ResourceVersion)
	l.ResourceVersion = strconv.Itoa(rv + 1)
	if err := h.client.Tracker().Update(leasesGVR, l, testNS); err != nil {
		t.Fatal(err)
	}
	h.advance(11 * time.Second)

	ws := h.allWrites()
	if len(ws) != 3 || !apierrors.IsConflict(ws[1].err) || ws[2].err != nil || !ws[2].at.Equal(ws[1].at) {
		t.Fatalf("want create, conflict, immediate successful retry; got %+v", ws)
	}
	l = h.lease()
	if l.Labels["team"] != "network" || ptr.Deref(l.Spec.HolderIdentity, "") != testHolder {
		t.Errorf("lease after conflict: %+v", l)
	}
	if v := h.metric("nodehealth_heartbeat_renewal_failures_total", ""); v != 0 {
		t.Errorf("a resolved conflict counted as %v failures", v)
	}
}

// A newer pod of the extension took the Lease over (DaemonSet surge update):
// the old one's shutdown must not release it.
func TestReleaseLeavesAnotherHoldersLeaseAlone(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.stop()
	l := h.lease()
	l.Spec.HolderIdentity = ptr.To("kube-proxy-newer")
	l.ResourceVersion = "100"
	if err := h.client.Tracker().Update(leasesGVR, l, testNS); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Release(context.Background(), ReasonTerminating, "bye"); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(h.lease().Spec.HolderIdentity, ""); got != "kube-proxy-newer" {
		t.Errorf("holder %q, want the newer pod's", got)
	}
}

func TestLeaseNameOver253CharactersRefused(t *testing.T) {
	node := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 50)
	_, err := New(clientset.New(fake.NewClientset()), Options{NodeName: node, Extension: "csi-node-driver", Holder: "p"})
	if err == nil || !strings.Contains(err.Error(), "253") {
		t.Fatalf("New with a %d-character node name: %v, want an error naming the 253 limit", len(node), err)
	}
}

func TestTheRenewerRefusesOptionsItCannotHonour(t *testing.T) {
	for name, opts := range map[string]Options{
		"no node":            {Extension: testExt, Holder: "p"},
		"no holder":          {NodeName: testNode, Extension: testExt},
		"dotted extension":   {NodeName: testNode, Extension: "kube.proxy", Holder: "p"},
		"interval too long":  {NodeName: testNode, Extension: testExt, Holder: "p", RenewInterval: 40 * time.Second},
		"fractional seconds": {NodeName: testNode, Extension: testExt, Holder: "p", LeaseDuration: 1500 * time.Millisecond, RenewInterval: time.Second},
	} {
		if _, err := New(clientset.New(fake.NewClientset()), opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestOwnerReferenceSources(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "from-node-get"}}
	for name, tc := range map[string]struct {
		extra     map[string]authenticationv1.ExtraValue
		objects   []k8sruntime.Object
		forbidGet bool
		nodeUID   types.UID
		want      types.UID
	}{
		"pod-bound token":                {extra: podBound(testNode, testUID), want: testUID},
		"explicit UID":                   {nodeUID: "given", want: "given"},
		"unbound token, node readable":   {objects: []k8sruntime.Object{node}, want: "from-node-get"},
		"token of another node":          {extra: podBound("n2", "other"), objects: []k8sruntime.Object{node}, want: "from-node-get"},
		"unbound token, node forbidden":  {objects: []k8sruntime.Object{node}, forbidGet: true},
		"unbound token, node not found":  {},
		"token of another node, no node": {extra: podBound("n2", "other"), forbidGet: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{NodeUID: tc.nodeUID}, tc.objects...)
			h.selfReview(tc.extra)
			if tc.forbidGet {
				h.client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("no"))
				})
			}
			h.start()
			l := h.lease()
			var got types.UID
			if len(l.OwnerReferences) == 1 {
				got = l.OwnerReferences[0].UID
			} else if len(l.OwnerReferences) > 1 {
				t.Fatalf("ownerReferences %v", l.OwnerReferences)
			}
			if got != tc.want {
				t.Errorf("owner UID %q, want %q", got, tc.want)
			}
			if ptr.Deref(l.Spec.HolderIdentity, "") != testHolder {
				t.Errorf("lease not held: %+v", l)
			}
		})
	}
}

// A probe that ignores its context cannot stall the loop beyond the timeout.
func TestProbeTimeoutCountsAsFailure(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	h := newHarness(t, Options{ProbePeriod: time.Second, ProbeTimeout: 10 * time.Millisecond, FailureThreshold: 1})
	h.r.opts.Probe = func(context.Context) error { <-block; return nil }
	h.start()
	l := h.lease()
	if msg := l.Annotations[nodev1alpha1.MessageAnnotation]; !strings.Contains(msg, "timed out after 10ms") {
		t.Errorf("message %q", msg)
	}
}

func TestLongMessagesAreTruncated(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	if err := h.r.Release(context.Background(), "Broken", strings.Repeat("é", 2000)); err != nil {
		t.Fatal(err)
	}
	msg := h.lease().Annotations[nodev1alpha1.MessageAnnotation]
	if len(msg) > maxMessageLength+len("…") || !strings.HasSuffix(msg, "…") {
		t.Errorf("message of %d bytes", len(msg))
	}
}

func TestRunTwiceAndReleaseWithoutReason(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	if err := h.r.Run(context.Background()); err == nil {
		t.Error("second Run did not fail")
	}
	if err := h.r.Release(context.Background(), "", ""); err == nil {
		t.Error("Release without a reason did not fail")
	}
}

func TestHealthzReportsAStuckLoop(t *testing.T) {
	h := newHarness(t, Options{})
	if err := h.r.Healthz(); err != nil {
		t.Errorf("not running: %v", err)
	}
	h.start()
	h.advance(time.Minute)
	if err := h.r.Healthz(); err != nil {
		t.Errorf("running: %v", err)
	}
	// A loop that has not come round for 10 minutes (a write or probe that
	// never returns) is reported.
	h.r.lastLoop.Store(h.clk.Now().Add(-10 * time.Minute).UnixNano())
	if err := h.r.Healthz(); err == nil {
		t.Error("no error for a loop that has not run for 10m")
	}
}

// Healthz and Holding answer while a write hangs on a slow API server: a
// liveness probe timing out there would restart the process for nothing.
func TestHealthzDoesNotWaitForWrites(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	entered, release := make(chan struct{}), make(chan struct{})
	h.client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		close(entered)
		<-release
		return true, nil, apierrors.NewTimeoutError("slow", 1)
	})
	h.clk.Step(11 * time.Second) // the renewal is due; Run starts the write
	<-entered
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_ = h.r.Healthz()
		_ = h.r.Holding()
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Error("Healthz or Holding blocked behind a hanging write")
	}
	close(release)
	h.waitBlocked()
}

// renewTime is the Lease's renewTime (zero when unset).
func (h *harness) renewTime() time.Time {
	h.t.Helper()
	l := h.lease()
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// A heartbeat frozen for longer than FailureThreshold × ProbePeriod (SIGSTOP,
// a paused VM, a starved process) does not know whether its extension is
// healthy: it must not renew on the verdict it had before the freeze, only
// after a fresh successful probe. Here the probe target fails just before
// the freeze and the fake clock jumps a minute with no probe run; before the
// fix the first renewal after the jump went out on the old "healthy".
func TestFrozenHeartbeatRenewsOnlyAfterAFreshSuccessfulProbe(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: time.Second, FailureThreshold: 3})
	h.r.opts.Probe = h.probe
	h.start()
	h.advance(5 * time.Second)
	held := h.renewTime()
	if held.IsZero() || !h.r.Holding() {
		t.Fatal("not holding before the freeze")
	}

	h.setProbe(errors.New("dial tcp 127.0.0.1:10256: connect: connection refused"))
	lastSuccess := h.clk.Now() // the last probe ran just before (every 1s)
	h.clk.Step(time.Minute)    // frozen: no probe, no renewal, for a minute
	h.waitBlocked()
	if got := h.renewTime(); !got.Equal(held) {
		t.Fatalf("renewed at %s, as the freeze ended, on the verdict it had before it (last successful probe %s earlier)",
			got.Format(time.TimeOnly), got.Sub(lastSuccess))
	}

	// The target keeps failing: the probes after the freeze renew nothing;
	// the third releases the Lease (which leaves renewTime alone).
	h.advance(5 * time.Second)
	l := h.lease()
	if !l.Spec.RenewTime.Time.Equal(held) {
		t.Errorf("renewed at %s while the target failed after the freeze", l.Spec.RenewTime.Format(time.TimeOnly))
	}
	if ptr.Deref(l.Spec.HolderIdentity, "x") != "" || l.Annotations[nodev1alpha1.ReasonAnnotation] != ReasonProbeFailed {
		t.Errorf("not released after %d failed probes: holder %v annotations %v", 3, l.Spec.HolderIdentity, l.Annotations)
	}

	// The target answers again: the next probe renews.
	h.setProbe(nil)
	answered := h.clk.Now()
	h.advance(time.Second + step)
	l = h.lease()
	if !l.Spec.RenewTime.After(held) || ptr.Deref(l.Spec.HolderIdentity, "") != testHolder {
		t.Fatalf("not renewed after a fresh successful probe: renewTime %v holder %v", l.Spec.RenewTime, l.Spec.HolderIdentity)
	}
	if d := l.Spec.RenewTime.Sub(answered); d > time.Second+step {
		t.Errorf("renewed %s after the target answered again, want at the next probe (1s)", d)
	}
}

// The same freeze with a healthy target: the heartbeat probes at once when it
// runs again and renews on that fresh success, without waiting a period.
func TestFrozenHeartbeatWithAHealthyTargetRenewsAtOnce(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: 5 * time.Second, FailureThreshold: 3})
	probes := 0
	h.r.opts.Probe = func(ctx context.Context) error {
		h.mu.Lock()
		probes++
		h.mu.Unlock()
		return h.probe(ctx)
	}
	h.start()
	h.advance(3 * time.Second)
	held := h.renewTime()
	h.mu.Lock()
	before := probes
	h.mu.Unlock()

	h.clk.Step(time.Minute)
	h.waitBlocked()
	if got := h.renewTime(); !got.Equal(h.clk.Now()) {
		t.Errorf("renewTime %s, want %s: renewed at once after a fresh probe", got.Format(time.TimeOnly), h.clk.Now().Format(time.TimeOnly))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if probes <= before {
		t.Errorf("renewed after the freeze (renewTime %s → %s) without probing", held.Format(time.TimeOnly), h.renewTime().Format(time.TimeOnly))
	}
}

// The node-health controller assumes every renewer renews at least every
// lease duration / 4, as the kubelet renews its node Lease: a longer renew
// interval is refused with an error naming both values. The defaults (40s,
// 10s) are exactly a quarter, and allowed.
func TestRenewIntervalAtMostAQuarterOfTheDuration(t *testing.T) {
	base := Options{NodeName: testNode, Extension: testExt, Holder: "p"}
	for _, tc := range []struct {
		duration, renew time.Duration
		ok              bool
	}{
		{0, 0, true}, // the defaults, 40s and 10s
		{40 * time.Second, 10 * time.Second, true},
		{10 * time.Second, 2500 * time.Millisecond, true},
		{120 * time.Second, 30 * time.Second, true},
		{40 * time.Second, 11 * time.Second, false},
		{10 * time.Second, 3 * time.Second, false},
		{0, 15 * time.Second, false}, // the default duration, 40s
		{20 * time.Second, 0, false}, // the default renew interval, 10s
	} {
		opts := base
		opts.LeaseDuration, opts.RenewInterval = tc.duration, tc.renew
		_, err := New(clientset.New(fake.NewClientset()), opts)
		if tc.ok {
			if err != nil {
				t.Errorf("duration %s, renew interval %s: %v", tc.duration, tc.renew, err)
			}
			continue
		}
		d, r := cmp.Or(tc.duration, DefaultLeaseDuration), cmp.Or(tc.renew, DefaultRenewInterval)
		if err == nil {
			t.Errorf("duration %s, renew interval %s: accepted", d, r)
			continue
		}
		for _, want := range []string{"renew interval " + r.String(), "lease duration " + d.String(), "quarter"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("duration %s, renew interval %s: error %q does not say %q", d, r, err, want)
			}
		}
	}
}

// After a missed renewal a short Lease has little left: the back-off is
// capped at the longer of the renew interval and a quarter of duration −
// renew interval, 7 s at most, so that an API server answering again a cap
// before the Lease would expire still gets a renewal in time. With the
// kubelet's 7 s cap for every Lease, the 6 s Lease was retried 3.2 s after
// the failure before, past its expiry.
func TestAShortLeaseIsRetriedSoonEnoughToBeRenewedBeforeItExpires(t *testing.T) {
	for _, tc := range []struct {
		duration, renew, cap time.Duration
	}{
		{6 * time.Second, time.Second, 1250 * time.Millisecond},              // (6 − 1) / 4
		{10 * time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond}, // the renew interval
		{12 * time.Second, time.Second, 2750 * time.Millisecond},             // (12 − 1) / 4
		{40 * time.Second, 10 * time.Second, MaxRetryInterval},               // the kubelet's
	} {
		t.Run(tc.duration.String()+"-"+tc.renew.String(), func(t *testing.T) {
			h := newHarness(t, Options{LeaseDuration: tc.duration, RenewInterval: tc.renew})
			h.start() // created
			created := h.clk.Now()
			expires := created.Add(tc.duration)
			h.mu.Lock()
			h.failUntil = expires.Add(-tc.cap - step)
			h.mu.Unlock()
			h.advance(tc.duration + tc.renew)

			ws := h.allWrites()[1:]
			var renewed time.Time
			for i, w := range ws {
				if i > 0 && w.at.Sub(ws[i-1].at) > tc.cap+step {
					t.Errorf("write %d came %s after the failed one before it, more than the cap %s", i, w.at.Sub(ws[i-1].at), tc.cap)
				}
				if w.err == nil {
					renewed = w.at
					break
				}
			}
			if renewed.IsZero() {
				t.Fatalf("no renewal within %s: writes %+v", tc.duration+tc.renew, ws)
			}
			if !renewed.Before(expires) {
				t.Errorf("the API server answered again %s before the Lease expired, and the next renewal came %s after the last one, past its duration %s",
					tc.cap+step, renewed.Sub(created), tc.duration)
			}
			// The back-off still grows to the cap: the retries are not
			// simply every renew interval.
			var longest time.Duration
			for i := 1; i < len(ws) && ws[i].at.Compare(renewed) <= 0; i++ {
				longest = max(longest, ws[i].at.Sub(ws[i-1].at))
			}
			if longest < tc.cap-step {
				t.Errorf("the longest wait between two writes was %s, want the cap %s reached", longest, tc.cap)
			}
		})
	}
}

// The freshness rule costs a healthy extension nothing, even with a failure
// threshold of 1, where a success vouches for exactly one probe period: the
// loop probes before it renews, so no renewal is skipped, delayed or added.
// (Probes every 1.01s, so that the clock's 50ms steps wake the loop late, as
// a real scheduler does.)
func TestFreshnessKeepsTheCadenceOfAHealthyExtension(t *testing.T) {
	h := newHarness(t, Options{ProbePeriod: 1010 * time.Millisecond, FailureThreshold: 1})
	h.r.opts.Probe = h.probe
	h.start()
	h.advance(2 * time.Minute)
	ws := h.allWrites()
	if len(ws) < 11 || len(ws) > 13 {
		t.Fatalf("%d writes in 2m with a 10s interval, want 11-13", len(ws))
	}
	hi := time.Duration(float64(DefaultRenewInterval)*(1+DefaultJitterFactor)) + step
	for i := 1; i < len(ws); i++ {
		if gap := ws[i].at.Sub(ws[i-1].at); gap < DefaultRenewInterval || gap > hi || ws[i].holder != testHolder || ws[i].err != nil {
			t.Errorf("renewal %d, %s after the previous one: %+v", i, gap, ws[i])
		}
	}
}
