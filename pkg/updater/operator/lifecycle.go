package operator

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// ReasonLifecycleConditions is the Event reason of a change of the node's
// KEP-5683 lifecycle conditions.
const ReasonLifecycleConditions = "LifecycleConditions"

// lifecycleTypes are the KEP-5683 conditions an update publishes, in patch
// order.
var lifecycleTypes = []string{
	nodev1alpha1.LifecycleConditionMaintenancePlanned,
	nodev1alpha1.LifecycleConditionMaintenanceInProgress,
	nodev1alpha1.LifecycleConditionDrainInProgress,
	nodev1alpha1.LifecycleConditionDrained,
}

// lifecycleWant is what the update asks of each lifecycle condition (same
// order as lifecycleTypes): True or False, and the reason it is written
// with. False asks only that a condition of ours says False: an absent one
// stays absent.
type lifecycleWant struct {
	status [4]v1.ConditionStatus
	reason [4]string
}

// lifecycleOwn reports whether a lifecycle condition's reason is the
// operator's. The node-health controller's (ExtensionFailed) is its own,
// never the operator's, though all three are nodehealth's.
func lifecycleOwn(reason string) bool {
	return reason == nodev1alpha1.LifecycleReasonBottlerocketUpdate || reason == nodev1alpha1.LifecycleReasonUpdateFailed
}

// lifecycleOf decides the lifecycle conditions of the shadow's node
// (docs/updater.md, "Lifecycle conditions"): from the shadow alone but for
// the drain, which also reads the node's boot and readiness taint as
// syncDrain does. s nil is a shadow deleted. Everything it reads is stored
// in the API, so a new leader decides the same.
func (c *Controller) lifecycleOf(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) lifecycleWant {
	var planned, inProgress, draining, drained bool
	reason := nodev1alpha1.LifecycleReasonBottlerocketUpdate
	halted := false
	if s != nil {
		switch s.Spec.State {
		case updatesv1alpha1.StateStagedAndPerformedUpdate:
			planned = true
		case updatesv1alpha1.StateRebootedIntoUpdate:
			// The planned release: the agent releases its Lease when spec
			// asks for the reboot, and the node-health controller answers
			// with the readiness taint the drain waits for.
			inProgress = true
			boot := node.Status.NodeInfo.BootID
			switch {
			case boot != "" && s.Annotations[updatesv1alpha1.DrainedAnnotation] == boot:
				drained = true
			case drainStep(s) && boot != "" && nodeutil.HasTaint(node, c.opts.Drain.ReadinessTaintKey, ""):
				draining = true
			}
			// A boot the drained annotation does not name is the new boot:
			// Drained goes back to False.
		case updatesv1alpha1.StateMonitoringUpdate:
			inProgress = true
		case updatesv1alpha1.StateIdle, "":
			// A failure (a missed deadline, the wrong version, a drain
			// blocked) returns spec to Idle and halts the rollout until
			// resumed: the node keeps saying so.
			halted = updatesv1alpha1.Halting(s.Annotations)
		}
	}
	var w lifecycleWant
	for i, on := range []bool{planned, inProgress || halted, draining, drained} {
		w.status[i], w.reason[i] = v1.ConditionFalse, reason
		if on {
			w.status[i] = v1.ConditionTrue
		}
	}
	if halted {
		w.reason[1] = nodev1alpha1.LifecycleReasonUpdateFailed
	}
	return w
}

// lifecycleChanges returns the conditions to write on node for w: only
// conditions whose reason is the operator's are set or cleared; another
// writer's (an admin's drain) is never touched, True or False. The one
// exception is the node-health controller's, nodehealth's too: its False
// one (an eviction long over, which it clears but never removes) is taken
// over to say True, as the controller takes over the operator's, or a node
// once escalated would never show its updates' drains.
//
// prev is what the operator's writes left on the node, as far as it knows
// (nil: nothing in this process; an empty status: nothing of ours). The
// informer's copy can lag behind it: where the copy shows no condition or
// one of ours, the condition is what prev says. failed is the want of the
// last write when it failed (nil otherwise): it may have been applied, and
// the informer may not show it yet, so a condition it would have changed
// away from w is written whatever the copy shows. left is what this write
// leaves, the next call's prev.
func lifecycleChanges(node *v1.Node, w lifecycleWant, prev *lifecycleWant, failed *lifecycleWant) (out []v1.NodeCondition, left lifecycleWant) {
	for i, kind := range lifecycleTypes {
		wrote, reason := prev.wrote(i)
		cur := nodeutil.OwnLastWrite(nodeutil.Condition(node, v1.NodeConditionType(kind)), v1.NodeConditionType(kind), lifecycleOwn, wrote, reason)
		want := w.status[i]
		attempted, attemptedReason := failed.wrote(i)
		switch {
		case cur != nil && !lifecycleOwn(cur.Reason) && (cur.Status == v1.ConditionTrue || want == v1.ConditionFalse ||
			!nodev1alpha1.OwnLifecycleReason(cur.Reason)):
			continue
		case attempted != "" && (attempted != want || attemptedReason != w.reason[i]):
			out = append(out, v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: want, Reason: w.reason[i],
				Message: lifecycleMessage(kind, want, w.reason[i])})
		case cur == nil && want == v1.ConditionFalse:
			continue
		case cur != nil && lifecycleOwn(cur.Reason) && cur.Status == want && cur.Reason == w.reason[i]:
		default:
			out = append(out, v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: want, Reason: w.reason[i],
				Message: lifecycleMessage(kind, want, w.reason[i])})
		}
		left.status[i], left.reason[i] = want, w.reason[i]
	}
	return out, left
}

// wrote is the status and reason the write of w gave lifecycleTypes[i]
// (nothing for w nil).
func (w *lifecycleWant) wrote(i int) (v1.ConditionStatus, string) {
	if w == nil {
		return "", ""
	}
	return w.status[i], w.reason[i]
}

// lifecycleMessage says why the operator wrote a condition, for `kubectl
// describe node`.
func lifecycleMessage(kind string, status v1.ConditionStatus, reason string) string {
	if status == v1.ConditionFalse {
		return "The update operator's Bottlerocket update is past this step, or over."
	}
	switch {
	case reason == nodev1alpha1.LifecycleReasonUpdateFailed:
		return "The node's Bottlerocket update failed and halts its UpdatePolicy until `kubectl nodehealth update resume`."
	case kind == nodev1alpha1.LifecycleConditionMaintenancePlanned:
		return "The update operator chose the node for a Bottlerocket update; its agent stages the new version."
	case kind == nodev1alpha1.LifecycleConditionMaintenanceInProgress:
		return "The node is being updated: drained, rebooted into the new Bottlerocket version and watched through its soak."
	case kind == nodev1alpha1.LifecycleConditionDrainInProgress:
		return "The update operator is evicting the node's pods before its reboot."
	}
	return "The update operator drained the node; its agent reboots it into the new Bottlerocket version."
}

// syncLifecycle brings the lifecycle conditions of the node named name to
// what its shadow's state asks (lifecycleOf) with one status patch, before
// the shadow's own sync acts on that state: a drain is announced before it
// begins, even one that is done in its first pass. Nothing is written when
// nothing differs, so a steady node costs no write. A shadow deleted (its
// node left the managed set, or the shadow was removed) clears ours.
func (c *Controller) syncLifecycle(ctx context.Context, name string) error {
	s, node, err := c.lifecycleSubjects(name)
	if err != nil {
		return err
	}
	return c.syncLifecycleOf(ctx, name, s, node)
}

// syncLifecycleOf is syncLifecycle of the shadow s and node as read from the
// cache (either nil when gone).
func (c *Controller) syncLifecycleOf(ctx context.Context, name string, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) error {
	if node == nil {
		c.forgetLifecycle(name)
		return nil
	}
	w := c.lifecycleOf(s, node)
	prevp, unchanged, failed := c.lifecycleLeft(name, node.UID, w)
	if unchanged {
		return nil
	}
	conds, left := lifecycleChanges(node, w, prevp, failed)
	if len(conds) > 0 {
		if gone, err := c.writeLifecycle(ctx, name, node, conds); gone || err != nil {
			if err != nil {
				// The write may have been applied (a timeout, a lost
				// answer): neither a record nor the informer, which
				// may not show it yet, says what the node holds, and
				// an update of our own conditions brings no sync back
				// (nodeUpdateMatters). The next write says what this
				// one may have changed (lifecycleChanges, failed).
				c.mu.Lock()
				c.lifecycleDone[name] = lifecycleRecord{node: node.UID, failed: &w}
				c.mu.Unlock()
			}
			return err
		}
	}
	if len(conds) == 0 && prevp == nil {
		// Nothing written and nothing known of our writes: the
		// informer's copy decided, and it still decides the next sync,
		// which may be the one that shows a write whose answer was lost.
		return nil
	}
	c.mu.Lock()
	c.lifecycleDone[name] = lifecycleRecord{node: node.UID, want: w, left: left}
	c.mu.Unlock()
	return nil
}

// lifecycleSubjects are the shadow named name (nil once deleted) and its
// node (nil once deleted or, with a shadow, no longer the shadow's).
func (c *Controller) lifecycleSubjects(name string) (*updatesv1alpha1.BottlerocketShadow, *v1.Node, error) {
	s, err := c.shadowLister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		s = nil
	case err != nil:
		return nil, nil, err
	}
	var node *v1.Node
	if s != nil {
		node, err = c.nodeOf(s)
	} else {
		node, err = c.nodeLister.Get(name)
		if apierrors.IsNotFound(err) {
			node, err = nil, nil
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return s, node, nil
}

func (c *Controller) forgetLifecycle(name string) {
	c.mu.Lock()
	delete(c.lifecycleDone, name)
	c.mu.Unlock()
}

// lifecycleLeft is what our last write left on the node of this UID, nil
// when no write of ours is known; unchanged when that write already
// brought want; failed the want of the last write when it failed.
func (c *Controller) lifecycleLeft(name string, uid types.UID, want lifecycleWant) (left *lifecycleWant, unchanged bool, failed *lifecycleWant) {
	c.mu.Lock()
	prev, ok := c.lifecycleDone[name]
	c.mu.Unlock()
	switch {
	case !ok || prev.node != uid:
		return nil, false, nil
	case prev.failed != nil:
		return nil, false, prev.failed
	case prev.want == want:
		return nil, true, nil
	}
	return &prev.left, false, nil
}

// writeLifecycle patches conds onto the node (or, in a dry run, says it
// would). gone: the node was deleted, and nothing is left to record.
func (c *Controller) writeLifecycle(ctx context.Context, name string, node *v1.Node, conds []v1.NodeCondition) (gone bool, err error) {
	summary := lifecycleSummary(conds)
	logger := klog.FromContext(ctx).WithValues("node", name)
	if c.opts.DryRun {
		logger.Info("Dry run: would set lifecycle conditions", "conditions", summary)
		c.metrics.DryRunActions.WithLabelValues("lifecycle").Inc()
		return false, nil
	}
	// No resourceVersion: conditions merge by type, so no other
	// writer's is lost, while the node-health controller's taint
	// writes around the same transitions would make a guarded
	// patch meet conflicts.
	_, err = nodeutil.PatchConditions(ctx, c.opts.Nodes, node, conds, c.clock.Now(), "")
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	logger.Info("Set lifecycle conditions", "conditions", summary)
	ref := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: node.UID}
	c.recorder.Eventf(ref, v1.EventTypeNormal, ReasonLifecycleConditions, "Set lifecycle conditions %s", summary)
	return false, nil
}

func lifecycleSummary(conds []v1.NodeCondition) string {
	parts := make([]string, 0, len(conds))
	for _, cond := range conds {
		parts = append(parts, string(cond.Type)+"="+string(cond.Status)+"/"+cond.Reason)
	}
	return strings.Join(parts, ", ")
}

// lifecycleRecord is the want last brought onto a node, and what that left
// of ours on it (lifecycleChanges), by its UID: a Node deleted and created
// again under the same name starts without.
type lifecycleRecord struct {
	node       types.UID
	want, left lifecycleWant
	// failed is the want of the last write when it failed: it may have
	// been applied all the same (a timeout, a lost answer), so left does
	// not say what the node holds.
	failed *lifecycleWant
}
