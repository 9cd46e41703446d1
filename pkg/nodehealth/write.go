package nodehealth

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// conflictRetries bounds the re-reads after a write conflict (five, at once:
// the fresh read is what resolves a conflict, and the controller's workers
// must not sleep); past it the node goes back to the rate-limited queue.
var conflictRetries = wait.Backoff{Steps: 1 + 5}

// conditionMatches reports whether the node's SystemExtensionsReady condition
// already has this status and reason.
func conditionMatches(node *v1.Node, status v1.ConditionStatus, reason string) bool {
	c := nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition)
	return c != nil && c.Status == status && c.Reason == reason
}

// conditionNamesSame reports whether the message of the node's
// SystemExtensionsReady condition names as not ready the extensions
// statuses finds not ready, each with the reason found and in the same list
// (those that gate, then those that do not), whatever ages it gives, and no
// other (an extension the node no longer lists included), but those it
// names expired that look ready only by the grace of this controller's
// start, which it returns: the grace hides an expiry, it shows no renewal.
func conditionNamesSame(node *v1.Node, statuses []extensionStatus) (same bool, graceNamed []string) {
	c := nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition)
	if c == nil {
		return false, nil
	}
	message, _, _ := strings.Cut(c.Message, podsLeftPrefix)
	gatingPart, infoPart, _ := strings.Cut(message, infoListPrefix)
	named := [2]map[string]string{namedEntries(gatingPart), namedEntries(infoPart)}
	for _, s := range statuses {
		list := 0
		if !s.gating {
			list = 1
		}
		reason, ok := named[list][s.name]
		switch {
		case s.ready && ok && s.startGrace && reason == extLeaseExpired:
			graceNamed = append(graceNamed, s.name)
		case s.ready == ok, !s.ready && reason != s.reason:
			return false, nil
		}
		delete(named[list], s.name)
	}
	return len(named[0]) == 0 && len(named[1]) == 0, graceNamed
}

// namedEntries reads the entries "name (Reason..." of a condition message's
// list, by name: an entry's name is one word, which the prose and the
// details around the list, split the same way, are not.
func namedEntries(list string) map[string]string {
	out := map[string]string{}
	for _, chunk := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ':' }) {
		name, rest, ok := strings.Cut(strings.TrimSpace(chunk), " (")
		if !ok || name == "" || strings.ContainsAny(name, " ()") {
			continue
		}
		reason, _, _ := strings.Cut(rest, ";")
		out[name] = strings.TrimRight(reason, ").")
	}
	return out
}

// graceStillHides reports whether every extension in names still looks
// ready only by the start's grace.
func graceStillHides(names []string, statuses []extensionStatus) bool {
	for _, name := range names {
		i := slices.IndexFunc(statuses, func(s extensionStatus) bool { return s.name == name })
		if i < 0 || !statuses[i].ready || !statuses[i].startGrace {
			return false
		}
	}
	return true
}

// conditionHolds reports whether the node's SystemExtensionsReady condition
// is exactly status, reason and message.
func conditionHolds(node *v1.Node, status v1.ConditionStatus, reason, message string) bool {
	return conditionMatches(node, status, reason) &&
		nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition).Message == message
}

// nodeWrite is the state a sync wants on the Node object; writeNode turns it
// into one merge patch of the differences.
type nodeWrite struct {
	taint     bool
	noExecute bool
	// list, when set, computes the node's extension list from the node being
	// written: the list it returns (nil: leave the annotation as it is; an
	// empty value removes it). It runs again on every fresh read after a
	// conflict, so that an entry another writer added meanwhile is merged,
	// never overwritten with the list computed from the stale read.
	list func(node *v1.Node) (*string, error)
	// bootRecord, when set, is the new value of the boot annotation.
	bootRecord *string
	// reason is logged with the write.
	reason string
	// fresh: the first attempt starts from a GET, not from the informer's
	// copy, which does not show this controller's own last write yet (a
	// gate's taint whose ungate comes before the cache shows it).
	fresh bool
	// guard, when set, is asked before every attempt whose changes add the
	// readiness taint or its NoExecute variant. A guard that fired since
	// the decision was made (own view, blast radius) holds the addition:
	// its error sends the node back to the queue to be decided again,
	// never replayed (docs/controller.md, "Guards come first").
	guard func(ch writeChanges) error
}

// errDecidedOnAnOlderNode ends a write whose fresh read, after a conflict,
// shows a node that differs from the one the decision was made on in what an
// evaluation reads: the node is decided again rather than given a decision
// made on a stale cache.
var errDecidedOnAnOlderNode = errors.New("the node changed since the decision in what decides it; deciding again")

// decidedOnSame reports whether fresh still has what the evaluation of
// decided read: its incarnation, boot, labels, boot record and leaving
// signals. Status heartbeats and other writers' taints do not count (but for
// the leaving taints), and neither does the extension list: an entry another
// writer added meanwhile is merged into the write (nodeWrite.list), and its
// Node event queues the node for an evaluation of the new list right after.
//
// A node that starts or stops leaving moves in or out of the blast radius,
// whose suspension holds a failure taint only of a node it counts: a taint
// decided for a leaving node, written on one that no longer leaves, could be
// the one that should have tipped the count (simulation seed
// 16893502492448166993: the autoscaler took its taint off in the instant the
// node's Lease expired, and the taint was written past the suspension).
//
// Nor does a boot record that is already the one the write wants (record):
// the decision wrote it, in an attempt applied with its answer lost, and the
// cache does not show it yet. Taken for a change, it sent the node back to
// be decided again on the same cache until the watch delivered the write,
// every retry failing the same way, and the decision's condition waited
// (simulation seed 14347737726070202354: a failure's taint and dead mark
// applied with the answer lost).
func decidedOnSame(decided, fresh *v1.Node, record *string, opts *Options) bool {
	freshRecord := fresh.Annotations[nodev1alpha1.BootAnnotation]
	return decided.UID == fresh.UID && decided.Status.NodeInfo.BootID == fresh.Status.NodeInfo.BootID &&
		maps.Equal(decided.Labels, fresh.Labels) &&
		(decided.Annotations[nodev1alpha1.BootAnnotation] == freshRecord || record != nil && *record == freshRecord) &&
		decided.DeletionTimestamp.Equal(fresh.DeletionTimestamp) &&
		leavingFactsOf(decided, opts).Equal(leavingFactsOf(fresh, opts))
}

type writeChanges struct {
	taintAdded, taintRemoved, noExecuteAdded bool
	annotations                              map[string]*string
	taints                                   []v1.Taint
	// resourceVersion is the written Node's, once written.
	resourceVersion string
	// unsure: the API server answered the patch with an error, and it may
	// have been applied all the same (a timeout, a lost answer).
	unsure bool
	// read is the node as the write left it, or as its fresh read found it
	// when there was nothing to write; nil when it wrote nothing from the
	// informer's copy, and in a dry run.
	read *v1.Node
}

func (ch writeChanges) empty() bool {
	return ch.taints == nil && len(ch.annotations) == 0
}

// apply makes the changes on node: nodeutil.MergePatch then sends them.
func (ch writeChanges) apply(node *v1.Node) {
	if ch.taints != nil {
		node.Spec.Taints = ch.taints
	}
	for key, value := range ch.annotations {
		if value == nil {
			delete(node.Annotations, key)
			continue
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[key] = *value
	}
}

// changes compares the wanted state with a node: nil taints means the taint
// list is already right.
func (w nodeWrite) changes(node *v1.Node, key string, effect v1.TaintEffect) (writeChanges, error) {
	var ch writeChanges
	has, hasNX := nodeutil.HasTaint(node, key, effect), nodeutil.HasTaint(node, key, v1.TaintEffectNoExecute)
	ch.taintAdded, ch.taintRemoved = w.taint && !has, !w.taint && has
	ch.noExecuteAdded = w.noExecute && !hasNX
	if w.taint != has || w.noExecute != hasNX || nodeutil.CountTaints(node, key) != btoi(has)+btoi(hasNX) {
		// Every other taint (cordon, autoscalers, kubelet, other writers)
		// stays exactly as it is; only ours are replaced.
		taints, _ := nodeutil.RemoveTaints(node.Spec.Taints, key)
		if w.taint {
			taints = append(taints, v1.Taint{Key: key, Effect: effect})
		}
		if w.noExecute {
			added := metav1.Now()
			for _, t := range node.Spec.Taints {
				if t.Key == key && t.Effect == v1.TaintEffectNoExecute && t.TimeAdded != nil {
					added = *t.TimeAdded
				}
			}
			taints = append(taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoExecute, TimeAdded: &added})
		}
		ch.taints = taints
	}
	ch.annotations = map[string]*string{}
	if w.list != nil {
		value, err := w.list(node)
		if err != nil {
			return writeChanges{}, err
		}
		if value != nil && node.Annotations[nodev1alpha1.SystemExtensionsAnnotation] != *value {
			if *value == "" {
				ch.annotations[nodev1alpha1.SystemExtensionsAnnotation] = nil
			} else {
				ch.annotations[nodev1alpha1.SystemExtensionsAnnotation] = value
			}
		}
	}
	if w.bootRecord != nil && node.Annotations[nodev1alpha1.BootAnnotation] != *w.bootRecord {
		ch.annotations[nodev1alpha1.BootAnnotation] = w.bootRecord
	}
	return ch, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeNode brings the node's taints and annotations to w through
// nodeutil.PatchNode: one JSON merge patch carrying metadata.resourceVersion,
// computed first from the informer's copy (no GET), so that a concurrent
// writer's change fails it with 409 instead of being overwritten; the whole
// patch, taints and extension list alike, is then recomputed from a fresh
// GET. A node re-created under the same name meanwhile is never written.
// Nothing is written when nothing differs. It returns what the written patch
// changed, which is nothing in a dry run.
func (c *Controller) writeNode(ctx context.Context, node *v1.Node, w nodeWrite) (writeChanges, error) {
	logger := klog.FromContext(ctx)
	a := &nodeWriteAttempt{c: c, logger: logger, decidedOn: node, w: w}
	start := node
	if w.fresh {
		start = nil
	}
	opts := nodeutil.PatchOptions{Start: start, Backoff: conflictRetries, DryRun: c.opts.DryRun, OnPatch: a.onPatch}
	result, patched, err := nodeutil.PatchNode(ctx, c.client.CoreV1().Nodes(), node.Name, opts, a.mutate)
	ch, op := a.ch, a.op
	switch {
	case err != nil && a.patchFailed:
		return writeChanges{unsure: true}, fmt.Errorf("writing node %s (%s): %w", node.Name, op, err)
	case err != nil:
		return writeChanges{}, err
	case !patched && c.opts.DryRun && !ch.empty():
		// Dry run: counted and logged once per transition, not on every
		// sync of a node whose taint never changes because nothing is
		// written.
		if w.reason != "" {
			logger.Info("Dry run: would update the node", "operation", op, "reason", w.reason, "annotations", annotationKeys(ch))
			c.metrics.DryRunActions.WithLabelValues(op).Inc()
		}
		return writeChanges{}, nil
	case !patched && w.fresh:
		return writeChanges{read: result}, nil
	case !patched:
		return writeChanges{}, nil
	}
	logger.Info("Updated node", "operation", op, "reason", w.reason, "annotations", annotationKeys(ch))
	if result != nil {
		ch.resourceVersion = result.ResourceVersion
		ch.read = result
	}
	return ch, nil
}

// knownNode is the node as this controller last knew the API server to
// hold it: its own last Node write left it so, or a fresh read found it so,
// at resourceVersion. Unsure: a write was answered with an error and may
// have been applied all the same (a timeout, a lost answer), so nothing is
// known. While the Node cache does not show what is known, a write decided
// on the cache starts from a fresh read: computed from the older copy, a
// removal finds no taint to remove and an addition finds the taint already
// there, and the patch changes nothing although the node needs it (seeds
// 11785018759012118346, 1487896603008007614, 9771644540282225497).
type knownNode struct {
	resourceVersion string
	taints          []v1.Taint
	unsure          bool
}

// knownFrom is what a successful write, or a fresh read with nothing to
// write, tells of the node.
func knownFrom(node *v1.Node) knownNode {
	return knownNode{resourceVersion: node.ResourceVersion, taints: node.Spec.Taints}
}

// unshownBy reports whether cached, the Node cache's copy, is older than
// what is known, by writeShown's rule: where resourceVersions do not
// compare, the copy shows it once its taints are the known ones.
func (k knownNode) unshownBy(cached *v1.Node) bool {
	if k.unsure {
		return true
	}
	if k.resourceVersion == "" {
		return false
	}
	return !writeShown(cached.ResourceVersion, k.resourceVersion, equalTaints(cached.Spec.Taints, k.taints))
}

func equalTaints(a, b []v1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y v1.Taint) bool { return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect })
}

// nodeWriteAttempt is one writeNode: the patch it computed last and what
// the API server answered.
type nodeWriteAttempt struct {
	c         *Controller
	logger    klog.Logger
	decidedOn *v1.Node
	w         nodeWrite

	ch writeChanges
	op string
	// patchFailed: the error PatchNode returns is the API server's answer
	// to a patch.
	patchFailed bool
	conflicts   int
}

// mutate recomputes the whole patch from current, the informer's copy first
// and a fresh GET after a conflict.
func (a *nodeWriteAttempt) mutate(current *v1.Node) error {
	if current.UID != a.decidedOn.UID {
		return fmt.Errorf("node %s was re-created while writing it", a.decidedOn.Name)
	}
	if !decidedOnSame(a.decidedOn, current, a.w.bootRecord, &a.c.opts) {
		return errDecidedOnAnOlderNode
	}
	var err error
	if a.ch, err = a.w.changes(current, a.c.opts.TaintKey, a.c.opts.TaintEffect); err != nil {
		return err
	}
	if a.w.guard != nil && (a.ch.taintAdded || a.ch.noExecuteAdded) {
		if err := a.w.guard(a.ch); err != nil {
			return err
		}
	}
	a.op = operationOf(a.ch)
	a.ch.apply(current)
	return nil
}

func (a *nodeWriteAttempt) onPatch(err error, retrying bool) {
	m := a.c.metrics
	switch {
	case err == nil:
		m.TaintWrites.WithLabelValues(a.op, "success").Inc()
		if len(a.ch.annotations) > 0 && a.ch.taints == nil {
			m.ListWrites.WithLabelValues("success").Inc()
		}
	case retrying:
		a.conflicts++
		m.TaintWrites.WithLabelValues(a.op, "conflict").Inc()
		a.logger.V(2).Info("Node changed while writing it; retrying on a fresh read", "attempt", a.conflicts)
	default:
		m.TaintWrites.WithLabelValues(a.op, "error").Inc()
		a.patchFailed = true
	}
}

func operationOf(ch writeChanges) string {
	switch {
	case ch.taintAdded:
		return "add"
	case ch.taintRemoved:
		return "remove"
	case ch.noExecuteAdded:
		return "noexecute"
	case ch.taints != nil:
		return "taints"
	default:
		return "annotations"
	}
}

func annotationKeys(ch writeChanges) []string {
	out := make([]string, 0, len(ch.annotations))
	for k := range ch.annotations {
		out = append(out, k)
	}
	return out
}

// writeCondition sets the SystemExtensionsReady condition (patchConditions)
// and returns the write, for conditionShown (nil in a dry run).
func (c *Controller) writeCondition(ctx context.Context, node *v1.Node, status v1.ConditionStatus, reason, message string) (*writtenCondition, error) {
	if c.opts.DryRun {
		c.metrics.DryRunActions.WithLabelValues("condition").Inc()
		return nil, nil
	}
	patched, err := c.patchConditions(ctx, node, []v1.NodeCondition{{
		Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: status, Reason: reason, Message: message,
	}}, "")
	if err != nil {
		return nil, err
	}
	return &writtenCondition{resourceVersion: patched.ResourceVersion, status: status, reason: reason, message: message}, nil
}

// writtenCondition is a SystemExtensionsReady condition this controller
// wrote, and the resourceVersion the write gave the node.
type writtenCondition struct {
	resourceVersion string
	status          v1.ConditionStatus
	reason, message string
}

// shownBy reports whether node, as the Node cache holds it, is the version
// the write gave it or a later one, by cacheReached's rule: resourceVersions
// compare as the API server assigns them; where they do not, the write
// counts as shown once the cache shows the condition it wrote.
func (w *writtenCondition) shownBy(node *v1.Node) bool {
	return writeShown(node.ResourceVersion, w.resourceVersion, conditionHolds(node, w.status, w.reason, w.message))
}

// patchConditions sets conditions with one status patch
// (nodeutil.PatchConditions), counted in the condition-write metric, and
// returns the node as the patch left it.
func (c *Controller) patchConditions(ctx context.Context, node *v1.Node, conds []v1.NodeCondition, resourceVersion string) (*v1.Node, error) {
	patched, err := nodeutil.PatchConditions(ctx, c.client.CoreV1().Nodes(), node, conds, c.clock.Now(), resourceVersion)
	if err != nil {
		c.metrics.ConditionWrites.WithLabelValues("error").Inc()
		return nil, err
	}
	c.metrics.ConditionWrites.WithLabelValues("success").Inc()
	return patched, nil
}
