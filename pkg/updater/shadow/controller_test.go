package shadow

import (
	"strings"
	"testing"
	"time"

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

// shadowOf is a shadow as the operator writes it: the Node's UID in the
// node-uid annotation, no ownerReference.
func shadowOf(n *v1.Node, spec, status updatesv1alpha1.ShadowState) *updatesv1alpha1.BottlerocketShadow {
	return &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: "shadow-" + types.UID(n.Name), ResourceVersion: "7",
			Annotations: map[string]string{updatesv1alpha1.NodeUIDAnnotation: string(n.UID)}},
		Spec:   updatesv1alpha1.BottlerocketShadowSpec{State: spec},
		Status: updatesv1alpha1.BottlerocketShadowStatus{CurrentState: status},
	}
}

// ownedShadowOf is a shadow as earlier operators wrote it: owned by its Node.
func ownedShadowOf(n *v1.Node, spec, status updatesv1alpha1.ShadowState) *updatesv1alpha1.BottlerocketShadow {
	s := shadowOf(n, spec, status)
	s.Annotations = nil
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	return s
}

// A managed node gets a shadow; a node that left the managed set loses its
// shadow only once it is at rest: Idle, no lock of the agent's to restore,
// no failure that halts its policy.
func TestSyncCreatesAShadowPerManagedNodeAndDeletesOnlyIdleStrayOnes(t *testing.T) {
	idle, staged, errReset := updatesv1alpha1.StateIdle, updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateErrorReset
	recreated := shadowOf(node("n1", true), idle, idle)
	recreated.Annotations[updatesv1alpha1.NodeUIDAnnotation] = "old-uid"
	recreatedOwned := ownedShadowOf(node("n1", true), idle, idle)
	recreatedOwned.OwnerReferences[0].UID = "old-uid"
	deleting := shadowOf(node("n1", false), idle, idle)
	deleting.DeletionTimestamp = &metav1.Time{}
	// Idle, but the agent has still to restore the lock it pinned over: an
	// abort it has not finished.
	pinned := shadowOf(node("n1", false), idle, idle)
	pinned.Status.PreviousVersionLock = "1.19.0"
	halting := shadowOf(node("n1", false), idle, idle)
	halting.Annotations[updatesv1alpha1.FailedAnnotation] = "2026-01-01T00:00:00Z"
	resumed := halting.DeepCopy()
	resumed.Annotations[updatesv1alpha1.ResumeAnnotation] = "2026-01-01T00:00:00Z"
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
		{name: "unmanaged shadow kept while the agent has a lock to restore", node: node("n1", false), shadow: pinned},
		{name: "unmanaged shadow kept while its failure halts the policy", node: node("n1", false), shadow: halting},
		{name: "unmanaged shadow of a resumed failure deleted", node: node("n1", false), shadow: resumed, want: []string{"delete:n1"}, events: 1},
		{name: "idle shadow of a re-created node deleted", node: node("n1", true), shadow: recreated, want: []string{"delete:n1"}},
		{name: "idle shadow of a re-created node deleted, owned by the earlier node", node: node("n1", true), shadow: recreatedOwned, want: []string{"delete:n1"}},
		{name: "shadow being deleted left alone", node: node("n1", false), shadow: deleting},
		{name: "node gone while idle: deleted", shadow: shadowOf(node("n1", false), idle, idle), want: []string{"delete:n1"}},
		{name: "shadow owned by its node: adopted", node: node("n1", true), shadow: ownedShadowOf(node("n1", true), idle, idle), want: []string{"update:n1"}},
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
			if err := c.Sync(ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			got := actionNames(client.Actions())
			if !equal(got, tc.want) {
				t.Fatalf("actions = %v, want %v", got, tc.want)
			}
			for _, a := range client.Actions() {
				if a.GetVerb() != "create" && a.GetVerb() != "delete" {
					continue
				}
				switch a := a.(type) {
				case clienttesting.CreateAction:
					s := a.GetObject().(*updatesv1alpha1.BottlerocketShadow)
					if s.Spec.State != idle || s.Status.CurrentState != "" || len(s.OwnerReferences) != 0 ||
						s.Annotations[updatesv1alpha1.NodeUIDAnnotation] != string(tc.node.UID) {
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
		case clienttesting.CreateAction: // and UpdateAction
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

// syncOnce runs one sync of node n1 against the given Node (nil: deleted)
// and shadow, and returns the client's write actions and the Events.
func syncOnce(t *testing.T, n *v1.Node, s *updatesv1alpha1.BottlerocketShadow) ([]clienttesting.Action, []string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	if s != nil {
		objs = append(objs, s)
	}
	client := fake.NewSimpleClientset(objs...)
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	sf := externalversions.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(10)
	c, err := NewController(client, kf.Core().V1().Nodes(), sf.Updates().V1alpha1().BottlerocketShadows(), rec, Options{Selector: managedSel})
	if err != nil {
		t.Fatal(err)
	}
	if n != nil {
		_ = kf.Core().V1().Nodes().Informer().GetIndexer().Add(n)
	}
	if s != nil {
		_ = sf.Updates().V1alpha1().BottlerocketShadows().Informer().GetIndexer().Add(s)
	}
	client.ClearActions()
	if err := c.Sync(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	var writes []clienttesting.Action
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a)
		}
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	return writes, events
}

// shadowFor is shadowOf with modifications.
func shadowFor(n *v1.Node, spec, status updatesv1alpha1.ShadowState, mods ...func(*updatesv1alpha1.BottlerocketShadow)) *updatesv1alpha1.BottlerocketShadow {
	s := shadowOf(n, spec, status)
	for _, m := range mods {
		m(s)
	}
	return s
}

func rebootRequested(s *updatesv1alpha1.BottlerocketShadow) {
	s.Status.RebootFromBootID = "boot-0"
	s.Status.RebootRequestedAt = &metav1.Time{Time: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}
}

func failed(value string) func(*updatesv1alpha1.BottlerocketShadow) {
	return func(s *updatesv1alpha1.BottlerocketShadow) {
		s.Spec.State = updatesv1alpha1.StateIdle
		s.Spec.StateTransitionTimestamp = &metav1.Time{Time: time.Date(2026, 3, 2, 10, 5, 0, 0, time.UTC)}
		s.Annotations[updatesv1alpha1.FailedAnnotation] = value
		s.Annotations[updatesv1alpha1.FailureReasonAnnotation] = "NodeDeleted: the node was deleted"
	}
}

func resumed(value string) func(*updatesv1alpha1.BottlerocketShadow) {
	return func(s *updatesv1alpha1.BottlerocketShadow) { s.Annotations[updatesv1alpha1.ResumeAnnotation] = value }
}

// TestShadowsAreNotOwnedByTheirNode: garbage collection would delete the
// shadow of a node deleted mid-update, and with it the record of the failure
// that must halt the rollout (docs/updater.md). The Node's UID goes into an
// annotation instead, and shadows created before lose their ownerReference.
func TestShadowsAreNotOwnedByTheirNode(t *testing.T) {
	n := node("n1", true)
	writes, _ := syncOnce(t, n, nil)
	if len(writes) != 1 || writes[0].GetVerb() != "create" {
		t.Fatalf("actions = %v, want one create", actionNames(writes))
	}
	created := writes[0].(clienttesting.CreateAction).GetObject().(*updatesv1alpha1.BottlerocketShadow)
	if len(created.OwnerReferences) != 0 || created.Annotations[updatesv1alpha1.NodeUIDAnnotation] != string(n.UID) {
		t.Errorf("created shadow: ownerReferences %v, annotations %v; want none and %s=%s",
			created.OwnerReferences, created.Annotations, updatesv1alpha1.NodeUIDAnnotation, n.UID)
	}

	old := ownedShadowOf(n, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate)
	writes, _ = syncOnce(t, n, old)
	if len(writes) != 1 || writes[0].GetVerb() != "update" {
		t.Fatalf("actions = %v, want the shadow of an earlier operator updated", actionNames(writes))
	}
	migrated := writes[0].(clienttesting.UpdateAction).GetObject().(*updatesv1alpha1.BottlerocketShadow)
	if len(migrated.OwnerReferences) != 0 || migrated.Annotations[updatesv1alpha1.NodeUIDAnnotation] != string(n.UID) ||
		migrated.ResourceVersion != old.ResourceVersion || migrated.Spec != old.Spec {
		t.Errorf("migrated shadow = %+v, want no ownerReference, the node-uid annotation, the judged resourceVersion and spec unchanged", migrated.ObjectMeta)
	}
}

// TestTheShadowOfANodeDeletedAfterItsRebootWasRequestedIsKeptUntilResumed:
// autoscalers and node repair delete exactly the nodes a bad release breaks.
// Past the drain, the shadow is the failure's record; before it, deleting
// the node is an ordinary scale-down and frees the slot.
func TestTheShadowOfANodeDeletedAfterItsRebootWasRequestedIsKeptUntilResumed(t *testing.T) {
	n := node("n1", true)
	idle, staged, rebooted, monitoring := updatesv1alpha1.StateIdle, updatesv1alpha1.StateStagedAndPerformedUpdate,
		updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate
	const at = "2026-03-02T10:05:00Z"
	for _, tc := range []struct {
		name   string
		shadow *updatesv1alpha1.BottlerocketShadow
		kept   bool
	}{
		{"idle: deleted", shadowFor(n, idle, idle), false},
		{"staging: deleted", shadowFor(n, staged, idle), false},
		{"drained but the reboot never requested: deleted", shadowFor(n, rebooted, staged), false},
		{"reboot requested, not yet marked failed: kept for the update controller", shadowFor(n, rebooted, staged, rebootRequested), true},
		{"monitoring, not yet marked failed: kept", shadowFor(n, monitoring, monitoring, rebootRequested), true},
		{"marked failed: kept as the halt's record", shadowFor(n, rebooted, staged, rebootRequested, failed(at)), true},
		{"failure resumed: deleted", shadowFor(n, rebooted, staged, rebootRequested, failed(at), resumed(at)), false},
		{"passed its health gate, agent gone before reporting Idle: deleted", shadowFor(n, idle, monitoring, rebootRequested), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes, _ := syncOnce(t, nil, tc.shadow)
			want := []string{"delete:n1"}
			if tc.kept {
				want = nil
			}
			if got := actionNames(writes); !equal(got, want) {
				t.Errorf("actions = %v, want %v", got, want)
			}
		})
	}
}

// TestANodeRecreatedWithTheNameOfAFailedShadowWaitsForTheResume: the orphan
// keeps halting the rollout; the new Node gets no shadow (so it never
// starts) until a resume lets the orphan go.
func TestANodeRecreatedWithTheNameOfAFailedShadowWaitsForTheResume(t *testing.T) {
	gone := node("n1", true)
	recreated := node("n1", true)
	recreated.UID = "uid-n1-again"
	const at = "2026-03-02T10:05:00Z"
	orphan := shadowFor(gone, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, rebootRequested, failed(at))
	writes, events := syncOnce(t, recreated, orphan)
	if len(writes) != 0 {
		t.Errorf("actions = %v, want the orphan kept and no shadow for the new node", actionNames(writes))
	}
	if len(events) != 1 || !strings.Contains(events[0], "resume") {
		t.Errorf("events = %v, want one telling the new node waits for the resume", events)
	}
	writes, _ = syncOnce(t, recreated, shadowFor(gone, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate,
		rebootRequested, failed(at), resumed(at)))
	if got := actionNames(writes); !equal(got, []string{"delete:n1"}) {
		t.Errorf("after the resume: actions = %v, want the orphan deleted", got)
	}
}
