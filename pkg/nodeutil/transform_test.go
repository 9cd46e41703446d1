package nodeutil

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Both components' caches keep what either reads (the controller: taints,
// conditions, boot ID, labels, the list and the boot record; the operator:
// labels, UID, conditions, the list) and nothing that only grows them.
func TestTransformNodeKeepsWhatTheControllerAndTheOperatorRead(t *testing.T) {
	read := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", ResourceVersion: "7",
			Labels: map[string]string{v1.LabelTopologyZone: "z1", "updates.nodehealth.io/managed": "true"},
			Annotations: map[string]string{
				nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"kube-proxy"}]`,
				nodev1alpha1.BootAnnotation:             `{"uid":"uid-1"}`,
			}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "nodehealth.io/not-ready", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}, {Type: "SystemExtensionsReady", Status: v1.ConditionTrue}},
			NodeInfo:   v1.NodeSystemInfo{BootID: "boot-1"},
		},
	}
	full := read.DeepCopy()
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	full.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	full.Status.Images = []v1.ContainerImage{{Names: []string{strings.Repeat("i", 1000)}}}
	full.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	full.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	full.Status.VolumesInUse = []v1.UniqueVolumeName{"v"}
	out, err := TransformNode(full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(read, out.(*v1.Node)); diff != "" {
		t.Errorf("transformed Node (-want +got):\n%s", diff)
	}
	if obj, _ := TransformNode("not a node"); obj != "not a node" {
		t.Errorf("another object was changed: %v", obj)
	}
}

// An oversized boot record leaves a marker that says its size and changes
// with its content.
func TestTransformNodeMarksAnOversizedAnnotation(t *testing.T) {
	mark := func(boot string) string {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{nodev1alpha1.BootAnnotation: boot}}}
		out, _ := TransformNode(n)
		return out.(*v1.Node).Annotations[nodev1alpha1.BootAnnotation]
	}
	a, b := mark(strings.Repeat("a", MaxBootRecordLength+1)), mark(strings.Repeat("b", MaxBootRecordLength+1))
	if size, ok := OversizedLength(a); !ok || size != MaxBootRecordLength+1 {
		t.Errorf("OversizedLength(%q) = %d, %v", a, size, ok)
	}
	if a == b {
		t.Error("two different oversized records left the same marker")
	}
	if _, ok := OversizedLength(mark(`{"uid":"u"}`)); ok {
		t.Error("a record within the limit was marked")
	}
}
