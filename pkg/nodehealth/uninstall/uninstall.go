// Package uninstall removes from every node what the node-health controller
// owns ("nodehealth-controller uninstall"); it stays outside the controller
// package because it runs without the controller.
package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Result counts what Uninstall changed.
type Result struct {
	Nodes, Taints, Annotations, Conditions int
	// Skipped lists nodes whose extension list could not be parsed: their
	// annotation is left for a person to fix or remove.
	Skipped []string
}

// Uninstall removes from every node what the controller owns: the readiness
// taint (both effects), the nodehealth.io/boot record, the
// SystemExtensionsReady condition, every KEP-5683 lifecycle condition whose
// reason is nodehealth's (the eviction's ExtensionFailed, the update
// operator's BottlerocketUpdate and UpdateFailed), and the extension-list
// entries added by
// rules and self-registration (the annotation goes entirely when no manual
// entry is left). Manual entries stay. Run it after stopping the controller,
// or the controller puts everything back. The canary Lease is deleted too.
func Uninstall(ctx context.Context, client kubernetes.Interface, taintKey, leaseNamespace string, logf func(format string, args ...interface{})) (Result, error) {
	var res Result
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("listing nodes: %w", err)
	}
	var errs []error
	for i := range nodes.Items {
		changed, err := uninstallNode(ctx, client, nodes.Items[i].Name, taintKey, leaseNamespace, &res, logf)
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			res.Nodes++
		}
	}
	err = client.CoordinationV1().Leases(leaseNamespace).Delete(ctx, nodev1alpha1.ControllerCanaryLease, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting the canary lease: %w", err))
	}
	return res, errors.Join(errs...)
}

func uninstallNode(ctx context.Context, client kubernetes.Interface, name, taintKey, leaseNamespace string, res *Result, logf func(string, ...interface{})) (bool, error) {
	var (
		taints, annotations int
		skipped             error
	)
	// Recomputed from a fresh read on every attempt: whoever wrote the node
	// in between (a cordon, a manual list entry) keeps what they wrote.
	node, changed, err := nodeutil.PatchNode(ctx, client.CoreV1().Nodes(), name, nodeutil.PatchOptions{}, func(n *v1.Node) error {
		var err error
		taints, annotations, skipped, err = removeOwned(n, taintKey, leaseNamespace)
		return err
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: %w", name, err)
	}
	if changed {
		res.Taints += taints
		res.Annotations += annotations
		logf("node %s: removed %d taints and %d annotations", name, taints, annotations)
	}
	if skipped != nil {
		res.Skipped = append(res.Skipped, name)
		logf("node %s: leaving annotation %s as it is, it cannot be parsed: %v", name, nodev1alpha1.SystemExtensionsAnnotation, skipped)
	}

	if nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil {
		data := []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"$patch":"delete"}]}}`, nodev1alpha1.SystemExtensionsReadyCondition))
		if _, err := client.CoreV1().Nodes().PatchStatus(ctx, name, data); err != nil {
			if apierrors.IsNotFound(err) {
				return changed, nil
			}
			return changed, fmt.Errorf("node %s: removing condition: %w", name, err)
		}
		res.Conditions++
		changed = true
		logf("node %s: removed condition %s", name, nodev1alpha1.SystemExtensionsReadyCondition)
	}
	removed, err := removeLifecycleConditions(ctx, client, node)
	if removed > 0 {
		res.Conditions += removed
		changed = true
	}
	if err != nil {
		return changed, fmt.Errorf("node %s: removing lifecycle conditions: %w", name, err)
	}
	return changed, nil
}

// lifecycleConditionTypes are the KEP-5683 conditions nodehealth writes: the
// controller's eviction two of them, the update operator all four.
var lifecycleConditionTypes = []string{
	nodev1alpha1.LifecycleConditionMaintenancePlanned, nodev1alpha1.LifecycleConditionMaintenanceInProgress,
	nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleConditionDrained,
}

// removeLifecycleConditions removes the KEP-5683 lifecycle conditions whose
// reason is nodehealth's (nodev1alpha1.OwnLifecycleReason), True or False:
// removing is one of the KEP's two ways to clear them, and one left behind
// would name a component that is gone (a True MaintenanceInProgress of a
// halted update would say so forever). Another writer's (an admin's) stay. The patch carries the resourceVersion of the read, so
// that a condition someone else took over meanwhile is never removed: a
// conflict reads the node again.
func removeLifecycleConditions(ctx context.Context, client kubernetes.Interface, node *v1.Node) (int, error) {
	for range 5 {
		var deletes []map[string]string
		for _, kind := range lifecycleConditionTypes {
			if c := nodeutil.Condition(node, v1.NodeConditionType(kind)); c != nil && nodev1alpha1.OwnLifecycleReason(c.Reason) {
				deletes = append(deletes, map[string]string{"type": kind, "$patch": "delete"})
			}
		}
		if len(deletes) == 0 {
			return 0, nil
		}
		data, err := json.Marshal(map[string]interface{}{
			"metadata": map[string]string{"resourceVersion": node.ResourceVersion},
			"status":   map[string]interface{}{"conditions": deletes},
		})
		if err != nil {
			return 0, err
		}
		_, err = client.CoreV1().Nodes().PatchStatus(ctx, node.Name, data)
		switch {
		case err == nil:
			return len(deletes), nil
		case apierrors.IsNotFound(err):
			return 0, nil
		case !apierrors.IsConflict(err):
			return 0, err
		}
		if node, err = client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			return 0, client404(err)
		}
	}
	return 0, errors.New("the node kept changing")
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// removeOwned removes from n the controller's taints, its boot record, and
// the rule and lease entries of the extension list, and says how many taints
// and annotations it changed. An extension list that cannot be parsed is left
// alone and returned as skipped.
func removeOwned(n *v1.Node, taintKey, leaseNamespace string) (taints, annotations int, skipped, err error) {
	if _, ok := n.Annotations[nodev1alpha1.BootAnnotation]; ok {
		delete(n.Annotations, nodev1alpha1.BootAnnotation)
		annotations++
	}
	if value, ok := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok {
		list, decodeErr := nodev1alpha1.DecodeSystemExtensions(value, leaseNamespace)
		if decodeErr != nil {
			skipped = decodeErr
		} else {
			var manual []nodev1alpha1.SystemExtension
			for _, e := range list {
				if e.Source == nodev1alpha1.SourceManual {
					manual = append(manual, e)
				}
			}
			switch {
			case len(manual) == len(list):
			case len(manual) == 0:
				delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation)
				annotations++
			default:
				encoded, err := nodev1alpha1.EncodeSystemExtensions(manual, n.Name, leaseNamespace)
				if err != nil {
					return 0, 0, nil, err
				}
				n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = encoded
				annotations++
			}
		}
	}
	n.Spec.Taints, taints = nodeutil.RemoveTaints(n.Spec.Taints, taintKey)
	return taints, annotations, skipped, nil
}
