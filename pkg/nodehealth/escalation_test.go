package nodehealth

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// The eviction clock pauses at the instant a blast-radius suspension begins
// and resumes when it ends, whether or not the failing node is synced in
// between: a 10-minute suspension adds 10 minutes to the node's eviction
// time, and nodes that were failing do not all escalate at once on resume
// (docs/controller.md, issue 9 defect 4).
func TestSuspensionPausesTheEvictionClock(t *testing.T) {
	var objs []runtime.Object
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, objs...)
	for _, n := range names {
		f.sync(n)
	}
	escalated := func() bool { return f.c.evictions.Len() > 0 }

	// The healthy nodes renew (a node whose Lease is past its expiry
	// counts as failing as soon as a failure taint or an escalation is
	// decided, synced or not).
	renewHealthy := func(names ...string) {
		for _, n := range names {
			f.renew("kube-proxy", n)
		}
	}
	// a fails at t0+1m: its clock runs.
	f.clock.Step(time.Minute)
	renewHealthy("b", "c", "d", "e", "f")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	// b and c fail at t0+2m: 3 of 6 suspends escalation.
	f.clock.Step(time.Minute)
	renewHealthy("d", "e", "f")
	for _, n := range []string{"b", "c"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("3 of 6 failing at a 50 % threshold did not suspend")
	}
	// a's own timer fires at its original eviction time, during the
	// suspension.
	f.clock.Step(4 * time.Minute)
	f.sync("a")
	if escalated() {
		t.Fatal("escalated while suspended")
	}
	// b and c recover at t0+12m: 10 minutes of suspension.
	f.clock.Step(6 * time.Minute)
	renewHealthy("d", "e", "f")
	for _, n := range []string{"b", "c"} {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); s {
		t.Fatal("still suspended with one failing node")
	}
	f.sync("a")
	if escalated() {
		t.Fatal("a escalated right at the resume: the suspension counted as failure time")
	}
	// a failed for 1 minute before the suspension, so 4 more minutes.
	f.clock.Step(4*time.Minute - time.Second)
	renewHealthy("b", "c", "d", "e", "f")
	f.sync("a")
	if escalated() {
		t.Fatalf("a escalated %s after the resume, before its remaining 4 minutes", 4*time.Minute-time.Second)
	}
	f.clock.Step(time.Second)
	f.sync("a")
	if !escalated() {
		t.Fatal("a did not escalate 5 minutes of failure after it failed, not counting the suspension")
	}
}

// In a dry run the node never holds the condition the controller would
// write; that is not drift, and a steady state counts nothing.
func TestDryRunConditionIsCountedOnTransitionsOnly(t *testing.T) {
	opts := testOptions()
	opts.DryRun = true
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	before := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("condition"))
	for range 3 {
		f.sync("n1")
	}
	if got := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("condition")); got != before {
		t.Fatalf("dry_run_actions_total{condition} grew from %v to %v at steady state", before, got)
	}
}

// A planned release pauses a failing node's eviction clock; it does not reset
// it: when the updater's Lease renews while the other failure remains, the
// clock goes on from the time it had counted. Nothing but an ungate or a
// recovery resets it (docs/controller.md, "Escalation"). The simulation found
// the reset (seed 133, where the gate's restart after an own-view stall left
// the node waiting for renewals, the same pause).
func TestAPlannedReleasePausesTheEvictionClockWithoutResettingIt(t *testing.T) {
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{}
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: true,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("a"), lease("kube-proxy", "a", "holder", t0), lease("updater", "a", "holder", t0))
	f.sync("a")
	escalated := func() bool { return f.c.evictions.Len() > 0 }
	step := func(d time.Duration, renewUpdater bool) {
		f.clock.Step(d)
		if renewUpdater {
			f.renew("updater", "a")
		}
		f.sync("a")
	}

	// kube-proxy fails at t0+1m and its clock counts 2 minutes.
	f.clock.Step(time.Minute)
	f.renew("updater", "a")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	step(2*time.Minute, true)
	// The updater releases for an update: the failures are planned for
	// 10 minutes, and nothing escalates.
	f.release("updater", "a", nodev1alpha1.ReasonUpdating)
	f.sync("a")
	step(10*time.Minute, false)
	if escalated() {
		t.Fatal("escalated while the node's failures were planned")
	}
	// The updater renews; kube-proxy still fails: 3 minutes are left.
	step(0, true)
	step(3*time.Minute-time.Second, true)
	if escalated() {
		t.Fatal("escalated before the failure had counted 5 minutes outside the planned release")
	}
	step(time.Second, true)
	if !escalated() {
		t.Fatal("the planned release reset the eviction clock: no escalation 5 minutes of unplanned failure after it began")
	}
}
