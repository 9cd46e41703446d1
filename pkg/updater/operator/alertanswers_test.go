package operator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
)

// soakingShadowNamed is a node one minute into its soak, as soakingShadow.
func soakingShadowNamed(name string) *updatesv1alpha1.BottlerocketShadow {
	s := soakingShadow()
	s.Name = name
	return s
}

// sharingFixture is a policy with an alerts gate on source prom, three
// nodes in their soak and an Idle node the start pass would start.
func sharingFixture(t *testing.T, src AlertSource) *fixture {
	t.Helper()
	return newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"), maxConcurrent(4))},
		[]*v1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3"), mkNode("d")},
		[]*updatesv1alpha1.BottlerocketShadow{soakingShadowNamed("n1"), soakingShadowNamed("n2"), soakingShadowNamed("n3"), mkShadow("d", idle, idle)})
}

// syncAll runs the start pass and the sync of every soaking node.
func (f *fixture) syncAll() {
	f.t.Helper()
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := f.c.syncShadow(f.ctx, n); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := f.c.syncStart(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

// TestThePoliciesSoakingNodesAndItsStartPassShareOneQueryPerRecheck: the
// soaks of three nodes and the start pass, spread over the recheck
// interval, ask the source once; each is woken when that answer expires,
// all at the same moment, and the first to ask then queries again. The
// metrics count the queries made, not the answers used.
func TestThePoliciesSoakingNodesAndItsStartPassShareOneQueryPerRecheck(t *testing.T) {
	src := &fakeSource{alerts: []alertmanager.Alert{alert("Fleet", "severity", "critical")}}
	f := sharingFixture(t, src)
	queries := func() float64 { return testutilCounter(f.c.metrics.AlertQueries.WithLabelValues("prom")) }

	for i, n := range []string{"n1", "n2", "n3"} {
		if err := f.c.syncShadow(f.ctx, n); err != nil {
			t.Fatal(err)
		}
		// Woken when the answer of t0 expires, with the others.
		if got, want := f.timers[n], DefaultGateRecheck-time.Duration(3*i)*time.Second; !slices.Contains(got, want) {
			t.Errorf("%s: timers %v, want the recheck in %s", n, got, want)
		}
		f.clock.Step(3 * time.Second)
	}
	if err := f.c.syncStart(f.ctx); err != nil { // at t0+9s
		t.Fatal(err)
	}
	if got := f.blockedOf("fleet"); !strings.HasPrefix(got, "True/FiringAlerts") {
		t.Errorf("Blocked %s, want True/FiringAlerts", got)
	}
	if timers := f.timers[startKey]; len(timers) == 0 || timers[len(timers)-1] != time.Second {
		t.Errorf("start pass timers %v, want one in 1s, when the answer expires", timers)
	}
	if len(src.asked) != 1 || queries() != 1 {
		t.Fatalf("within the recheck interval: %d queries made, %v counted, want 1", len(src.asked), queries())
	}

	f.clock.Step(time.Second) // t0+10s: the answer expired
	f.syncAll()
	if len(src.asked) != 2 || queries() != 2 {
		t.Errorf("after the answer expired: %d queries made, %v counted, want 2", len(src.asked), queries())
	}
}

// TestASourcesErrorIsSharedAndEveryReaderFailsClosed: one failed query
// pauses every soak and holds every start; the errors metric counts it
// once. The pauses end together, with the first answer after it expired.
func TestASourcesErrorIsSharedAndEveryReaderFailsClosed(t *testing.T) {
	src := &fakeSource{err: errors.New("context deadline exceeded")}
	f := sharingFixture(t, src)
	f.syncAll()
	if len(src.asked) != 1 {
		t.Fatalf("%d queries, want 1", len(src.asked))
	}
	if got := testutilCounter(f.c.metrics.AlertQueryErrors.WithLabelValues("prom")); got != 1 {
		t.Errorf("%v errors counted, want 1", got)
	}
	var paused []string
	for _, a := range f.actions() {
		if strings.Contains(a, "soak-paused-since") {
			paused = append(paused, strings.Fields(a)[1])
		}
	}
	if strings.Join(paused, ",") != "n1,n2,n3" {
		t.Errorf("soaks paused: %v, want n1,n2,n3", paused)
	}
	if got := f.blockedOf("fleet"); !strings.HasPrefix(got, "True/GateUnavailable") {
		t.Errorf("Blocked %s, want True/GateUnavailable", got)
	}

	// The source answers again, but the error holds until it expires.
	src.err = nil
	f.clock.Step(DefaultGateRecheck - time.Second)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 1 {
		t.Errorf("asked again %s after an error: %d queries, want 1", DefaultGateRecheck-time.Second, len(src.asked))
	}
	f.clock.Step(time.Second)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 2 {
		t.Errorf("%d queries once the error expired, want 2", len(src.asked))
	}
}

// TestCallersThatAskWhileAQueryRunsWaitForItsAnswer: a source that
// black-holes its query holds one caller for its timeout, not one per
// caller, and the others get the same answer.
func TestCallersThatAskWhileAQueryRunsWaitForItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var a alertAnswers
		var queries atomic.Int32
		release := make(chan struct{})
		query := func(context.Context) ([]firingAlert, []string) {
			queries.Add(1)
			<-release
			return nil, []string{"querying alert source prom: context deadline exceeded"}
		}
		answers := make(chan *alertAnswer, 3)
		for range 3 {
			go func() { answers <- a.get(t.Context(), "prom", t0, time.Time{}, DefaultGateRecheck, query) }()
			synctest.Wait() // the first runs its query; the others wait for it
		}
		close(release)
		first := <-answers
		for range 2 {
			if got := <-answers; got != first {
				t.Errorf("a caller got an answer of its own: %v, want the shared %v", got.errs, first.errs)
			}
		}
		if n := queries.Load(); n != 1 {
			t.Errorf("%d queries, want 1", n)
		}
	})
}

// TestAQueryWhoseCallerGaveUpIsNotKept: its error is the caller's, not the
// source's; the next caller asks the source.
func TestAQueryWhoseCallerGaveUpIsNotKept(t *testing.T) {
	var a alertAnswers
	var queries int
	query := func(ctx context.Context) ([]firingAlert, []string) {
		queries++
		if ctx.Err() != nil {
			return nil, []string{ctx.Err().Error()}
		}
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.get(ctx, "prom", t0, time.Time{}, DefaultGateRecheck, query)
	if got := a.get(context.Background(), "prom", t0, time.Time{}, DefaultGateRecheck, query); len(got.errs) != 0 || queries != 2 {
		t.Errorf("after a cancelled query: errs %v, %d queries, want none and 2", got.errs, queries)
	}
}

// TestANodePassesItsSoakOnlyOnAnAnswerAskedOnceTheSoakWasOver: an answer
// shared from five seconds before the soak ended misses the alert that
// fired since; the operator asks again, and the alert naming the node
// fails it.
func TestANodePassesItsSoakOnlyOnAnAnswerAskedOnceTheSoakWasOver(t *testing.T) {
	src := &fakeSource{}
	f := newPolicyFixture(t, withSources(defaultOptions(), map[string]AlertSource{"prom": src}),
		[]*updatesv1alpha1.UpdatePolicy{fleet(alertGates("prom"))}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{soakingShadow(since(time.Minute))})
	// The soak (5m from t0-1m) ends at t0+4m, its deadline at t0+19m.
	f.clock.Step(4*time.Minute - 5*time.Second)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	src.alerts = []alertmanager.Alert{alert("NodeDown", "node", "n1")}
	f.clock.Step(5 * time.Second)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle 1.20.0 failed=FiringAlert:"})
	if len(src.asked) != 2 {
		t.Errorf("%d queries, want 2", len(src.asked))
	}
}
