package shadow

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned/fake"
	"nodehealth.io/client-go/informers/externalversions"
)

var managedSel = labels.SelectorFromSet(labels.Set{updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue})

func node(name string, managed bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}}}
	if managed {
		n.Labels[updatesv1alpha1.ManagedNodeLabel] = updatesv1alpha1.ManagedNodeLabelValue
	}
	return n
}

func shadowOf(n *v1.Node, spec, status updatesv1alpha1.ShadowState) *updatesv1alpha1.BottlerocketShadow {
	return &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: "shadow-" + types.UID(n.Name), ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
		Spec:   updatesv1alpha1.BottlerocketShadowSpec{State: spec},
		Status: updatesv1alpha1.BottlerocketShadowStatus{CurrentState: status},
	}
}

func TestSync(t *testing.T) {
	idle, staged, errReset := updatesv1alpha1.StateIdle, updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateErrorReset
	recreated := shadowOf(node("n1", true), idle, idle)
	recreated.OwnerReferences[0].UID = "old-uid"
	deleting := shadowOf(node("n1", false), idle, idle)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name   string
		node   *v1.Node
		shadow *updatesv1alpha1.BottlerocketShadow
		want   []string // verb:name
		events int
		dryRun bool
	}{
		{name: "managed node without shadow gets one", node: node("n1", true), want: []string{"create:n1"}},
		{name: "dry run writes nothing", node: node("n1", true), dryRun: true},
		{name: "unmanaged node without shadow", node: node("n1", false)},
		{name: "managed node with shadow", node: node("n1", true), shadow: shadowOf(node("n1", true), staged, staged)},
		{name: "unmanaged idle shadow deleted", node: node("n1", false), shadow: shadowOf(node("n1", false), idle, idle), want: []string{"delete:n1"}, events: 1},
		{name: "unmanaged shadow without status deleted", node: node("n1", false), shadow: shadowOf(node("n1", false), idle, ""), want: []string{"delete:n1"}, events: 1},
		{name: "unmanaged shadow kept while spec in flight", node: node("n1", false), shadow: shadowOf(node("n1", false), staged, idle)},
		{name: "unmanaged shadow kept while status in flight", node: node("n1", false), shadow: shadowOf(node("n1", false), idle, updatesv1alpha1.StateMonitoringUpdate)},
		{name: "unmanaged shadow kept while the agent aborts", node: node("n1", false), shadow: shadowOf(node("n1", false), idle, errReset)},
		{name: "shadow of a re-created node deleted", node: node("n1", true), shadow: recreated, want: []string{"delete:n1"}},
		{name: "shadow being deleted left alone", node: node("n1", false), shadow: deleting},
		{name: "node gone: garbage collector's job", shadow: shadowOf(node("n1", false), idle, idle)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := kubefake.NewClientset()
			var objs []runtime.Object
			if tc.shadow != nil {
				objs = append(objs, tc.shadow)
			}
			client := fake.NewSimpleClientset(objs...)
			kf := kubeinformers.NewSharedInformerFactory(kube, 0)
			sf := externalversions.NewSharedInformerFactory(client, 0)
			rec := record.NewFakeRecorder(10)
			c, err := NewController(client, kf.Core().V1().Nodes(), sf.Updates().V1alpha1().BottlerocketShadows(), rec,
				Options{Selector: managedSel, DryRun: tc.dryRun})
			if err != nil {
				t.Fatal(err)
			}
			if tc.node != nil {
				_ = kf.Core().V1().Nodes().Informer().GetIndexer().Add(tc.node)
			}
			if tc.shadow != nil {
				_ = sf.Updates().V1alpha1().BottlerocketShadows().Informer().GetIndexer().Add(tc.shadow)
			}
			client.ClearActions()
			if err := c.sync(ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			got := actionNames(client.Actions())
			if !equal(got, tc.want) {
				t.Fatalf("actions = %v, want %v", got, tc.want)
			}
			for _, a := range client.Actions() {
				switch a := a.(type) {
				case clienttesting.CreateAction:
					s := a.GetObject().(*updatesv1alpha1.BottlerocketShadow)
					if s.Spec.State != idle || s.Status.CurrentState != "" || len(s.OwnerReferences) != 1 ||
						s.OwnerReferences[0].UID != tc.node.UID || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].BlockOwnerDeletion != nil {
						t.Errorf("created shadow = %+v", s)
					}
				case clienttesting.DeleteActionImpl:
					p := a.DeleteOptions.Preconditions
					if p == nil || *p.UID != tc.shadow.UID || *p.ResourceVersion != tc.shadow.ResourceVersion {
						t.Errorf("delete preconditions = %+v, want the judged UID and resourceVersion", p)
					}
				}
			}
			if len(rec.Events) != tc.events {
				t.Errorf("events = %d, want %d", len(rec.Events), tc.events)
			}
		})
	}
}

func actionNames(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.CreateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+":"+name)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
