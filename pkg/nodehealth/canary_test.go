package nodehealth

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// A canary renewal that hangs (etcd paused: the API server holds the request)
// must not hold back the own-view guard: the view turns stale 3 intervals
// after the last observed renewal, while the renewal still hangs. Before the
// fix the check ran after the renewal in the same loop and never fired, and
// the Leases expired under a controller that trusted its view (found with
// etcd paused, test/integration/faults).
func TestCanaryGuardFiresWhileRenewalHangs(t *testing.T) {
	client := fake.NewClientset()
	release := make(chan struct{})
	client.PrependReactor("get", "leases", func(core.Action) (bool, runtime.Object, error) {
		<-release
		return true, nil, errors.New("etcd is back")
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	const interval = 2 * time.Second
	type change struct {
		stale bool
		at    time.Time
	}
	changes := make(chan change, 8)
	k := newCanary(canaryConfig{client: client, namespace: "ns", identity: "me", clock: clk, interval: interval,
		onChange: func(_ context.Context, stale bool, at time.Time) { changes <- change{stale, at} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	k.begin(start)
	go func() { defer close(done); k.run(ctx) }()
	defer func() {
		cancel()
		close(release)
		<-done
	}()

	// Advance fake time in small steps until the guard fires.
	const step = 100 * time.Millisecond
	var got change
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case got = <-changes:
			return true, nil
		default:
			clk.Step(step)
			return false, nil
		}
	})
	if err != nil {
		t.Fatalf("the own view never turned stale while the canary renewal hung (fake time %s after start)", clk.Since(start))
	}
	if !got.stale {
		t.Fatalf("first change reports stale=false")
	}
	// It fires at 3 intervals (the loop wakes then), not an interval later.
	// The poll keeps stepping the clock while the canary's goroutine runs,
	// so on a loaded machine it sees the instant a few steps late (CI saw
	// 300 ms); half an interval still tells the two apart.
	if late := got.at.Sub(start) - staleAfterIntervals*interval; late < 0 || late >= interval/2 {
		t.Errorf("guard fired %s after start, want %s (+ less than half an interval)", got.at.Sub(start), staleAfterIntervals*interval)
	}
}

// stale() holds back a decision as soon as 3 intervals have passed without an
// observed renewal, even before the run loop has noticed.
func TestCanaryStaleIsCurrent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := newCanary(canaryConfig{client: fake.NewClientset(), namespace: "ns", identity: "me", clock: clk, interval: time.Second})
	if k.stale() {
		t.Fatal("stale at start")
	}
	clk.Step(3 * time.Second)
	if k.stale() {
		t.Fatal("stale at exactly 3 intervals")
	}
	clk.Step(time.Millisecond)
	if !k.stale() {
		t.Fatal("not stale 3 intervals after the last observed renewal, before the loop checked")
	}
}

// Only a renewal not observed before proves the view current: an event that
// replays a renewal already seen (a re-list after a closed watch, served from
// a cache that may itself be behind) must not hold the guard back, or the
// extension Leases in that same stale list expire under a view that looks
// current (seen once with etcd paused, test/integration/faults).
func TestCanaryCountsOnlyNewRenewals(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const interval = 2 * time.Second
	k := newCanary(canaryConfig{namespace: "ns", identity: "me", clock: clk, interval: interval})
	renewal := func(holder string, at time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: at}}}
	}
	first := clk.Now()
	k.observed(renewal("me", first))

	clk.Step(staleAfterIntervals*interval - time.Millisecond)
	k.observed(renewal("me", first)) // replayed, not renewed
	k.observed(renewal("someone-else", clk.Now()))
	clk.Step(2 * time.Millisecond)
	if !k.stale() {
		t.Fatalf("view current %s after the last new renewal, with only a replay and another holder's renewal since; want stale", clk.Since(first))
	}

	k.observed(renewal("me", clk.Now()))
	if k.stale() {
		t.Fatal("view stale right after a new renewal was observed")
	}
}

// A stale view is current again at the run loop's next check after a new
// renewal was observed, not at the renewal's event: the watch catching up
// after a stall delivers its backlog around the canary's renewal, and a
// renewal of that backlog taken after the recovery would end a gate the
// recovery restarted, though it may predate a reboot (docs/controller.md,
// "Own view"). The loop checks once an interval while stale, at times of its
// own.
func TestAStaleViewRecoversAtTheLoopsNextCheckNotAtTheRenewalsEvent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const interval = 2 * time.Second
	type change struct {
		stale bool
		at    time.Time
	}
	changes := make(chan change, 8)
	k := newCanary(canaryConfig{client: fake.NewClientset(), namespace: "ns", identity: "me", clock: clk, interval: interval,
		onChange: func(_ context.Context, stale bool, at time.Time) { changes <- change{stale, at} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	k.begin(clk.Now())
	go func() { defer close(done); k.run(ctx) }()
	defer func() { cancel(); <-done }()

	// Stale once the loop's check at 3 intervals and a millisecond fires.
	stepUntilChange := func(what string) change {
		t.Helper()
		var got change
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			select {
			case got = <-changes:
				return true, nil
			default:
				clk.Step(100 * time.Millisecond)
				return false, nil
			}
		})
		if err != nil {
			t.Fatalf("%s: no change reported (fake time %s): %v", what, clk.Now().Format(time.StampMilli), err)
		}
		return got
	}
	if got := stepUntilChange("no renewal observed for 3 intervals"); !got.stale {
		t.Fatalf("first change %+v, want stale", got)
	}

	observedAt := clk.Now()
	k.observed(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), RenewTime: &metav1.MicroTime{Time: observedAt}}})
	if !k.stale() {
		t.Fatalf("the view is current at the renewal's event (%s), before the loop's check", observedAt.Format(time.StampMilli))
	}
	got := stepUntilChange("a new renewal observed while stale")
	if got.stale || !got.at.After(observedAt) || got.at.Sub(observedAt) > interval+time.Second {
		t.Fatalf("change after the renewal at %s = %+v, want current at the loop's next check, within an interval", observedAt.Format(time.StampMilli), got)
	}
}

// A burst of expiries, each at its own instant, costs a canary renewal per
// round trip, not one per node: while a renewal asked for by confirm is in
// flight, a need it covers (an expiry before it went out) asks for nothing,
// and the needs that came due after it went out are left to the next
// renewal. The worker that sent the first is free once it is answered: it is
// told that more is needed (its caller has those nodes judged again), and
// the first of them to ask sends the next. A sender that went on renewing
// for as long as needs kept coming held its own node out of the queue for
// the whole burst (3 s in make bench-scale at 1,000 nodes, 2026-12-02).
func TestConfirmSendsOneRenewalAtATimeAndLeavesTheNeedsThatCameAfterToTheNext(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	client := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nodehealth-controller-canary"}})
	entered, release := make(chan struct{}, 4), make(chan struct{})
	var updates []time.Time
	client.PrependReactor("update", "leases", func(a core.Action) (bool, runtime.Object, error) {
		updates = append(updates, a.(core.UpdateAction).GetObject().(*coordinationv1.Lease).Spec.RenewTime.Time)
		entered <- struct{}{}
		<-release
		return false, nil, nil
	})
	k := newCanary(canaryConfig{client: client, namespace: "ns", identity: "me", clock: clk, interval: 2 * time.Second})
	ctx := context.Background()
	first := clk.Now()
	moreAfterFirst := make(chan bool, 1)
	go func() { moreAfterFirst <- k.confirm(ctx, first) }()
	<-entered
	// Asked for while the first is in flight: an expiry before it went
	// out is covered; two after it wait for the next renewal.
	if k.confirm(ctx, first.Add(-time.Second)) {
		t.Error("a need the renewal in flight covers reports more")
	}
	clk.Step(300 * time.Millisecond)
	k.confirm(ctx, clk.Now())
	clk.Step(300 * time.Millisecond)
	k.confirm(ctx, clk.Now())
	release <- struct{}{}
	select {
	case more := <-moreAfterFirst:
		if !more {
			t.Error("the sender was not told of the needs that came due while its renewal was in flight")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker that sent the first renewal is still renewing after it was answered (renewals %v)", updates)
	}
	// The first node judged again sends the next, for both.
	moreAfterSecond := make(chan bool, 1)
	go func() { moreAfterSecond <- k.confirm(ctx, clk.Now()) }()
	<-entered
	release <- struct{}{}
	if more := <-moreAfterSecond; more {
		t.Error("the second renewal reports more, with no need after it")
	}
	want := []time.Time{first, first.Add(600 * time.Millisecond)}
	if !slices.EqualFunc(updates, want, time.Time.Equal) {
		t.Fatalf("renewals went out at %v, want %v", updates, want)
	}
	// Both went out: a need up to the second asks for nothing more.
	k.confirm(ctx, clk.Now())
	if len(updates) != 2 {
		t.Errorf("%d renewals after a need the last one covers, want 2", len(updates))
	}
}

// A renewal updates the canary Lease as the watch last delivered it, in one
// request: the confirmation an expiry waits for is one round trip, not a
// read and a write. A Lease the watch has not delivered yet is read first,
// and so is one that changed since (the conflict of a renewal from the other
// loop, or a watch behind): the renewal still goes out.
func TestARenewalUpdatesTheLeaseTheWatchDeliveredAndReadsItOnlyWhenThatIsNotTheLatest(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stored := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: nodev1alpha1.ControllerCanaryLease, ResourceVersion: "7"}}
	client := fake.NewClientset(stored)
	conflicts := 0
	client.PrependReactor("update", "leases", func(a core.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), nodev1alpha1.ControllerCanaryLease, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	k := newCanary(canaryConfig{client: client, namespace: "ns", identity: "me", clock: clk, interval: 2 * time.Second})
	ctx := context.Background()
	verbs := func() []string {
		var out []string
		for _, a := range client.Actions() {
			out = append(out, a.GetVerb())
		}
		client.ClearActions()
		return out
	}
	renew := func(when string, want ...string) {
		t.Helper()
		at := clk.Now()
		if err := k.renew(ctx, at); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got := verbs(); !slices.Equal(got, want) {
			t.Errorf("%s: requests %v, want %v", when, got, want)
		}
		l, err := client.CoordinationV1().Leases("ns").Get(ctx, nodev1alpha1.ControllerCanaryLease, metav1.GetOptions{})
		client.ClearActions()
		if err != nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(at) || ptr.Deref(l.Spec.HolderIdentity, "") != "me" {
			t.Errorf("%s: the stored Lease does not carry the renewal at %s: %+v, %v", when, at.Format(time.StampMilli), l, err)
		}
	}
	renew("no Lease delivered yet", "get", "update")
	delivered, _ := client.CoordinationV1().Leases("ns").Get(ctx, nodev1alpha1.ControllerCanaryLease, metav1.GetOptions{})
	client.ClearActions()
	k.observed(delivered)
	clk.Step(2 * time.Second)
	renew("the Lease delivered", "update")
	clk.Step(2 * time.Second)
	conflicts = 1
	renew("the delivered Lease changed since", "update", "get", "update")
}
