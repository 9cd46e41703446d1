package uninstall

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

const (
	testNS  = "node-extension-lease"
	testKey = nodev1alpha1.DefaultReadinessTaintKey
)

var nodesResource = v1.SchemeGroupVersion.WithResource("nodes")

// ownedNode carries everything the controller writes, plus what others wrote.
func ownedNode(name string, mutate ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: map[string]string{
			nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`,
			nodev1alpha1.BootAnnotation:             `{"bootID":"boot-1"}`,
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: testKey, Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: v1.ConditionTrue, Reason: "ExtensionsReady"}}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func fmtTaints(n *v1.Node) string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, fmt.Sprintf("%s:%s", t.Key, t.Effect))
	}
	return strings.Join(out, ",")
}

func stored(t *testing.T, client *fake.Clientset, name string) *v1.Node {
	t.Helper()
	got, err := client.Tracker().Get(nodesResource, "", name)
	if err != nil {
		t.Fatal(err)
	}
	return got.(*v1.Node)
}

// A writer that cordons the node between Uninstall's read and its patch: the
// patch conflicts, and the retry recomputes from the fresh node, so the
// cordon taint stays.
func TestUninstallRemovesWhatTheControllerOwnsAndRetriesConflicts(t *testing.T) {
	owned := ownedNode("owned", func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints,
			v1.Taint{Key: testKey, Effect: v1.TaintEffectNoExecute},
			v1.Taint{Key: "other", Effect: v1.TaintEffectNoSchedule})
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"gpu"},{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"logs","source":"lease"}]`
	})
	broken := ownedNode("broken", func(n *v1.Node) {
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `not json`}
		n.Spec.Taints = nil
		n.Status.Conditions = nil
	})
	client := fake.NewClientset(owned, broken)
	conflicts := 0
	client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "" && action.(core.PatchAction).GetName() == "owned" && conflicts == 0 {
			conflicts++
			n := stored(t, client, "owned").DeepCopy()
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
			if err := client.Tracker().Update(nodesResource, n, ""); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "owned", nil)
		}
		return false, nil, nil
	})
	res, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if conflicts != 1 {
		t.Fatalf("the conflict reactor ran %d times", conflicts)
	}
	if res.Nodes != 1 || res.Taints != 2 || res.Annotations != 2 || res.Conditions != 1 || len(res.Skipped) != 1 || res.Skipped[0] != "broken" {
		t.Fatalf("result %+v: want 1 node, 2 taints, 2 annotations, 1 condition, broken skipped once", res)
	}
	node := stored(t, client, "owned")
	if got := fmtTaints(node); got != "other:NoSchedule,"+v1.TaintNodeUnschedulable+":NoSchedule" {
		t.Errorf("taints %q: only the others' taints must stay, including the cordon written meanwhile", got)
	}
	if _, ok := node.Annotations[nodev1alpha1.BootAnnotation]; ok {
		t.Error("boot record kept")
	}
	if got := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"gpu"}]` {
		t.Errorf("list %q: only the manual entry must stay", got)
	}
	if nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil {
		t.Error("condition kept")
	}
	if v := stored(t, client, "broken").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; v != "not json" {
		t.Errorf("an unparsable list must be left as it is, got %q", v)
	}
}

func TestUninstallGivesUpOnEndlessConflicts(t *testing.T) {
	client := fake.NewClientset(ownedNode("n1"))
	client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	res, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "node n1 kept changing") {
		t.Fatalf("err = %v: a node that never stops changing must be reported, not counted as uninstalled", err)
	}
	if res.Nodes != 0 || res.Taints != 0 {
		t.Errorf("result %+v counts a node that was not uninstalled", res)
	}
}

// A second run finds nothing to do and writes nothing.
func TestUninstallIsIdempotent(t *testing.T) {
	client := fake.NewClientset(ownedNode("n1"))
	if _, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	res, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf)
	if err != nil || res.Nodes != 0 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("second run wrote: %v", a)
		}
	}
}

func lifecycle(kind, reason string, status v1.ConditionStatus) v1.NodeCondition {
	return v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: status, Reason: reason}
}

func TestUninstallRemovesEveryLifecycleConditionOfNodehealthsAndOnlyThose(t *testing.T) {
	owned := ownedNode("owned", func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions,
			lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonExtensionFailed, v1.ConditionFalse),
			lifecycle(nodev1alpha1.LifecycleConditionDrained, nodev1alpha1.LifecycleReasonExtensionFailed, v1.ConditionTrue),
			lifecycle(nodev1alpha1.LifecycleConditionMaintenanceInProgress, "AdminRequested", v1.ConditionTrue))
	})
	foreign := ownedNode("foreign", func(n *v1.Node) {
		n.Status.Conditions = []v1.NodeCondition{
			lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", v1.ConditionTrue),
			lifecycle(nodev1alpha1.LifecycleConditionDrained, nodev1alpha1.LifecycleReasonBottlerocketUpdate, v1.ConditionTrue)}
	})
	// The update operator's, as a halted update leaves them.
	updated := ownedNode("updated", func(n *v1.Node) {
		n.Status.Conditions = []v1.NodeCondition{
			lifecycle(nodev1alpha1.LifecycleConditionMaintenancePlanned, nodev1alpha1.LifecycleReasonBottlerocketUpdate, v1.ConditionFalse),
			lifecycle(nodev1alpha1.LifecycleConditionMaintenanceInProgress, nodev1alpha1.LifecycleReasonUpdateFailed, v1.ConditionTrue),
			lifecycle(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", v1.ConditionFalse)}
	})
	client := fake.NewClientset(owned, foreign, updated)
	if _, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, name := range []string{"owned", "foreign", "updated"} {
		for _, c := range stored(t, client, name).Status.Conditions {
			got = append(got, name+":"+string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
		}
	}
	want := []string{"owned:MaintenanceInProgress=True/AdminRequested", "foreign:DrainInProgress=True/AdminRequested",
		"updated:DrainInProgress=False/AdminRequested"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("conditions left %q, want %q", got, want)
	}
}
