package nodehealth

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// twoExtensions lists a manual cni next to the rule's kube-proxy.
func twoExtensions(n *v1.Node) {
	n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"cni"},{"name":"kube-proxy","source":"rule/kube-proxy"}]`
}

func (f *fixture) state(name string) nodeState {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return *f.c.nodes[name]
}

// After a failure gate, only the extensions that failed must renew: the
// node is ungated at the returning extension's first renewal, not at the
// next renewal of every other extension (docs/controller.md gate scope).
func TestFailureGateUngatesOnTheFailedExtensionsRenewal(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.clock.Step(5 * time.Second)
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated by the release")
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after the failed extension renewed: kube-proxy never stopped renewing and must not have to renew again")
	}
}

// An extension added to the list during a failure gate is in its scope.
func TestFailureGateScopeIncludesExtensionsAddedDuringIt(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	f.putLease(lease("cni", "n1", "holder", f.clock.Now()))
	f.updateNode("n1", twoExtensions)
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated before the extension added during the gate renewed")
	}
	f.renew("cni", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after every extension in scope renewed")
	}
}

// A gate found at a start is full, also once an extension's failure
// becomes its reason: ControllerStarted turning into ExtensionsNotReady must
// not let the node go on the failed extension's renewal alone.
func TestFoundGatedStaysFullWhenItsReasonChanges(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions, withTaint),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("reason %q, want %q", c.Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("a gate found at start ungated without a fresh renewal of kube-proxy")
	}
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("still gated after every extension renewed")
	}
}

// A reboot during a failure gate restarts it as full.
func TestRebootDuringAFailureGateMakesItFull(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("cni", "n1", "Crash")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	if st := f.state("n1"); st.cause != causeRebooted || !st.full {
		t.Fatalf("after a reboot during a failure gate: cause %q full %v, want %q and full", st.cause, st.full, causeRebooted)
	}
	f.clock.Step(time.Second)
	f.renew("cni", "n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated after a reboot without kube-proxy renewing")
	}
}

// While a gate includes a planned release, the node's other failures are
// planned too: kube-proxy expiring while the updater reboots the node
// starts no eviction clock and does not count for the blast radius.
func TestPlannedReleaseMakesTheNodesOtherFailuresPlanned(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", twoExtensions),
		lease("cni", "n1", "holder", t0), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.release("cni", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	f.clock.Step(time.Minute)
	f.sync("n1") // kube-proxy expired
	st := f.state("n1")
	if st.failing {
		t.Fatal("an expiry during a planned gate counts as a failure")
	}
	if c := f.condition("n1"); c.Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Errorf("reason %q, want %q", c.Reason, nodev1alpha1.ReasonPlannedMaintenance)
	}
	f.clock.Step(10 * time.Minute)
	f.sync("n1")
	if f.c.evictions.Len() != 0 {
		t.Fatal("escalated a planned gate")
	}
	// The planned Lease renews: kube-proxy's failure is a failure again.
	f.renew("cni", "n1")
	f.sync("n1")
	if st := f.state("n1"); !st.failing {
		t.Fatal("kube-proxy still not ready after the planned Lease renewed, and not failing")
	}
}
