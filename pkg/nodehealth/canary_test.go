package nodehealth

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
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
	if late := got.at.Sub(start) - staleAfterIntervals*interval; late < 0 || late > 2*step {
		t.Errorf("guard fired %s after start, want %s (+ one step)", got.at.Sub(start), staleAfterIntervals*interval)
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
