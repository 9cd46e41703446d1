package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned/fake"
)

// startLane gives the fixture's controller a start client that forwards to
// the fixture's API and records what went through it.
func startLane(f *fixture) *fake.Clientset {
	lane := &fake.Clientset{}
	lane.AddReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := f.client.Invokes(a, nil)
		return true, obj, err
	})
	f.c.startClient = lane
	return lane
}

// TestAHandOffGoesThroughTheStartClientAndItsCountsAfterTheStart: a start
// pass and a success hand a slot from one node to the next; in a rollout at
// its limit every per-node write waits for the client's rate limit, so the
// pass and the success use a client of their own, and a pass that only
// changes the policy's counts writes them after its starts (a new
// generation is still observed first, so no start decided on it precedes
// its record).
func TestAHandOffGoesThroughTheStartClientAndItsCountsAfterTheStart(t *testing.T) {
	observed := func(p *updatesv1alpha1.UpdatePolicy) { p.Status.ObservedGeneration = p.Generation }
	for _, tc := range []struct {
		name   string
		policy *updatesv1alpha1.UpdatePolicy
		want   []string
	}{
		{"a generation already observed: the counts follow the start", fleet(observed),
			[]string{"list", "list policies", "update a StagedAndPerformedUpdate 1.20.0", "status fleet"}},
		{"a new generation: observed before the start", fleet(),
			[]string{"status fleet", "list", "list policies", "update a StagedAndPerformedUpdate 1.20.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{tc.policy}, []*v1.Node{mkNode("a")},
				[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
			lane := startLane(f)
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.render(lane.Actions())); diff != "" {
				t.Errorf("start client (-want +got):\n%s", diff)
			}
			if got := f.render(f.client.Actions()); len(got) != len(tc.want) {
				t.Errorf("every call of the pass %v, want only the start client's", got)
			}
		})
	}
}

// TestASuccessGoesThroughTheStartClientAndAnAdvanceDoesNot: the success's
// record and its return to Idle free the slot the next start takes; the
// advances of a node's update are per-node writes on the controller's
// client.
func TestASuccessGoesThroughTheStartClientAndAnAdvanceDoesNot(t *testing.T) {
	done := mkShadow("n1", monitor, monitor, running(newV), since(7*time.Minute),
		annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-6*time.Minute).Format(time.RFC3339)), startedBy("fleet"))
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet()}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{done})
	lane := startLane(f)
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"record-success fleet " + t0.UTC().Format(time.RFC3339), "update n1 Idle"}
	if diff := cmp.Diff(want, f.render(lane.Actions())); diff != "" {
		t.Errorf("start client (-want +got):\n%s", diff)
	}

	advancing := mkShadow("n2", staged, staged, running(oldV), startedBy("fleet"))
	f = newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet()}, []*v1.Node{mkNode("n2")},
		[]*updatesv1alpha1.BottlerocketShadow{advancing})
	lane = startLane(f)
	if err := f.c.syncShadow(f.ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if got := f.render(lane.Actions()); len(got) != 0 {
		t.Errorf("an advance went through the start client: %v", got)
	}
	if got := f.actions(); len(got) != 1 {
		t.Errorf("an advance wrote %v, want one spec write on the controller's client", got)
	}
}

// TestTheStartPassWaitsBehindNoNodeKey: a shadow's change queues its node's
// sync and the start pass; the pass has a queue (and a worker) of its own,
// so in a rollout at its limit it does not wait for every node key ahead of
// it, each waiting for the client's rate limit.
func TestTheStartPassWaitsBehindNoNodeKey(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a"), mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", staged, staged), mkShadow("b", idle, idle)})
	f.c.enqueueShadow(mkShadow("a", staged, staged))
	f.c.enqueueShadow(mkShadow("b", idle, idle))
	if got := f.c.queue.Len(); got != 2 {
		t.Errorf("node queue holds %d keys, want a and b", got)
	}
	if key, _ := f.c.startQueue.Get(); key != startKey || f.c.startQueue.Len() != 0 {
		t.Errorf("start queue's first key %q and %d more, want the start pass alone", key, f.c.startQueue.Len())
	}
}
