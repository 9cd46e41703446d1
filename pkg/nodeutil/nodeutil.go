// Package nodeutil owns the Node helpers the project's components share, like
// kube-controller-manager's pkg/controller/util/node: the conflict-safe Node
// patch (docs/controller.md "Writes") and taint and condition checks.
package nodeutil

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Nodes is what PatchNode needs: a clientset's CoreV1().Nodes() has it.
type Nodes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
}

// ConflictBackoff bounds PatchNode's retries. A conflict means another writer
// changed the Node between the read and the patch; a fresh read resolves it,
// so attempts follow each other quickly, with jitter so that two racing
// writers fall out of step.
var ConflictBackoff = wait.Backoff{
	Steps:    10,
	Duration: 20 * time.Millisecond,
	Factor:   1.5,
	Jitter:   1.0,
	Cap:      time.Second,
}

// PatchOptions tune PatchNode.
type PatchOptions struct {
	// FieldManager names the writer in managedFields.
	FieldManager string
	// Backoff bounds the retries on conflict; zero means ConflictBackoff.
	Backoff wait.Backoff
	// Start, when set, is the Node the first attempt mutates instead of a
	// fresh GET: a controller's informer copy, so that a write costs one
	// request when the copy is current and one 409 and a GET when it is not.
	// Only a conflict makes PatchNode read the Node itself.
	Start *v1.Node
	// DryRun computes the first attempt's change and returns it unsent: the
	// Node as it would be written, and false.
	DryRun bool
	// OnPatch, when set, is called after every patch sent with the API
	// server's answer (nil when it was written) and whether PatchNode will
	// try again (a conflict with attempts left): the hook for a writer's
	// metrics.
	OnPatch func(err error, retrying bool)
}

// PatchNode is the conflict-safe read-modify-write of a Node's metadata and
// spec: it GETs the Node, lets mutate change a copy, and sends the difference
// as a JSON merge patch that carries the resourceVersion read. Lists (taints:
// listType=atomic) are sent whole, so other writers' taints are never lost
// when nobody wrote in between; and if anybody did, the API server answers 409
// and PatchNode starts over from a fresh GET, calling mutate again — the whole
// change is recomputed from the fresh object on every attempt, never replayed
// from a stale one. Status is not written (it is a subresource).
//
// mutate returns an error to abort (returned as is, not retried): a check of
// the Node it is given, such as its UID, belongs there, so that it applies to
// every fresh read. PatchNode returns the Node as written (or as read when
// mutate changed nothing) and whether it patched.
func PatchNode(ctx context.Context, nodes Nodes, name string, opts PatchOptions, mutate func(node *v1.Node) error) (*v1.Node, bool, error) {
	backoff := opts.Backoff
	if backoff.Steps == 0 {
		backoff = ConflictBackoff
	}
	var (
		result  *v1.Node
		patched bool
	)
	attempts := 0
	err := retry.RetryOnConflict(backoff, func() error {
		attempts++
		node := opts.Start
		if attempts > 1 || node == nil {
			var err error
			if node, err = nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		next := node.DeepCopy()
		if err := mutate(next); err != nil {
			return err
		}
		patch, err := MergePatch(node, next)
		if err != nil {
			return err
		}
		if patch == nil {
			result, patched = node, false
			return nil
		}
		if opts.DryRun {
			result, patched = next, false
			return nil
		}
		result, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: opts.FieldManager})
		patched = err == nil
		if opts.OnPatch != nil {
			opts.OnPatch(err, apierrors.IsConflict(err) && attempts < backoff.Steps)
		}
		return err
	})
	if apierrors.IsConflict(err) {
		return nil, false, fmt.Errorf("node %s kept changing; gave up after %d attempts: %w", name, attempts, err)
	}
	if err != nil {
		return nil, false, err
	}
	return result, patched, nil
}

// MergePatch returns the JSON merge patch from old to new covering metadata
// and spec, carrying old's resourceVersion so that the API server rejects it
// if the Node changed since old was read; nil when nothing differs.
func MergePatch(old, new *v1.Node) ([]byte, error) {
	a, b := old.DeepCopy(), new.DeepCopy()
	a.Status, b.Status = v1.NodeStatus{}, v1.NodeStatus{}
	b.ResourceVersion = a.ResourceVersion
	oldJSON, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(oldJSON, newJSON)
	if err != nil {
		return nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, nil
	}
	meta, _ := patch["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		patch["metadata"] = meta
	}
	meta["resourceVersion"] = old.ResourceVersion
	return json.Marshal(patch)
}

// HasTaint reports whether the node carries a taint with key and effect (any
// effect when effect is empty).
func HasTaint(node *v1.Node, key string, effect v1.TaintEffect) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			return true
		}
	}
	return false
}

// CountTaints returns how many of the node's taints have key, whatever their
// effect: more than the writer's own set means duplicates to repair.
func CountTaints(node *v1.Node, key string) int {
	n := 0
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			n++
		}
	}
	return n
}

// RemoveTaints returns the taints without those with key (any effect), and
// how many were removed. MergePatch turns an emptied list into a null, which
// removes the field.
func RemoveTaints(taints []v1.Taint, key string) ([]v1.Taint, int) {
	out := make([]v1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out, len(taints) - len(out)
}

// Condition returns the node's condition of the type, or nil.
func Condition(node *v1.Node, conditionType v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == conditionType {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// HasCondition reports whether the node has the condition with the status
// (any when empty) and reason (any when empty).
func HasCondition(node *v1.Node, conditionType v1.NodeConditionType, status v1.ConditionStatus, reason string) bool {
	c := Condition(node, conditionType)
	return c != nil && (status == "" || c.Status == status) && (reason == "" || c.Reason == reason)
}

// ConditionChanged reports whether the condition of the type appeared,
// disappeared or changed its status or reason between a and b: what an
// informer's update filter compares, ignoring the heartbeat times and the
// message.
func ConditionChanged(a, b *v1.Node, conditionType v1.NodeConditionType) bool {
	ca, cb := Condition(a, conditionType), Condition(b, conditionType)
	if ca == nil || cb == nil {
		return (ca == nil) != (cb == nil)
	}
	return ca.Status != cb.Status || ca.Reason != cb.Reason
}
