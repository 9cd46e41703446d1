package nodehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Hostile input through the API (issue 13, item 8): what anyone allowed to
// write a Lease or a Node chooses must not grow the controller's cache, its
// Events or the condition it writes, and a node that abuses its limits must
// not stop the controller serving the others.

// A list too large to be valid is reported once and the node keeps its gate
// state; the other nodes are served.
func TestOversizedListReportedKeepsGateState(t *testing.T) {
	bad := readyNode("bad", withTaint, func(n *v1.Node) {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = strings.Repeat(" ", 100_000)
	})
	transformed, _ := nodeutil.TransformNode(bad)
	f := newFixture(t, testOptions(), transformed.(*v1.Node), newNode("good"))
	f.live("good")
	f.sync("bad")
	f.expectWrites("patch nodes/status")
	if c := f.condition("bad"); c.Status != v1.ConditionUnknown || !strings.Contains(c.Message, "100000 bytes, more than the limit of 32768") {
		t.Errorf("condition %+v", c)
	}
	f.expectEvent(EventInvalidExtensionList)
	if !f.tainted("bad") {
		t.Error("the node lost its taint")
	}
	f.sync("good")
	if !f.tainted("good") {
		t.Error("the other node was not served")
	}
}

// Thousands of self-registering Leases for one node are reported once; the
// list holds the oldest registrations up to its limit, the node is still
// evaluated, and the other nodes are served. Once the extra Leases go, the
// list holds the rest.
func TestTooManyRegistrationsReportedOnce(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, readyNode("reg", func(n *v1.Node) { delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation) }),
		newNode("good", func(n *v1.Node) {
			n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"kube-proxy"}]`}
		}))
	f.live("good")
	register := func(i int) *coordinationv1.Lease {
		l := lease(fmt.Sprintf("x%d", i), "reg", "holder", t0)
		l.Labels[nodev1alpha1.RegisterLabel] = "true"
		l.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		f.putLease(l)
		return l
	}
	var leases []*coordinationv1.Lease
	for i := range 1000 {
		leases = append(leases, register(i))
	}
	f.sync("reg")
	f.writes()
	f.expectEvent("936 Leases that self-register")
	list, err := nodev1alpha1.DecodeSystemExtensions(f.node("reg").Annotations[nodev1alpha1.SystemExtensionsAnnotation], testNS)
	if err != nil || len(list) != nodev1alpha1.MaxSystemExtensions {
		t.Fatalf("list: %d entries (%v), want the limit %d", len(list), err, nodev1alpha1.MaxSystemExtensions)
	}
	if c := f.condition("reg"); c.Status != v1.ConditionTrue {
		t.Errorf("the node was not evaluated: condition %+v", c)
	}
	// One more: the count moves, the problem does not; no new report.
	leases = append(leases, register(1000))
	f.sync("reg")
	f.expectWrites()
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("reported again: %v", ev)
	}
	f.sync("good")
	if !f.tainted("good") {
		t.Error("the other node was not served")
	}
	for _, l := range leases[10:] {
		f.deleteLease(l)
	}
	f.sync("reg")
	list, err = nodev1alpha1.DecodeSystemExtensions(f.node("reg").Annotations[nodev1alpha1.SystemExtensionsAnnotation], testNS)
	if err != nil || len(list) != 10 {
		t.Errorf("list after the extra Leases went: %d entries, %v", len(list), err)
	}
}

// A self-registering Lease registers on the node its name names, whatever
// its labels claim: the admission policy checks only the name, so a label is
// no way onto another node.
func TestRegistrationFollowsTheName(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, readyNode("n1", func(n *v1.Node) { delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation) }),
		readyNode("n2", func(n *v1.Node) { delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation) }))
	l := lease("rogue", "n1", "holder", t0)
	l.Labels = map[string]string{nodev1alpha1.RegisterLabel: "true", nodev1alpha1.NodeLabel: "n2"}
	f.putLease(l)
	f.sync("n1")
	f.sync("n2")
	if got := f.node("n2").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != "" {
		t.Errorf("n2's list became %q from a Lease named for n1", got)
	}
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; !strings.Contains(got, `"rogue"`) {
		t.Errorf("n1's list is %q, want the rogue registration", got)
	}
}

// A self-registering Lease the informer has stored but its handler has not
// observed yet (another event of the node is being synced meanwhile) is not
// registered by that sync: it would be judged missing and gate a ready node.
// Found by TestHostileInput, where Leases register by the thousand.
func TestRegistrationWaitsForItsObservation(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, readyNode("n1", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"kube-proxy"}]`
	}), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.writes()
	l := lease("x", "n1", "holder", t0)
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	// In the store, not yet through the handler.
	if err := f.leaseIndexer().Add(l); err != nil {
		t.Fatal(err)
	}
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("a registration not yet observed gated the node")
	}
	// The handler observes it: registered, ready, no gate.
	f.c.leaseChanged(nil, l.DeepCopy())
	f.sync("n1")
	if f.tainted("n1") || !strings.Contains(f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation], `"x"`) {
		t.Fatalf("after the observation: tainted=%v list=%q", f.tainted("n1"), f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation])
	}
}
