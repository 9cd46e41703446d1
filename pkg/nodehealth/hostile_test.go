package nodehealth

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Hostile input through the API (issue 13, item 8): what anyone allowed to
// write a Lease or a Node chooses must not grow the controller's cache, its
// Events or the condition it writes, and a node that abuses its limits must
// not stop the controller serving the others.

func hugeLease() *coordinationv1.Lease {
	l := lease("kube-proxy", "n1", strings.Repeat("h", 50_000), t0)
	l.Labels["junk"] = "x"
	l.Annotations = map[string]string{
		"junk":                         strings.Repeat("j", 200_000),
		nodev1alpha1.ReasonAnnotation:  strings.Repeat("R", 10_000),
		nodev1alpha1.MessageAnnotation: strings.Repeat("é", 50_000),
	}
	l.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n1"}}
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	return l
}

func TestTransformLeaseKeepsOnlyWhatIsRead(t *testing.T) {
	l := hugeLease()
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	out, err := TransformLease(l.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*coordinationv1.Lease)
	checkLeaseBounded(t, got)
	if got.Labels[nodev1alpha1.RegisterLabel] != "true" || len(got.Labels) != 1 {
		t.Errorf("labels %v, want only the register label", got.Labels)
	}
	if len(got.Annotations) != 2 || got.OwnerReferences != nil || got.ManagedFields != nil {
		t.Errorf("kept annotations %d, ownerReferences %v, managedFields %v", len(got.Annotations), got.OwnerReferences, got.ManagedFields)
	}
	if msg := got.Annotations[nodev1alpha1.MessageAnnotation]; !strings.HasPrefix(msg, "éé") || !strings.Contains(msg, "truncated, 100000 bytes") {
		t.Errorf("message %q: want the start of the message and the original size", msg)
	}
	// Idempotent: a transformed object transformed again is unchanged.
	again, _ := TransformLease(got.DeepCopy())
	if !reflect.DeepEqual(again, got) {
		t.Error("transforming twice changed the Lease")
	}
	// Two long holders that differ only past the cut still differ, so a
	// takeover is still seen.
	other := hugeLease()
	other.Spec.HolderIdentity = ptr.To(strings.Repeat("h", 49_999) + "x")
	o, _ := TransformLease(other)
	if *o.(*coordinationv1.Lease).Spec.HolderIdentity == *got.Spec.HolderIdentity {
		t.Error("two different long holders became equal")
	}
	// A short Lease is left as it is.
	short := lease("kube-proxy", "n1", "holder", t0)
	short.Labels = nil
	s, _ := TransformLease(short.DeepCopy())
	if !reflect.DeepEqual(s, short) {
		t.Errorf("a plain Lease changed: %+v", s)
	}
}

func checkLeaseBounded(t *testing.T, l *coordinationv1.Lease) {
	t.Helper()
	if n := len(l.Annotations[nodev1alpha1.ReasonAnnotation]); n > maxReasonLength {
		t.Errorf("reason kept %d bytes, limit %d", n, maxReasonLength)
	}
	if n := len(l.Annotations[nodev1alpha1.MessageAnnotation]); n > maxMessageLength {
		t.Errorf("message kept %d bytes, limit %d", n, maxMessageLength)
	}
	if h := l.Spec.HolderIdentity; h != nil && len(*h) > maxHolderLength {
		t.Errorf("holder kept %d bytes, limit %d", len(*h), maxHolderLength)
	}
	for k := range l.Annotations {
		if k != nodev1alpha1.ReasonAnnotation && k != nodev1alpha1.MessageAnnotation {
			t.Errorf("annotation %q kept", k)
		}
	}
	for k := range l.Labels {
		if k != nodev1alpha1.RegisterLabel && k != nodev1alpha1.AffectsReadinessLabel {
			t.Errorf("label %q kept", k)
		}
	}
}

func TestTransformNodeKeepsOnlyWhatIsRead(t *testing.T) {
	n := newNode("n1")
	n.Annotations = map[string]string{}
	n.Annotations["junk"] = strings.Repeat("j", 250_000)
	n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = strings.Repeat(" ", 40_000) + "[]"
	n.Annotations[nodev1alpha1.BootAnnotation] = strings.Repeat("b", 10_000)
	out, _ := nodeutil.TransformNode(n.DeepCopy())
	got := out.(*v1.Node)
	if len(got.Annotations) != 2 {
		t.Errorf("annotations %v, want only the list and the boot record", got.Annotations)
	}
	if size, ok := nodeutil.OversizedLength(got.Annotations[nodev1alpha1.SystemExtensionsAnnotation]); !ok || size != 40_002 {
		t.Errorf("list kept as %q, want the oversized marker with size 40002", got.Annotations[nodev1alpha1.SystemExtensionsAnnotation])
	}
	if _, ok := parseBootRecord(got.Annotations[nodev1alpha1.BootAnnotation]); ok {
		t.Error("an oversized boot record parsed")
	}
	if _, err := decodeCachedList(got, testNS); err == nil || !strings.Contains(err.Error(), "40002 bytes, more than the limit of 32768") {
		t.Errorf("decoding the marker: %v, want the size and the limit", err)
	}
	again, _ := nodeutil.TransformNode(got.DeepCopy())
	if !reflect.DeepEqual(again, got) {
		t.Error("transforming twice changed the Node")
	}
	// A valid list at the codec's size limit is kept as it is.
	atLimit := newNode("n2")
	atLimit.Annotations = map[string]string{}
	value := `[{"name":"kube-proxy"}]`
	value += strings.Repeat(" ", nodev1alpha1.MaxSystemExtensionsAnnotationBytes-len(value))
	atLimit.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = value
	kept, _ := nodeutil.TransformNode(atLimit.DeepCopy())
	if kept.(*v1.Node).Annotations[nodev1alpha1.SystemExtensionsAnnotation] != value {
		t.Error("a list at the size limit was not kept")
	}
}

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
	f.c.leaseChanged(klog.FromContext(f.ctx), nil, l.DeepCopy())
	f.sync("n1")
	if f.tainted("n1") || !strings.Contains(f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation], `"x"`) {
		t.Fatalf("after the observation: tainted=%v list=%q", f.tainted("n1"), f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation])
	}
}
