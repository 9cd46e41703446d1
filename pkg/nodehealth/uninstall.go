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
	"k8s.io/client-go/util/retry"

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
	var skipped error
	// A resourceVersion-guarded patch, recomputed on a fresh read whenever
	// someone else wrote the node in between.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var u ownedByController
		u, skipped, err = ownedParts(node, taintKey, leaseNamespace)
		if err != nil || u.empty() {
			return err
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, u.patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		changed = true
		res.Taints += u.taints
		res.Annotations += u.annotations
		logf("node %s: removed %d taints and %d annotations", name, u.taints, u.annotations)
		return nil
	})
	if apierrors.IsNotFound(err) {
		return changed, nil
	}
	if err != nil {
		return changed, fmt.Errorf("node %s: %w", name, err)
	}
	if skipped != nil {
		res.Skipped = append(res.Skipped, name)
		logf("node %s: leaving annotation %s as it is, it cannot be parsed: %v", name, nodev1alpha1.SystemExtensionsAnnotation, skipped)
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

// ownedByController is what Uninstall removes from one node, as a merge patch
// guarded by the resourceVersion it was computed from.
type ownedByController struct {
	patch               []byte
	taints, annotations int
}

func (u ownedByController) empty() bool { return u.taints == 0 && u.annotations == 0 }

// ownedParts computes the patch that removes the controller's taints, its
// boot record, and the rule and lease entries of the extension list. An
// extension list that cannot be parsed is left alone and returned as skipped.
func ownedParts(node *v1.Node, taintKey, leaseNamespace string) (u ownedByController, skipped, err error) {
	annotations := map[string]*string{}
	if _, ok := node.Annotations[nodev1alpha1.BootAnnotation]; ok {
		annotations[nodev1alpha1.BootAnnotation] = nil
	}
	if value, ok := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok {
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
				annotations[nodev1alpha1.SystemExtensionsAnnotation] = nil
			default:
				encoded, err := nodev1alpha1.EncodeSystemExtensions(manual, node.Name, leaseNamespace)
				if err != nil {
					return u, nil, err
				}
				annotations[nodev1alpha1.SystemExtensionsAnnotation] = &encoded
			}
		}
	}
	taints := []v1.Taint{}
	for _, t := range node.Spec.Taints {
		if t.Key == taintKey {
			u.taints++
			continue
		}
		taints = append(taints, t)
	}
	u.annotations = len(annotations)
	if u.empty() {
		return u, skipped, nil
	}
	patch := map[string]interface{}{"metadata": map[string]interface{}{"resourceVersion": node.ResourceVersion, "annotations": annotations}}
	if u.taints > 0 {
		patch["spec"] = map[string]interface{}{"taints": taints}
	}
	u.patch, err = json.Marshal(patch)
	return u, skipped, err
}
