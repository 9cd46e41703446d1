package nodehealth

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// lifecycleWant is what the controller wants of the KEP-5683 lifecycle
// conditions its escalation publishes (docs/controller.md, "Lifecycle
// conditions"). Neither set nor clear: the conditions stay as they are, so
// that a guard holding a drain, or a restart that forgot the escalation,
// leaves them as they were.
type lifecycleWant struct {
	set                      bool
	drainInProgress, drained bool
	// clear sets every lifecycle condition of ours False.
	clear   bool
	message string
	// unsure: the write of this want failed, and may have been applied all
	// the same (a timeout, a lost answer).
	unsure bool
}

// lifecycleTypes are the conditions the escalation writes, in patch order.
var lifecycleTypes = []string{nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleConditionDrained}

// lifecycleOf decides the node's lifecycle conditions from its state after
// the evaluation. Callers hold c.mu.
func (c *Controller) lifecycleOf(name string, st *nodeState, d decision) lifecycleWant {
	switch {
	case d.leaving != "":
		return lifecycleWant{clear: true, message: "The node is leaving (" + d.leaving + "): the controller no longer evicts it."}
	case !st.gated:
		return lifecycleWant{clear: true, message: "The node is no longer gated: its required extensions are ready, and the controller no longer evicts it."}
	}
	failed := "a required extension"
	if names := notReadyNames(d.statuses); len(names) > 0 {
		failed = "required extension " + strings.Join(names, ", ")
	}
	switch {
	case c.opts.Eviction.Mode == EvictionModeEvict && st.escalation.marked && st.escalation.drained:
		m := fmt.Sprintf("The controller evicted every pod it may evict from the node (%s failed longer than eviction.timeout %s).", failed, c.opts.Eviction.Timeout)
		if left := c.drains.leftOn(name); left != "" {
			m += " Pods left on the node, which kubectl drain would not remove without eviction.force or eviction.deleteEmptyDirData: " + left + "."
		}
		return lifecycleWant{set: true, drained: true, message: m}
	case c.opts.Eviction.Mode == EvictionModeEvict && st.escalation.marked:
		return lifecycleWant{set: true, drainInProgress: true,
			message: fmt.Sprintf("The controller is evicting the node's pods: %s failed longer than eviction.timeout %s.", failed, c.opts.Eviction.Timeout)}
	case c.opts.Eviction.Mode == EvictionModeNoExecute && d.noExecute:
		// Pods leave by their own tolerationSeconds: the drain is under way
		// as long as the taint is on, and nothing tells when it is over.
		return lifecycleWant{set: true, drainInProgress: true,
			message: fmt.Sprintf("The controller added taint %s:NoExecute: %s failed longer than eviction.timeout %s; pods leave by their tolerationSeconds.", c.opts.TaintKey, failed, c.opts.Eviction.Timeout)}
	}
	return lifecycleWant{}
}

// lifecycleChanges returns the lifecycle conditions to write on node for w:
// only conditions whose reason is ours are set or cleared, and a True one of
// another writer (an admin's drain, the update operator's) is never
// touched. A False one of another writer is taken over only to say True: its
// writer considers its state over.
//
// prev is the want last written (nil: none). The informer's copy can lag
// behind it, showing nothing yet or what an earlier write of ours said (a
// clear before the escalation just written, or the escalation before the
// clear): where the copy shows no condition or one of ours, the status is
// what prev wrote. After a write that failed (prev unsure) neither the copy
// nor prev says what the node holds: the write may have been applied or not,
// and the copy may not show it yet. Then the copy decides, but a condition
// the failed write would have changed away from w is written whatever the
// copy shows, another writer's excepted as always.
func lifecycleChanges(node *v1.Node, w lifecycleWant, prev *lifecycleWant) []v1.NodeCondition {
	var out []v1.NodeCondition
	unsure := prev != nil && prev.unsure
	for _, kind := range lifecycleTypes {
		wrote, attempted := prev.wrote(kind), v1.ConditionStatus("")
		if unsure {
			wrote, attempted = "", wrote
		}
		cur := nodeutil.OwnLastWrite(nodeutil.Condition(node, v1.NodeConditionType(kind)), v1.NodeConditionType(kind), ownLifecycleReason,
			wrote, nodev1alpha1.LifecycleReasonExtensionFailed)
		ours := cur != nil && cur.Reason == nodev1alpha1.LifecycleReasonExtensionFailed
		want := v1.ConditionFalse
		switch {
		case w.set && (kind == nodev1alpha1.LifecycleConditionDrainInProgress && w.drainInProgress ||
			kind == nodev1alpha1.LifecycleConditionDrained && w.drained):
			want = v1.ConditionTrue
		case w.set || w.clear:
		default:
			continue
		}
		switch {
		case cur != nil && !ours && (cur.Status == v1.ConditionTrue || want == v1.ConditionFalse):
			continue
		case attempted != "" && attempted != want:
		case cur == nil && want == v1.ConditionFalse:
			continue
		case ours && cur.Status == want:
			continue
		}
		out = append(out, v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: want,
			Reason: nodev1alpha1.LifecycleReasonExtensionFailed, Message: w.message})
	}
	return out
}

// wrote is the status the write of w gave condition kind: True where it set
// it, False where it set or cleared the others, "" for no write (w nil or
// asking nothing).
func (w *lifecycleWant) wrote(kind string) v1.ConditionStatus {
	switch {
	case w == nil || !w.set && !w.clear:
		return ""
	case w.set && (kind == nodev1alpha1.LifecycleConditionDrainInProgress && w.drainInProgress ||
		kind == nodev1alpha1.LifecycleConditionDrained && w.drained):
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

func ownLifecycleReason(reason string) bool {
	return reason == nodev1alpha1.LifecycleReasonExtensionFailed
}

// writeLifecycle brings the node's lifecycle conditions to w with one status
// patch (patchConditions). Nothing is written when nothing differs, so a
// steady node costs no write; a dry run counts and logs each change once.
func (c *Controller) writeLifecycle(ctx context.Context, node *v1.Node, st *nodeState, w lifecycleWant) error {
	if !w.set && !w.clear {
		// Nothing asked: lifecycleDone keeps the last write, which the
		// informer's copy may not show yet.
		return nil
	}
	c.mu.Lock()
	prev := st.lifecycleDone
	c.mu.Unlock()
	if prev != nil && !prev.unsure && prev.key() == w.key() {
		return nil
	}
	conds := lifecycleChanges(node, w, prev)
	if len(conds) > 0 {
		var parts []string
		for _, cond := range conds {
			parts = append(parts, string(cond.Type)+"="+string(cond.Status))
		}
		summary := strings.Join(parts, ",")
		logger := klog.FromContext(ctx)
		if c.opts.DryRun {
			logger.Info("Dry run: would set lifecycle conditions", "conditions", summary, "reason", nodev1alpha1.LifecycleReasonExtensionFailed)
			c.metrics.DryRunActions.WithLabelValues("lifecycle").Inc()
		} else {
			// No resourceVersion: the taint write of the same sync has
			// just moved it, and a patch refused for that would cost a
			// retry of every such sync. Another writer's condition set
			// between the read and the write is overwritten only if it
			// came in that instant.
			if _, err := c.patchConditions(ctx, node, conds, ""); err != nil {
				// The write may have been applied (a timeout, a lost
				// answer): the last write we know of no longer says what
				// the node holds (seed 8412077615098173412), nor does the
				// cache, which may not show this write yet (seed
				// 7076218198261422834): the next write says what this
				// one may have changed (lifecycleChanges).
				failed := w
				failed.unsure = true
				c.mu.Lock()
				st.lifecycleDone = &failed
				c.mu.Unlock()
				return err
			}
			logger.Info("Set lifecycle conditions", "conditions", summary, "reason", nodev1alpha1.LifecycleReasonExtensionFailed)
		}
	}
	c.mu.Lock()
	st.lifecycleDone = &w
	c.mu.Unlock()
	return nil
}

// key says what the want asks for, not why (the message).
func (w lifecycleWant) key() string {
	return fmt.Sprintf("set=%t,clear=%t,drainInProgress=%t,drained=%t", w.set, w.clear, w.drainInProgress, w.drained)
}
