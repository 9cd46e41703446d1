package nodehealth

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
)

// process takes one node from the queue as a worker does (processNext), then
// copies the node the API holds into the cache as an informer would.
func (f *fixture) process(want string) {
	f.t.Helper()
	waitForQueue(f.t, f, 1)
	if !f.c.processNext(f.ctx) {
		f.t.Fatal("the queue was shut down")
	}
	f.refresh(want)
}

func (f *fixture) counts() (evaluations, rechecks float64) {
	return testutil.ToFloat64(f.c.metrics.EvaluationsTotal), testutil.ToFloat64(f.c.metrics.TimerRechecks)
}

// The expiry timer of a steady node whose Leases were all renewed quietly since
// moves to the new expiry without a full evaluation; an expiry that did happen
// is still detected at its instant.
func TestTimerRecheckSkipsEvaluationButDetectsExpiry(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1") // t=0: ready; the Lease expires at 50s
	if f.tainted("n1") {
		t.Fatal("ready node tainted")
	}
	if ev, rc := f.counts(); ev != 1 || rc != 0 {
		t.Fatalf("after the first sync: %v evaluations, %v rechecks; want 1, 0", ev, rc)
	}
	f.client.ClearActions()

	// t=10s: a quiet renewal (expiry now 60s). t=50s: the old timer fires.
	f.clock.Step(10 * time.Second)
	f.renew("kube-proxy", "n1")
	f.clock.Step(40 * time.Second)
	f.process("n1")
	if ev, rc := f.counts(); ev != 1 || rc != 1 {
		t.Fatalf("timer of a quietly renewed node: %v evaluations, %v rechecks; want 1, 1", ev, rc)
	}
	f.expectWrites()

	// t=60s: no renewal since 10s. The moved timer fires at the new expiry,
	// the recheck sees it expired, the full evaluation taints.
	f.clock.Step(10 * time.Second)
	f.process("n1")
	if ev, rc := f.counts(); ev != 2 || rc != 1 {
		t.Fatalf("at the expiry: %v evaluations, %v rechecks; want 2, 1", ev, rc)
	}
	if !f.tainted("n1") {
		t.Fatal("node not tainted at the expiry of a quietly renewed Lease")
	}
	if c := f.condition("n1"); c.Status != v1.ConditionFalse {
		t.Fatalf("condition %s, want False", c.Status)
	}
}

// Anything but the node's own timer (here a node update the controller
// cares about) gets a full evaluation even when the node is steady.
func TestTimerRecheckLeavesOtherCausesToAFullEvaluation(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1")
	f.clock.Step(time.Second)
	f.c.enqueue("n1")
	f.process("n1")
	if ev, rc := f.counts(); ev != 2 || rc != 0 {
		t.Fatalf("after an enqueue: %v evaluations, %v rechecks; want 2, 0", ev, rc)
	}
}

// A gated node is never steady: its timer always evaluates, so that the gate's
// own deadlines (ungate, escalation) are never skipped.
func TestTimerRecheckNeverSkipsAGatedNode(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1")
	f.clock.Step(50 * time.Second) // expired: gated, eviction clock running
	f.process("n1")
	if !f.tainted("n1") {
		t.Fatal("not tainted at expiry")
	}
	f.c.mu.Lock()
	steady := f.c.nodes["n1"].steady
	f.c.mu.Unlock()
	if steady {
		t.Fatal("a gated node is marked steady")
	}
	f.clock.Step(5 * time.Minute) // the eviction clock's timer
	f.process("n1")
	if ev, rc := f.counts(); ev != 3 || rc != 0 {
		t.Fatalf("timer of a gated node: %v evaluations, %v rechecks; want 3, 0", ev, rc)
	}
}
