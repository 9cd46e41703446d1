package nodehealth

import (
	"testing"
	"time"
)

// A renewal of a Lease that stays ready, on a node that is not gated, changes
// nothing: it does not queue the node. The node's expiry timer still re-evaluates
// it, and a Lease that then stops renewing is detected at its expiry.
func TestQuietRenewalDoesNotQueueButExpiryIsDetected(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	key, _ := f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if f.tainted("n1") {
		t.Fatal("ready node tainted")
	}

	// t=10s: a quiet renewal (the Lease now expires at 60s).
	f.clock.Step(10 * time.Second)
	f.renew("kube-proxy", "n1")
	if got := f.c.queue.Len(); got != 0 {
		t.Fatalf("a renewal of a ready Lease on an ungated node queued %d items", got)
	}

	// t=50s: the timer of the first observation fires; the node is still ready.
	f.clock.Step(40 * time.Second)
	waitForQueue(t, f, 1)
	key, _ = f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if f.tainted("n1") {
		t.Fatal("node tainted although its Lease was renewed 40s ago")
	}
	f.expectWrites()

	// t=60s: no renewal since 10s: expired, tainted.
	f.clock.Step(10 * time.Second)
	waitForQueue(t, f, 1)
	key, _ = f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if !f.tainted("n1") {
		t.Fatal("node not tainted at the expiry of a quietly renewed Lease")
	}

	// While gated, a renewal is not quiet: it queues the node for the ungate.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if got := f.c.queue.Len(); got != 1 {
		t.Fatalf("a renewal on a gated node queued %d items, want 1", got)
	}
}
