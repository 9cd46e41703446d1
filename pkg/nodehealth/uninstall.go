package nodehealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// UninstallResult counts what Uninstall changed.
type UninstallResult struct {
	Nodes, Taints, Annotations, Conditions int
	// Skipped lists nodes whose extension list could not be parsed: their
	// annotation is left for a person to fix or remove.
	Skipped []string
}

// Uninstall removes from every node what the controller owns: the readiness
// taint (both effects), the nodehealth.io/boot record, the
// SystemExtensionsReady condition, and the extension-list entries added by
// rules and self-registration (the annotation goes entirely when no manual
// entry is left). Manual entries stay. Run it after stopping the controller,
// or the controller puts everything back. The canary Lease is deleted too.
func Uninstall(ctx context.Context, client kubernetes.Interface, taintKey, leaseNamespace string, logf func(format string, args ...interface{})) (UninstallResult, error) {
	var res UninstallResult
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

func uninstallNode(ctx context.Context, client kubernetes.Interface, name, taintKey, leaseNamespace string, res *UninstallResult, logf func(string, ...interface{})) (bool, error) {
	changed := false
	for attempt := 0; attempt <= maxConflictRetries; attempt++ {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return changed, nil
		}
		if err != nil {
			return changed, err
		}
		annotations := map[string]*string{}
		if _, ok := node.Annotations[nodev1alpha1.BootAnnotation]; ok {
			annotations[nodev1alpha1.BootAnnotation] = nil
		}
		if value, ok := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok {
			list, err := nodev1alpha1.DecodeSystemExtensions(value, leaseNamespace)
			if err != nil {
				res.Skipped = append(res.Skipped, name)
				logf("node %s: leaving annotation %s as it is, it cannot be parsed: %v", name, nodev1alpha1.SystemExtensionsAnnotation, err)
			} else {
				var manual []nodev1alpha1.SystemExtension
				for _, e := range list {
					if e.Source == nodev1alpha1.SourceManual {
						manual = append(manual, e)
					}
				}
				if len(manual) != len(list) {
					if len(manual) == 0 {
						annotations[nodev1alpha1.SystemExtensionsAnnotation] = nil
					} else {
						encoded, err := nodev1alpha1.EncodeSystemExtensions(manual, name, leaseNamespace)
						if err != nil {
							return changed, err
						}
						annotations[nodev1alpha1.SystemExtensionsAnnotation] = &encoded
					}
				}
			}
		}
		var taints []v1.Taint
		removed := 0
		for _, t := range node.Spec.Taints {
			if t.Key == taintKey {
				removed++
				continue
			}
			taints = append(taints, t)
		}
		if len(annotations) == 0 && removed == 0 {
			break
		}
		patch := map[string]interface{}{"metadata": map[string]interface{}{"resourceVersion": node.ResourceVersion, "annotations": annotations}}
		if removed > 0 {
			if taints == nil {
				taints = []v1.Taint{}
			}
			patch["spec"] = map[string]interface{}{"taints": taints}
		}
		data, _ := json.Marshal(patch)
		_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return changed, fmt.Errorf("node %s: %w", name, err)
		}
		changed = true
		res.Taints += removed
		res.Annotations += len(annotations)
		logf("node %s: removed %d taints and %d annotations", name, removed, len(annotations))
		break
	}

	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return changed, client404(err)
	}
	if hasCondition(node) {
		data := []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"$patch":"delete"}]}}`, nodev1alpha1.SystemExtensionsReadyCondition))
		if _, err := client.CoreV1().Nodes().PatchStatus(ctx, name, data); err != nil {
			return changed, fmt.Errorf("node %s: removing condition: %w", name, err)
		}
		res.Conditions++
		changed = true
		logf("node %s: removed condition %s", name, nodev1alpha1.SystemExtensionsReadyCondition)
	}
	return changed, nil
}
