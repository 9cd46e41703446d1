package nodehealth

// This file holds the extension list a node should carry: rules and self-
// registrations merged, the cached list decoded, an invalid list reported.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// desiredList returns the extension list rules and registrations want on a
// node whose current list is current, and the annotation value to write (nil
// when the list is already right).
func (c *Controller) desiredList(node *v1.Node, current []nodev1alpha1.SystemExtension) ([]nodev1alpha1.SystemExtension, *string, error) {
	name := node.Name
	desired, dropped := desiredExtensions(current, node, c.opts.Rules, c.registrations(name), c.opts.LeaseNamespace)
	c.reportDroppedRegistrations(node, dropped)
	if equalLists(desired, current, name, c.opts.LeaseNamespace) {
		return desired, nil, nil
	}
	encoded, err := nodev1alpha1.EncodeSystemExtensions(desired, name, c.opts.LeaseNamespace)
	if err != nil {
		return nil, nil, fmt.Errorf("the list the rules and registrations ask for cannot be written: %w", err)
	}
	if len(desired) == 0 {
		encoded = ""
	}
	return desired, &encoded, nil
}

// reportDroppedRegistrations says, once, that more extensions
// register on a node than its list holds: the node is still evaluated with
// the oldest registrations, and the others are named.
func (c *Controller) reportDroppedRegistrations(node *v1.Node, dropped []string) {
	c.mu.Lock()
	before := c.droppedRegistrations[node.Name]
	if len(dropped) == 0 {
		delete(c.droppedRegistrations, node.Name)
	} else {
		c.droppedRegistrations[node.Name] = len(dropped)
	}
	c.mu.Unlock()
	if len(dropped) == 0 || before > 0 {
		// Said when it begins, not again as the count moves with every
		// Lease an overflowing node gains.
		return
	}
	shown := dropped
	if len(shown) > 5 {
		shown = shown[:5]
	}
	klog.Background().Info("More extensions self-register on the node than its list holds; keeping the oldest registrations",
		"node", node.Name, "limit", nodev1alpha1.MaxSystemExtensions, "ignored", len(dropped), "examples", shown)
	if c.opts.DryRun {
		return
	}
	c.recorder.Eventf(node, v1.EventTypeWarning, EventTooManyRegistrations,
		"%d Leases that self-register (label %s=true) do not fit in the node's list of at most %d entries and are ignored (oldest registrations kept), e.g. %s; delete the extra Leases",
		len(dropped), nodev1alpha1.RegisterLabel, nodev1alpha1.MaxSystemExtensions, strings.Join(shown, ", "))
}

// listFor computes the annotation value to write on node (nil: none) from the
// node itself, so that a write retried on a fresh read keeps the entries
// other writers added since the cached read.
func (c *Controller) listFor(node *v1.Node) (*string, error) {
	current, err := nodev1alpha1.DecodeSystemExtensions(node.Annotations[nodev1alpha1.SystemExtensionsAnnotation], c.opts.LeaseNamespace)
	if err != nil {
		// Someone wrote an invalid list meanwhile: never rewrite it; the
		// node's next sync reports it.
		return nil, fmt.Errorf("the extension list of node %s became invalid while writing it: %w", node.Name, err)
	}
	_, value, err := c.desiredList(node, current)
	return value, err
}

// listBuildError says that a node's list parses but the list rules and
// registrations ask for cannot be built; kind tells the problems apart so
// that each is reported once, however the counts in its message move.
type listBuildError struct {
	kind string
	err  error
}

func (e listBuildError) Error() string { return e.err.Error() }

func (e listBuildError) Unwrap() error { return e.err }

// decodeCachedList decodes the extension list of a Node from the informer
// cache, where nodeutil.TransformNode left a marker in place of an oversized value.
func decodeCachedList(node *v1.Node, namespace string) ([]nodev1alpha1.SystemExtension, error) {
	value := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
	if size, ok := nodeutil.OversizedLength(value); ok {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than the limit of %d",
			nodev1alpha1.SystemExtensionsAnnotation, size, nodev1alpha1.MaxSystemExtensionsAnnotationBytes)
	}
	return nodev1alpha1.DecodeSystemExtensions(value, namespace)
}

// registrations lists the extensions that self-register on a node.
func (c *Controller) registrations(node string) []registration {
	objs, err := c.leaseIndexer.ByIndex(leaseNodeIndex, node)
	if err != nil {
		return nil
	}
	var out []registration
	for _, obj := range objs {
		lease, ok := obj.(*coordinationv1.Lease)
		if !ok || lease.Labels[nodev1alpha1.RegisterLabel] != "true" || lease.DeletionTimestamp != nil {
			continue
		}
		ext, _, err := nodev1alpha1.ParseLeaseName(lease.Name)
		if err != nil {
			continue
		}
		if _, observed := c.tracker.get(lease.Namespace, lease.Name); !observed {
			// The informer stores a Lease before its handler observes it:
			// registered now, it would be judged missing and gate the node
			// for a moment. Its handler enqueues the node right after.
			continue
		}
		out = append(out, registration{extension: ext, affectsReadiness: lease.Labels[nodev1alpha1.AffectsReadinessLabel] != "false",
			created: lease.CreationTimestamp.Time})
	}
	return out
}

func equalLists(desired, current []nodev1alpha1.SystemExtension, node, namespace string) bool {
	return reflect.DeepEqual(nodev1alpha1.NormalizeSystemExtensions(desired, node, namespace),
		nodev1alpha1.NormalizeSystemExtensions(current, node, namespace))
}

func (c *Controller) reportInvalidList(ctx context.Context, node *v1.Node, err error) {
	value := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
	c.mu.Lock()
	st := c.nodes[node.Name]
	if st == nil {
		st = newNodeState(c.clock.Now())
		st.uid, st.bootID = node.UID, node.Status.NodeInfo.BootID
		// Keep the gate state the node has: a taint stays, no taint stays off.
		st.gated = nodeutil.HasTaint(node, c.opts.TaintKey, c.opts.TaintEffect)
		c.nodes[node.Name] = st
	}
	// What is reported once: the annotation's value, and for a list that
	// parses but cannot be built, the kind of problem (not its counts,
	// which move with every Lease an overflowing node gains).
	key, what := value, "Cannot parse annotation "+nodev1alpha1.SystemExtensionsAnnotation
	var build listBuildError
	if errors.As(err, &build) {
		key, what = build.kind+"|"+value, "Cannot build the extension list of annotation "+nodev1alpha1.SystemExtensionsAnnotation
	}
	first := st.last.invalidList != key
	st.last.invalidList = key
	// A list that cannot be judged is counted on neither side of the blast
	// radius, rather than frozen as it was last judged.
	st.exts = nil
	// Nothing about a node whose list cannot be judged is steady: every
	// event of it is evaluated again.
	st.steadyLeases = nil
	prev := c.contributions[node.Name]
	prev.invalid = true
	c.updateContribution(node.Name, prev)
	c.mu.Unlock()
	c.handleSuspensionChanges(ctx, c.blast.update(node.Name, "", false, false), c.clock.Now())
	if !first {
		return
	}
	klog.FromContext(ctx).Error(err, what+"; keeping the node's gate state and leaving the annotation as it is")
	if c.opts.DryRun {
		return
	}
	c.recorder.Eventf(node, v1.EventTypeWarning, EventInvalidExtensionList,
		"%s; the node keeps its gate state until it is fixed: %v", what, err)
	// The controller cannot judge the node: say so in the condition.
	message := fmt.Sprintf("%s, so the controller cannot tell whether the node's extensions are ready; the node keeps its current gate state. %v",
		what, err)
	written, werr := c.writeCondition(ctx, node, v1.ConditionUnknown, EventInvalidExtensionList, message)
	if werr != nil {
		klog.FromContext(ctx).Error(werr, "Writing the condition of a node with an invalid extension list")
	}
	c.mu.Lock()
	if st := c.nodes[node.Name]; st != nil {
		// Whatever the list becomes, the condition must be rewritten
		// (also when this write failed: it may have been applied).
		st.last.noteConditionWrite("invalid", writtenCondition{status: v1.ConditionUnknown, reason: EventInvalidExtensionList, message: message}, written, werr)
	}
	c.mu.Unlock()
}
