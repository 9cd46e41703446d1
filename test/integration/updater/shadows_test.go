package updater_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Shadows follow the selector: created (the node's UID in the node-uid
// annotation, no ownerReference, spec Idle, no status) for matching nodes,
// deleted when the label goes — but only once the node is Idle — and deleted
// by the operator when an Idle node is deleted.
func TestShadowsFollowTheSelectorAndGoOnlyOnceTheirNodeIsIdle(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	env := testenv.Env(t)
	createNodes(t, "life-a", "life-b")
	createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.Paused = true })
	startOperator(t, baseOptions(t))

	s := waitShadow(t, ctx, "life-a", "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })
	node, err := env.Client.CoreV1().Nodes().Get(ctx, "life-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.OwnerReferences) != 0 || s.Annotations[updatesv1alpha1.NodeUIDAnnotation] != string(node.UID) ||
		s.Spec.State != updatesv1alpha1.StateIdle || s.Status.CurrentState != "" {
		t.Errorf("created shadow: owners %v annotations %v spec %+v status %+v", s.OwnerReferences, s.Annotations, s.Spec, s.Status)
	}
	waitShadow(t, ctx, "life-b", "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })

	// The agent reports an update in flight; the label goes: the shadow stays.
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	s.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: updatesv1alpha1.StateMonitoringUpdate, CurrentVersion: newVersion}
	if _, err := c.UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	k, _ := testLabel(t)
	unlabel := []byte(`{"metadata":{"labels":{"` + k + `":null}}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, "life-a", types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = framework.WaitForDeletion[*updatesv1alpha1.BottlerocketShadow](wctx, shadowLW(t, "life-a"), "", "life-a")
	cancel()
	if err == nil {
		t.Fatal("the shadow of a node in flight was deleted")
	}
	// Idle again: now it goes.
	s, err = c.Get(ctx, "life-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Status.CurrentState = updatesv1alpha1.StateIdle
	if _, err := c.UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForDeletion[*updatesv1alpha1.BottlerocketShadow](ctx, shadowLW(t, "life-a"), "", "life-a"); err != nil {
		t.Fatalf("the Idle shadow of an unmanaged node stays: %v", err)
	}

	// An Idle node deleted (a scale-down): the operator deletes its shadow.
	if err := env.DeleteNode(ctx, "life-b"); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForDeletion[*updatesv1alpha1.BottlerocketShadow](ctx, shadowLW(t, "life-b"), "", "life-b"); err != nil {
		t.Fatalf("the shadow of a deleted Idle node stays: %v", err)
	}
}
