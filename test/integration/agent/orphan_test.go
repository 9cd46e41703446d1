package agent_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	operatorsetup "nodehealth.io/nodehealth/internal/setup/operator"
	"nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// startOperatorAs runs the update operator's shadow and update controllers
// in-process, for the rest of the test, with cfg's identity and on the nodes
// labelled selector.
func startOperatorAs(t *testing.T, cfg func() (kubernetes.Interface, versioned.Interface), selector labels.Selector) {
	t.Helper()
	kube, client := cfg()
	inprocess.StartOperator(t, operatorsetup.Clients{Kube: kube, Updates: client}, operator.Options{
		Selector: selector,
		Deadlines: operator.Deadlines{StagedAndPerformedUpdate: time.Minute, RebootedIntoUpdate: time.Minute,
			MonitoringUpdate: time.Minute, ReturnToIdle: time.Minute},
	}, 1)
}

// A node deleted mid-update leaves a shadow the operator marks failed; once
// that failure is resumed the operator deletes it, though its status still
// says MonitoringUpdate (no agent is left to bring it back to Idle). The
// admission policy recognises the operator by its ServiceAccount, so the
// deletion goes through within seconds; a kubelet, a system: user too, is
// refused the same deletion.
func TestTheOperatorDeletesTheResumedOrphanOfANodeDeletedMidUpdateAndAKubeletMayNot(t *testing.T) {
	installAgent(t)
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	if err := env.InstallUpdateOperatorRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	const node = "orphan-mid-update"
	nodeLabels := map[string]string{"agent-it/test": "orphan"}
	for k, v := range managedLabels {
		nodeLabels[k] = v
	}
	testenv.CreateNode(t, node, nodeLabels)
	createShadow(t, node)
	t.Cleanup(func() {
		// Moved to rest first, so that the admin's deletion is allowed.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
		if s, err := c.Get(ctx, node, metav1.GetOptions{}); err == nil {
			s.Spec = updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle}
			if s, err = c.Update(ctx, s, metav1.UpdateOptions{}); err == nil {
				s.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: updatesv1alpha1.StateIdle}
				_, _ = c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
			}
		}
		if err := framework.RemoveShadow(ctx, shadows(t), node); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	setSpec(t, node, updatesv1alpha1.StateMonitoringUpdate, "1.21.0")
	setShadowStatus(t, node, updatesv1alpha1.StateMonitoringUpdate, "")

	// The kubelet of the node (system:masters only to get past RBAC: the
	// admission policy is what is tested). The policy is loaded through an
	// informer; wait until it denies.
	kubelet := impersonating(t, "system:node:"+node).UpdatesV1alpha1().BottlerocketShadows()
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		// Allowed until the API server's policy informer has the policy
		// (CI met that once); allowed to the end is the failure.
		err = kubelet.Delete(ctx, node, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), nil
	}); werr != nil {
		if err == nil {
			t.Fatalf("a kubelet (system:node:%s) may delete a shadow mid-update, for %s", node, waitTimeout)
		}
		t.Fatalf("the admission policy was never enforced: %v (last: %v)", werr, err)
	}

	operatorCfg := framework.AsUpdateOperator(env.Config)
	startOperatorAs(t, func() (kubernetes.Interface, versioned.Interface) {
		return kubernetes.NewForConfigOrDie(operatorCfg), versioned.NewForConfigOrDie(operatorCfg)
	}, labels.SelectorFromSet(labels.Set{"agent-it/test": "orphan"}))

	if err := env.DeleteNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	s := waitShadow(t, node, "marked failed by the operator", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return updatesv1alpha1.Halting(s.Annotations)
	})
	if s.Status.CurrentState != updatesv1alpha1.StateMonitoringUpdate {
		t.Fatalf("the orphan's status is %q, want MonitoringUpdate: no agent is left to change it", s.Status.CurrentState)
	}
	annotateShadow(t, node, map[string]string{updatesv1alpha1.ResumeAnnotation: s.Annotations[updatesv1alpha1.FailedAnnotation]})

	// The shadow controller deletes the orphan as soon as it sees the
	// resume; a refused deletion would be retried with a growing back-off
	// and the shadow would stay.
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	if werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = c.Get(ctx, node, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); werr != nil {
		t.Fatalf("the resumed orphan %s is still there: %v (last get: %v)", node, werr, err)
	}
}
