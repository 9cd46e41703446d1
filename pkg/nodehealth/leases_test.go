package nodehealth

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// Leases shorter than minimumLeaseDuration are treated as that long.
func TestMinimumLeaseDuration(t *testing.T) {
	opts := testOptions()
	opts.MinimumLeaseDuration = 10 * time.Second
	f := newFixture(t, opts, readyNode("n1"))
	l := lease("kube-proxy", "n1", "holder", f.clock.Now())
	l.Spec.LeaseDurationSeconds = ptr.To[int32](2)
	f.putLease(l)
	f.sync("n1")
	f.clock.Step(19 * time.Second)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("a 2s Lease expired before minimumLeaseDuration + grace")
	}
	f.clock.Step(time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not expired after minimumLeaseDuration + grace")
	}
}

// A renewal observed in the very instant the controller first saw the Lease
// (its start grace) is a change: it ends a dead mark of the boot record, so
// its node must be evaluated again (simulation seed 17032421548992568283,
// where a restarted controller kept a node held whose extension had come
// back).
func TestARenewalInTheInstantOfTheStartGraceIsAChange(t *testing.T) {
	f := newFixture(t, testOptions())
	first := lease("cni", "n1", "holder", t0.Add(-time.Minute))
	if _, next, _, _ := f.c.tracker.observe(first); !next.startGrace {
		t.Fatal("a Lease first seen is not in its start grace")
	}
	renewed := lease("cni", "n1", "holder", t0)
	_, next, known, changed := f.c.tracker.observe(renewed)
	if !known || !changed || next.startGrace {
		t.Fatalf("renewal in the instant of the start grace: known %v, changed %v, startGrace %v; want known, changed, no start grace", known, changed, next.startGrace)
	}
}
