package nodehealth

import (
	"reflect"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

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
