package leaderelection

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	ns   = "kube-system"
	name = "component"
)

func newElector(t *testing.T, client *fake.Clientset, identity string) *Elector {
	t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	// Short durations only bound how long a failure takes to show; every
	// wait below is on an event, not on time.
	return NewWithLock(lock, Config{Name: "component", Identity: identity, ResourceLock: resourcelock.LeasesResourceLock,
		Namespace: ns, LockName: name, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond})
}

func holder(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// Stopping ends the work first and releases the lease only after the work
// returned, so the next leader never overlaps with this one; then Run
// returns nil.
func TestStopReleasesAfterTheWorkEnded(t *testing.T) {
	for _, how := range []string{"context", "Release"} {
		t.Run(how, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := fake.NewClientset()
			e := newElector(t, client, "a")
			leading := make(chan struct{})
			holderWhenWorkEnded := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- e.Run(ctx, func(ctx context.Context) {
					close(leading)
					<-ctx.Done()
					holderWhenWorkEnded <- holder(t, client)
				})
			}()
			<-leading
			if err := e.Check(); err != nil {
				t.Errorf("healthz while leading: %v", err)
			}
			if how == "context" {
				cancel()
			} else {
				e.Release(ctx)
			}
			if got := <-holderWhenWorkEnded; got != "a" {
				t.Errorf("lease held by %q while the work was ending, want still a", got)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := holder(t, client); got != "" {
				t.Errorf("lease held by %q after stopping, want released", got)
			}
		})
	}
}

// Losing the lease without being asked to stop ends the work and is an
// error, so that the process restarts clean.
func TestLostLeadershipIsAnError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	e := newElector(t, client, "a")
	var stolen atomic.Bool
	// Another replica takes the lease (as after a partition): renewals by
	// "a" now fail. The fake clientset does not check resourceVersions, so
	// it is told to answer "a"'s stale optimistic update with a conflict.
	client.PrependReactor("update", "leases", func(action core.Action) (bool, runtime.Object, error) {
		l := action.(core.UpdateAction).GetObject().(*coordinationv1.Lease)
		if stolen.Load() && ptr.Deref(l.Spec.HolderIdentity, "") == "a" {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	leading := make(chan struct{})
	workEnded := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context) {
			close(leading)
			<-ctx.Done()
			close(workEnded)
		})
	}()
	<-leading
	l, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stolen.Store(true)
	l.Spec.HolderIdentity = ptr.To("b")
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Hour)}
	l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
	if _, err := client.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-workEnded
	if err := <-done; !errors.Is(err, ErrLostLeadership) {
		t.Fatalf("Run = %v, want ErrLostLeadership", err)
	}
	if got := holder(t, client); got != "b" {
		t.Errorf("lease holder %q, want b's untouched", got)
	}
}

// Released before it leads: Run returns at once and never runs the work.
func TestReleaseBeforeRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b"), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	})
	e := newElector(t, client, "a")
	e.Release(ctx)
	if err := e.Run(ctx, func(context.Context) { t.Error("led after Release") }); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A stop that cancels the request creating the lease after the API server
// stored it: the elector never knew it led, but the lease names it; Run
// releases it rather than leaving the other replica to wait it out.
func TestStopDuringAcquireReleasesAStoredLease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	client.PrependReactor("create", "leases", func(action core.Action) (bool, runtime.Object, error) {
		if err := client.Tracker().Create(coordinationv1.SchemeGroupVersion.WithResource("leases"),
			action.(core.CreateAction).GetObject(), ns); err != nil {
			return true, nil, err
		}
		cancel() // SIGTERM while the answer is on its way
		return true, nil, context.Canceled
	})
	e := newElector(t, client, "a")
	if err := e.Run(ctx, func(context.Context) { t.Error("led although the acquisition failed") }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := holder(t, client); got != "" {
		t.Errorf("lease held by %q after stopping, want released", got)
	}
}

// The leading gauge is 1 exactly while the work runs as leader: 0 before
// the lease is won and again once the work has returned.
func TestTheLeadingGaugeIsOneExactlyWhileTheWorkRunsAsLeader(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	reg := prometheus.NewPedanticRegistry()
	gauge := NewLeadingGauge(reg, "component")
	e := newElector(t, client, "a")
	e.cfg.Leading = gauge
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Fatalf("leading before Run = %v, want 0", got)
	}
	whileLeading := make(chan float64, 1)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context) {
			whileLeading <- testutil.ToFloat64(gauge)
			<-stop
		})
	}()
	if got := <-whileLeading; got != 1 {
		t.Errorf("leading while the work runs = %v, want 1", got)
	}
	cancel()
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("leading after Run returned = %v, want 0", got)
	}
	want := `# HELP nodehealth_leader_election_leading 1 while this replica runs the component's work (leads, or runs without leader election), 0 otherwise.
# TYPE nodehealth_leader_election_leading gauge
nodehealth_leader_election_leading{name="component"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), LeadingMetricName); err != nil {
		t.Error(err)
	}
}
