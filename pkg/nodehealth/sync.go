package nodehealth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Event reasons on Nodes.
const (
	EventNodeGated            = "NodeGated"
	EventNodeUngated          = "NodeUngated"
	EventExtensionNotReady    = "ExtensionNotReady"
	EventExtensionReady       = "ExtensionReady"
	EventGatingSuspended      = "GatingSuspended"
	EventEvictingPods         = "EvictingPods"
	EventEvictionBlocked      = "EvictionBlocked"
	EventInvalidExtensionList = "InvalidExtensionList"
	EventTooManyRegistrations = "TooManyRegistrations"
)

const zoneLabel = v1.LabelTopologyZone

// zoneOf is the zone a node counts in for the blast radius; "" (no label)
// counts in the cluster only.
func zoneOf(node *v1.Node) string { return node.Labels[zoneLabel] }

// syncNode brings one node in line with its extensions. Like nodelifecycle's
// monitorNodeHealth it runs named steps: read the node and what it requires
// (nodeInputs), evaluate it under the lock (evaluateNode), announce what
// changed (announce: logs, metrics, Events) and apply the decision (apply:
// the Node write, the condition, escalation and the next check).
func (c *Controller) syncNode(ctx context.Context, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", name)
	ctx = klog.NewContext(ctx, logger)
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.forgetNode(name)
		return nil
	}
	if err != nil {
		return err
	}
	c.forgetReplaced(node)
	if node.Labels[nodev1alpha1.ExcludeLabel] == "true" {
		return c.syncExcluded(ctx, node)
	}
	exts, facts, err := c.nodeInputs(node)
	if err != nil {
		c.reportInvalidList(ctx, node, err)
		return nil
	}
	r := c.evaluateNode(node, exts, facts)
	if !r.d.awaitsView.IsZero() && c.canary != nil {
		c.awaitView(ctx, name, r.d.awaitsView)
	}
	c.handleSuspensionChanges(ctx, r.changes, r.now)
	c.announce(ctx, node, r)
	return c.apply(ctx, node, r)
}

// syncExcluded leaves an excluded node alone, after taking off the taint and
// saying in the condition that it is not evaluated.
func (c *Controller) syncExcluded(ctx context.Context, node *v1.Node) error {
	c.forgetNode(node.Name)
	if nodeutil.CountTaints(node, c.opts.TaintKey) > 0 {
		klog.FromContext(ctx).Info("Removing the readiness taint from an excluded node", "label", nodev1alpha1.ExcludeLabel+"=true")
		if _, err := c.writeNode(ctx, node, nodeWrite{taint: false, noExecute: false, reason: "node excluded"}); err != nil {
			return err
		}
	}
	// Nothing evicts an excluded node.
	if err := c.writeLifecycle(ctx, node, &nodeState{}, lifecycleWant{clear: true,
		message: fmt.Sprintf("The node is labelled %s=true: the controller does not evaluate it and never evicts it.", nodev1alpha1.ExcludeLabel)}); err != nil {
		return err
	}
	// A condition left from before the exclusion (possibly False) would
	// keep telling readers the node's extensions are not ready, though
	// nothing evaluates them any more.
	if nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil && !conditionMatches(node, v1.ConditionUnknown, nodev1alpha1.ReasonNodeExcluded) {
		_, err := c.writeCondition(ctx, node, v1.ConditionUnknown, nodev1alpha1.ReasonNodeExcluded,
			fmt.Sprintf("The node is labelled %s=true: the controller does not evaluate its system extensions and never gates it.", nodev1alpha1.ExcludeLabel))
		return err
	}
	return nil
}

// nodeResult is one evaluation of a node and what it changed, for announce
// and apply.
type nodeResult struct {
	now  time.Time
	st   *nodeState
	d    decision
	live bool
	// What the node's state said before the evaluation.
	prevExtReady            map[string]bool
	wasGated, wasSuppressed bool
	escalated               bool
	changes                 []suspensionChange
	suspendedWhy            string
	status                  v1.ConditionStatus
	reason, message, sig    string
	conditionChanged        bool
	lifecycle               lifecycleWant
}

// evaluateNode runs evaluate on the node's state under the lock and updates
// what the lock guards: the Lease references, the blast radius and the
// gauges.
func (c *Controller) evaluateNode(node *v1.Node, exts []requiredExtension, facts nodeFacts) nodeResult {
	name := node.Name
	r := nodeResult{now: c.clock.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.nodes[name]
	if st == nil {
		st = newNodeState(r.now)
		c.nodes[name] = st
	}
	r.st = st
	r.live = c.live.Has(name)
	c.live.Delete(name)
	// A renewal of a failed-open extension's Lease ends its fail-open
	// also while the list does not hold it, so it enqueues the node.
	unlisted := st.unlistedFailedOpen(facts, exts, c.opts.LeaseNamespace)
	c.indexLeaseRefs(name, append(slices.Clip(exts), unlisted...))
	r.prevExtReady = st.last.extReady
	r.wasGated, r.wasSuppressed = st.gated, st.last.suppressed
	in := evalInput{
		now:            r.now,
		opts:           &c.opts,
		node:           facts,
		prev:           st,
		exts:           exts,
		leases:         c.tracker.lookupLeases(exts),
		unlisted:       unlisted,
		unlistedLeases: c.tracker.lookupLeases(unlisted),
		live:           r.live,
		ownViewStale:   c.ownViewStaleLocked(),
		vouchedUntil:   c.vouchedUntil(),
		blast:          c.blast.view(name, facts.zone),
		recount:        true,
	}
	d := evaluate(in)
	if d.recount {
		// A failure taint or an escalation decided on a count that may be
		// behind: every other node is counted from its Leases as they are
		// now, and the node is decided again on that count.
		r.changes = append(r.changes, c.recountFailing(name, r.now)...)
		in.blast, in.recount = c.blast.view(name, facts.zone), false
		d = evaluate(in)
	}
	r.changes = append(r.changes, c.blast.update(name, facts.zone, d.tracked, d.failing)...)
	remember(st, d, exts)
	r.d = d
	r.suspendedWhy = d.suspendedWhy
	if in.ownViewStale && d.suppressed {
		r.suspendedWhy = "the controller does not observe its own canary Lease renewals, so it does not trust its view"
	}
	c.conditionOf(node, st, &r)
	r.lifecycle = c.lifecycleOf(name, st, d)
	r.escalated = st.escalation.marked
	c.updateContribution(name, contribution{reason: gateReason(st), notReady: notReadyNames(d.statuses), tracked: countGating(d.statuses) > 0,
		leaving: d.leaving != "" && len(d.statuses) > 0})
	return r
}

// remember makes the decision's next state the node's, with what the
// controller keeps beside it: the extensions read, the Leases a steady node's
// timer rechecks, and what was reported. In place: the eviction worker holds
// the node's state across its rate limiter's wait. Callers hold c.mu.
func remember(st *nodeState, d decision, exts []requiredExtension) {
	next := d.next
	next.last.invalidList = ""
	next.exts = exts
	next.steadyLeases = nil
	if d.steady {
		next.steadyLeases = make([]types.NamespacedName, len(exts))
		for i, e := range exts {
			next.steadyLeases[i] = types.NamespacedName{Namespace: e.lease.Namespace, Name: e.lease.Name}
		}
	}
	next.last.suppressed = d.suppressed
	next.last.extReady = make(map[string]bool, len(d.statuses))
	for _, s := range d.statuses {
		next.last.extReady[s.name] = s.ready
	}
	*st = *next
}

// conditionOf builds the node's SystemExtensionsReady condition from the
// evaluation in r and decides whether it must be written. Callers hold c.mu.
func (c *Controller) conditionOf(node *v1.Node, st *nodeState, r *nodeResult) {
	name, d := node.Name, r.d
	r.status, r.reason, r.message, r.sig = conditionFor(r.now, st, d, r.suspendedWhy)
	r.message, r.sig = c.withPodsLeft(name, st, r.message, r.sig)
	if u := st.last.conditionUnsure; u != nil && conditionHolds(node, u.status, u.reason, u.message) {
		// The cache shows what the unsure write wrote: the node holds it
		// (or a later write, which the cache will show), applied or not.
		st.last.conditionSig, st.last.conditionWritten, st.last.conditionUnsure = u.sig, nil, nil
	}
	unsure := st.last.conditionUnsure != nil
	if same, graceNamed := conditionNamesSame(node, d.statuses); st.last.conditionSig == "" && !unsure && conditionMatches(node, r.status, r.reason) && same {
		// After a start or a failover, a condition that already says the
		// same is adopted rather than rewritten on every node: the same
		// status and reason, and the same extensions named not ready (its
		// ages aside). One that names another list is rewritten: the
		// previous instance's list may name an extension that has come
		// back since (simulation seed 22: a node gated for its reboot
		// kept "Not ready: kube-proxy (LeaseReleased…)" after a failover,
		// though kube-proxy renewed again before it).
		// An extension it names expired that looks ready only by the
		// start's grace is no difference yet (graceNamed).
		st.last.conditionSig, st.last.graceNamed = r.sig, graceNamed
	}
	if w := st.last.conditionWritten; w != nil && w.shownBy(node) {
		st.last.conditionWritten = nil
	}
	// A condition someone else overwrote (a status writer working from a
	// stale read) is put back: the signature alone only says what this
	// controller last wrote, not what the node holds.
	// In a dry run nothing is written, so the node never holds what this
	// controller would write: that is not drift. Nor is a cache that does
	// not show this controller's last write yet: the node holds that
	// write, and rewriting it from the cache's older condition moves its
	// times (a Lease renewed between the ungate and the ungate's own watch
	// event rewrote the True condition; TestSteadyStateNoNodeWrites on a
	// loaded machine).
	drifted := !c.opts.DryRun && st.last.conditionSig != "" && st.last.conditionWritten == nil &&
		(len(d.statuses) > 0 || nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil) && !conditionMatches(node, r.status, r.reason)
	r.conditionChanged = r.sig != st.last.conditionSig || drifted || unsure ||
		len(st.last.graceNamed) > 0 && !graceStillHides(st.last.graceNamed, d.statuses)
	if r.conditionChanged && !c.opts.DryRun && st.last.conditionWritten == nil && !unsure && conditionHolds(node, r.status, r.reason, r.message) {
		// The node already says exactly this (after a start, every Lease
		// counts as fresh until its grace runs out, and the condition comes
		// back to what the previous instance wrote): nothing to write.
		// Unless the cache does not show this controller's last write of
		// the condition yet: the node holds that write, and the cache's
		// older condition is what it replaced (a held node that recovers
		// before the cache shows its GatingSuspended kept it until that
		// write's own event came back; simulation seed
		// 9197560688786608429 with -sim.per-event).
		st.last.conditionSig, st.last.graceNamed, r.conditionChanged = r.sig, nil, false
	}
}

// announce logs and counts startup timeouts and records the Events of each
// extension's transitions and of a withheld taint.
func (c *Controller) announce(ctx context.Context, node *v1.Node, r nodeResult) {
	logger := klog.FromContext(ctx)
	d := r.d
	for _, to := range d.startupTimeouts {
		c.metrics.StartupTimeouts.WithLabelValues(string(to.policy)).Inc()
		logger.Info("Extension missed its startup timeout", "extension", to.extension, "timeout", to.timeout, "failurePolicy", to.policy)
	}
	if d.startup != nil {
		logger.V(2).Info("Node started up", "startup", d.startup.Summary())
		c.observeStartup(d)
	}
	if c.opts.DryRun {
		return
	}
	for _, s := range d.statuses {
		was, known := r.prevExtReady[s.name]
		switch {
		case s.ready && known && !was:
			c.recorder.Eventf(node, v1.EventTypeNormal, EventExtensionReady, "Extension %s is ready (lease %s)", s.name, s.lease)
		case !s.ready && (!known || was) && !(r.live && s.reason == extLeaseMissing):
			c.recorder.Eventf(node, v1.EventTypeWarning, EventExtensionNotReady, "Extension %s is not ready: %s: %s", s.name, s.reason, s.detail)
		}
	}
	for _, to := range d.startupTimeouts {
		action := "keeping the node gated (failurePolicy KeepGated)"
		if to.policy == FailurePolicyUngate {
			action = "no longer gating the node until it becomes ready (failurePolicy Ungate)"
		}
		c.recorder.Eventf(node, v1.EventTypeWarning, EventExtensionNotReady,
			"Extension %s did not become ready within its startup timeout of %s; %s", to.extension, to.timeout, action)
	}
	if d.suppressed && !r.wasSuppressed {
		c.recorder.Eventf(node, v1.EventTypeWarning, EventGatingSuspended, "Not tainting the node although %s: %s",
			strings.Join(notReadyNames(d.statuses), ", ")+" not ready", r.suspendedWhy)
	}
}

// apply writes the decision: the taint, the list and the boot record in one
// Node write, then the condition; it queues the escalation (even when a
// write fails) and the next check.
func (c *Controller) apply(ctx context.Context, node *v1.Node, r nodeResult) error {
	d, st, name := r.d, r.st, node.Name
	if d.escalate {
		// Queued whatever becomes of this sync's writes: the node takes
		// its turn of the eviction rate when its eviction timeout runs
		// out, and the retry of a refused write takes none of its own
		// (seed 14990059884068702542). At its turn the eviction worker
		// checks again that the node is still due. Deferred, so that the
		// worker acts on what this sync wrote.
		defer c.evictions.Add(name)
	}
	changed, err := c.writeDecision(ctx, node, r)
	if err != nil {
		return err
	}
	c.announceTaintChange(node, r, changed)

	// Every node that lists an extension carries the condition (a node
	// whose extensions do not affect readiness says NoRequiredExtensions,
	// which the update operator's health gate reads); nodes that do not use
	// nodehealth are never written.
	if r.conditionChanged && (len(d.statuses) > 0 || nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil) {
		written, err := c.writeCondition(ctx, node, r.status, r.reason, r.message)
		c.mu.Lock()
		// A write answered with an error may have been applied: it is
		// written again until the cache shows it (seed 9771644540282225497).
		st.last.noteConditionWrite(r.sig, writtenCondition{status: r.status, reason: r.reason, message: r.message}, written, err)
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := c.writeLifecycle(ctx, node, st, r.lifecycle); err != nil {
		return err
	}

	if !d.nextCheck.IsZero() {
		c.queue.AddAfter(name, d.nextCheck.Sub(r.now))
	}
	return nil
}

// writeDecision makes the decision's Node write (taint, NoExecute variant,
// extension list, boot record), from a fresh read while the Node cache does
// not show what the controller knows of the node (knownNode), and remembers
// what the write left.
func (c *Controller) writeDecision(ctx context.Context, node *v1.Node, r nodeResult) (writeChanges, error) {
	d, st := r.d, r.st
	c.mu.Lock()
	gated, written := st.gated, st.gate.taintWritten
	fresh := st.known.unshownBy(node)
	if !fresh {
		st.known = knownNode{}
	}
	c.mu.Unlock()
	w := nodeWrite{taint: d.taint, noExecute: d.noExecute, list: c.listFor, bootRecord: c.bootRecordToWrite(node, d), fresh: fresh}
	failing := d.failing
	zone := zoneOf(node)
	w.guard = func(ch writeChanges) error {
		// A taint this gate already wrote is not an addition a guard
		// holds, though the cache the patch starts from may not show it.
		return c.additionHeld(zone, ch.noExecuteAdded, ch.taintAdded && failing && !written)
	}
	if d.started || (gated && !r.wasGated) {
		w.reason = "gated: " + r.reason
	} else if d.ended {
		w.reason = "ungated"
	}
	changed, err := c.writeNode(ctx, node, w)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.opts.DryRun:
	case changed.unsure:
		st.known = knownNode{unsure: true}
	case err == nil && changed.read != nil:
		st.known = knownFrom(changed.read)
	}
	if err != nil {
		return changed, err
	}
	if changed.taintAdded && gated {
		st.gate.taintWritten, st.gate.taintWrittenRV = true, changed.resourceVersion
	}
	if changed.noExecuteAdded || !d.noExecute {
		st.noExecuteWrittenRV = ""
		if changed.noExecuteAdded {
			st.noExecuteWrittenRV = changed.resourceVersion
		}
	}
	return changed, nil
}

// announceTaintChange observes the latencies of a taint the write added or
// removed and records its Event. changed is empty in a dry run: nothing is
// observed or recorded.
func (c *Controller) announceTaintChange(node *v1.Node, r nodeResult, changed writeChanges) {
	d := r.d
	if changed.taintAdded {
		if !d.detectedAt.IsZero() {
			c.metrics.DetectionLatency.Observe(c.clock.Since(d.detectedAt).Seconds())
		}
		c.recorder.Eventf(node, v1.EventTypeWarning, EventNodeGated, "Added taint %s:%s: %s", c.opts.TaintKey, c.opts.TaintEffect, r.message)
	}
	if changed.taintRemoved {
		if d.ended && d.ungateLatency > 0 {
			c.metrics.UngateLatency.Observe(d.ungateLatency.Seconds() + c.clock.Since(r.now).Seconds())
		}
		message := r.message
		if d.startup != nil {
			// The start-up timeline in one line, in the Event the
			// ungate records anyway.
			message += " Start-up: " + d.startup.Summary() + "."
		}
		c.recorder.Eventf(node, v1.EventTypeNormal, EventNodeUngated, "Removed taint %s: %s", c.opts.TaintKey, message)
	}
}

// bootRecordToWrite returns the boot record the node's write carries (nil:
// none). It is kept only on nodes that list gating extensions: nodes that do
// not use nodehealth are never written, but one whose record names a
// fail-open that ended off its list loses it. A write of dead marks alone (a node
// held by a guard) is rate limited, so that a mass failure under a
// suspension does not write every Node at once; the node tries again
// shortly.
func (c *Controller) bootRecordToWrite(node *v1.Node, d decision) *string {
	if (countAffecting(d.statuses) == 0 && !d.failOpenLeavesRecord) || !(d.recordBoot || (d.ended && !d.taint)) {
		return nil
	}
	rec := d.record.String()
	if node.Annotations[nodev1alpha1.BootAnnotation] == rec {
		return nil
	}
	if d.deadMarksChanged && !d.started && !d.ended && onlyDeadMarksDiffer(node, d.record) && !c.deadMarks.TryAccept() {
		c.queue.AddAfter(node.Name, deadMarkRetry)
		return nil
	}
	return &rec
}

// onlyDeadMarksDiffer reports whether the node's boot record is want but
// for its dead marks. A record of another boot is never a write of dead
// marks alone, though its marks differ too: held back, it left a node in
// service with the record of its previous boot, which a restarted
// controller takes for a reboot while it was down (simulation seed
// 8831765713037781631: an ungate in a new boot whose write an outage
// refused, retried after it under the limit of a mass failure's marks).
func onlyDeadMarksDiffer(node *v1.Node, want bootRecord) bool {
	have, ok := parseBootRecord(node.Annotations[nodev1alpha1.BootAnnotation])
	if !ok {
		return false
	}
	have.Dead, want.Dead = nil, nil
	return equalRecords(have, want)
}

// nodeInputs reads what an evaluation of node needs: the extensions it
// requires (as rules and registrations will have its list) and its facts. An
// error means its list cannot be judged: it cannot be parsed, or rules and
// registrations overflow the limits.
func (c *Controller) nodeInputs(node *v1.Node) ([]requiredExtension, nodeFacts, error) {
	list, err := decodeCachedList(node, c.opts.LeaseNamespace)
	if err != nil {
		return nil, nodeFacts{}, err
	}
	desired, _, err := c.desiredList(node, list)
	if err != nil {
		return nil, nodeFacts{}, listBuildError{kind: "desired", err: err}
	}
	exts := resolveExtensions(desired, node.Name, c.opts.LeaseNamespace, c.rules)
	facts := nodeFacts{
		name:            node.Name,
		uid:             node.UID,
		resourceVersion: node.ResourceVersion,
		bootID:          node.Status.NodeInfo.BootID,
		zone:            zoneOf(node),
		tainted:         nodeutil.HasTaint(node, c.opts.TaintKey, c.opts.TaintEffect),
		noExecute:       nodeutil.HasTaint(node, c.opts.TaintKey, v1.TaintEffectNoExecute),
		created:         node.CreationTimestamp.Time,
		leaving:         leavingFactsOf(node, &c.opts),
	}
	facts.record, facts.hasRecord = parseBootRecord(node.Annotations[nodev1alpha1.BootAnnotation])
	return exts, facts, nil
}

// forgetReplaced forgets a node the informer saw deleted and created again
// since its last sync: the name's state holds another UID, and an Add came
// after the initial list (live). It is a new node (NodeRegistered), as it is
// when the deletion's sync runs before the creation is delivered, whichever
// a worker reaches first (simulation seed 16025508996173224691: with
// several workers the deletion and the creation both came before the sync,
// which took them for a re-creation). A UID change seen only in an update, a
// watch that missed the deletion, stays a re-creation (NodeRecreated).
func (c *Controller) forgetReplaced(node *v1.Node) {
	c.mu.Lock()
	st := c.nodes[node.Name]
	replaced := st != nil && st.uid != "" && st.uid != node.UID && c.live.Has(node.Name)
	c.mu.Unlock()
	if !replaced {
		return
	}
	c.forgetNode(node.Name)
	c.mu.Lock()
	c.live.Insert(node.Name)
	c.mu.Unlock()
}

func (c *Controller) forgetNode(name string) {
	now := c.clock.Now()
	c.mu.Lock()
	delete(c.nodes, name)
	c.live.Delete(name)
	c.dropLeaseRefs(name)
	c.updateContribution(name, contribution{})
	changes := c.blast.update(name, "", false, false)
	c.mu.Unlock()
	// A deleted node's drain, and its record of the pods it left, go with it.
	c.drains.end(name)
	c.handleSuspensionChanges(context.Background(), changes, now)
}
