package nodehealth

import (
	"testing"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// A configuration change restarts the controller with the new options. A
// change of a rule's failurePolicy from Ungate to KeepGated decides the
// startup timeouts that pass from then on: an extension that already failed
// open in this boot (the boot record names it) keeps its node in service
// until it renews, rather than re-tainting a node the old policy ungated.
func TestAFailOpenOfThisBootOutlivesARestartThatChangedItsPolicyToKeepGated(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].StartupTimeout = time.Minute
	opts.Rules[0].FailurePolicy = FailurePolicyUngate
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("Ungate kept the node gated")
	}

	edited := testOptions()
	edited.Rules[0].StartupTimeout = time.Minute
	edited.Rules[0].FailurePolicy = FailurePolicyKeepGated
	g := f.restart(edited)
	g.sync("n1")
	if g.tainted("n1") {
		t.Fatalf("the controller restarted with failurePolicy KeepGated tainted a node its extension's fail-open of this boot released: %s", fmtTaints(g.node("n1")))
	}
	if c := g.condition("n1"); c.Reason != nodev1alpha1.ReasonExtensionsFailedOpen {
		t.Fatalf("condition %s/%s, want the fail-open still reported (%s)", c.Status, c.Reason, nodev1alpha1.ReasonExtensionsFailedOpen)
	}
}
