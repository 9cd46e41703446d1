package uninstall

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DeleteMutatingAdmissionPolicyBinding deletes the binding of the
// MutatingAdmissionPolicy that taints Nodes at creation, so that no Node
// created from now on is tainted. A missing binding, or an API server that
// does not serve the kind, is not an error.
func DeleteMutatingAdmissionPolicyBinding(ctx context.Context, client kubernetes.Interface, name string, logf func(format string, args ...interface{})) error {
	err := client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		logf("mutatingadmissionpolicybinding %s: not found", name)
		return nil
	case err != nil:
		return fmt.Errorf("deleting mutatingadmissionpolicybinding %s: %w", name, err)
	}
	logf("mutatingadmissionpolicybinding %s: deleted", name)
	return nil
}

// StopDeployment scales a Deployment to zero replicas through its scale
// subresource and waits until none of its pods is left, terminating ones
// included: a running controller would put back what Uninstall removes. A
// missing Deployment is not an error.
func StopDeployment(ctx context.Context, client kubernetes.Interface, namespace, name string, interval time.Duration, logf func(format string, args ...interface{})) error {
	deployments := client.AppsV1().Deployments(namespace)
	d, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		logf("deployment %s/%s: not found", namespace, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", namespace, name, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", namespace, name, err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		if _, err := deployments.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale"); err != nil {
			return fmt.Errorf("scaling deployment %s/%s to 0: %w", namespace, name, err)
		}
		logf("deployment %s/%s: scaled to 0", namespace, name)
	}
	var left int
	err = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return false, err
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the %d pods of deployment %s/%s to stop: %w", left, namespace, name, err)
	}
	logf("deployment %s/%s: no pod left", namespace, name)
	return nil
}
