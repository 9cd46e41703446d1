package nodehealth

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func TestUninstallRemovesWhatTheControllerOwnsAndRetriesConflicts(t *testing.T) {
	owned := readyNode("owned", withTaint, func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints,
			v1.Taint{Key: testKey, Effect: v1.TaintEffectNoExecute},
			v1.Taint{Key: "other", Effect: v1.TaintEffectNoSchedule})
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"gpu"},{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"logs","source":"lease"}]`
	})
	broken := readyNode("broken", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `not json`
		n.Status.Conditions = nil
	})
	client := fake.NewClientset(owned, broken)
	conflicts := 0
	client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "" && conflicts == 0 {
			conflicts++
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
	if res.Taints != 2 || res.Conditions != 1 || len(res.Skipped) != 1 || res.Skipped[0] != "broken" {
		t.Fatalf("result %+v: want 2 taints, 1 condition, broken skipped once", res)
	}
	got, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "owned")
	if err != nil {
		t.Fatal(err)
	}
	node := got.(*v1.Node)
	if fmtTaints(node) != "other:NoSchedule" {
		t.Errorf("taints %q: only the other taint must stay", fmtTaints(node))
	}
	if _, ok := node.Annotations[nodev1alpha1.BootAnnotation]; ok {
		t.Error("boot record kept")
	}
	if got := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"gpu"}]` {
		t.Errorf("list %q: only the manual entry must stay", got)
	}
	if hasCondition(node) {
		t.Error("condition kept")
	}
	got, _ = client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "broken")
	if v := got.(*v1.Node).Annotations[nodev1alpha1.SystemExtensionsAnnotation]; v != "not json" {
		t.Errorf("an unparsable list must be left as it is, got %q", v)
	}
}

func TestUninstallGivesUpOnEndlessConflicts(t *testing.T) {
	client := fake.NewClientset(readyNode("n1", withTaint))
	client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	if _, err := Uninstall(context.Background(), client, testKey, testNS, t.Logf); err == nil {
		t.Fatal("a node that never stops changing must be reported, not counted as uninstalled")
	}
}
