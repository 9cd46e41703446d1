package nodehealth

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

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
