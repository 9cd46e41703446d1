package nodehealth

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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
	if node.Labels[nodev1alpha1.ExcludeLabel] == "true" {
		return c.syncExcluded(ctx, node)
	}
	exts, facts, err := c.nodeInputs(node)
	if err != nil {
		c.reportInvalidList(ctx, node, err)
		return nil
	}
	r := c.evaluateNode(node, exts, facts)
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
	// A condition left from before the exclusion (possibly False) would
	// keep telling readers the node's extensions are not ready, though
	// nothing evaluates them any more.
	if nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil && !conditionMatches(node, v1.ConditionUnknown, nodev1alpha1.ReasonNodeExcluded) {
		return c.writeCondition(ctx, node, v1.ConditionUnknown, nodev1alpha1.ReasonNodeExcluded,
			fmt.Sprintf("The node is labelled %s=true: the controller does not evaluate its system extensions and never gates it.", nodev1alpha1.ExcludeLabel))
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
	c.indexLeaseRefs(name, exts)
	r.prevExtReady = st.extReady
	r.wasGated, r.wasSuppressed = st.gated, st.suppressed
	in := evalInput{
		now:          r.now,
		opts:         &c.opts,
		node:         facts,
		prev:         st,
		exts:         exts,
		leases:       c.tracker.lookupLeases(exts),
		live:         r.live,
		ownViewStale: c.ownViewStaleLocked(),
		blast:        c.blast.view(name, facts.zone),
		recount:      true,
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
	r.escalated = st.escalated
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
	next.invalidList = ""
	next.exts = exts
	next.steadyLeases = nil
	if d.steady {
		next.steadyLeases = make([]types.NamespacedName, len(exts))
		for i, e := range exts {
			next.steadyLeases[i] = types.NamespacedName{Namespace: e.lease.Namespace, Name: e.lease.Name}
		}
	}
	next.suppressed = d.suppressed
	next.extReady = make(map[string]bool, len(d.statuses))
	for _, s := range d.statuses {
		next.extReady[s.name] = s.ready
	}
	*st = *next
}

// conditionOf builds the node's SystemExtensionsReady condition from the
// evaluation in r and decides whether it must be written. Callers hold c.mu.
func (c *Controller) conditionOf(node *v1.Node, st *nodeState, r *nodeResult) {
	name, d := node.Name, r.d
	r.status, r.reason, r.message, r.sig = conditionFor(r.now, st, d, r.suspendedWhy)
	r.message, r.sig = c.withPodsLeft(name, st, r.message, r.sig)
	if st.conditionSig == "" && conditionMatches(node, r.status, r.reason) {
		// After a start or a failover, a condition that already says the
		// same is adopted rather than rewritten on every node.
		st.conditionSig = r.sig
	}
	// A condition someone else overwrote (a status writer working from a
	// stale read) is put back: the signature alone only says what this
	// controller last wrote, not what the node holds.
	// In a dry run nothing is written, so the node never holds what this
	// controller would write: that is not drift.
	drifted := !c.opts.DryRun && st.conditionSig != "" && (len(d.statuses) > 0 || nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil) && !conditionMatches(node, r.status, r.reason)
	r.conditionChanged = r.sig != st.conditionSig || drifted
	if r.conditionChanged && !c.opts.DryRun && conditionHolds(node, r.status, r.reason, r.message) {
		// The node already says exactly this (after a start, every Lease
		// counts as fresh until its grace runs out, and the condition comes
		// back to what the previous instance wrote): nothing to write.
		st.conditionSig, r.conditionChanged = r.sig, false
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
// Node write, then the condition; it queues the escalation and the next
// check.
func (c *Controller) apply(ctx context.Context, node *v1.Node, r nodeResult) error {
	d, st, name := r.d, r.st, node.Name
	w := nodeWrite{taint: d.taint, noExecute: d.noExecute, list: c.listFor, bootRecord: c.bootRecordToWrite(node, d)}
	c.mu.Lock()
	gated := st.gated
	c.mu.Unlock()
	failing := d.failing
	zone := node.Labels[zoneLabel]
	w.guard = func(ch writeChanges) error {
		return c.additionHeld(zone, ch.noExecuteAdded, ch.taintAdded && failing)
	}
	if d.started || (gated && !r.wasGated) {
		w.reason = "gated: " + r.reason
	} else if d.ended {
		w.reason = "ungated"
	}
	written, err := c.writeNode(ctx, node, w)
	if err != nil {
		return err
	}
	// written is empty in a dry run: no latency observed, no Event.
	if written.taintAdded {
		if !d.detectedAt.IsZero() {
			c.metrics.DetectionLatency.Observe(c.clock.Since(d.detectedAt).Seconds())
		}
		c.recorder.Eventf(node, v1.EventTypeWarning, EventNodeGated, "Added taint %s:%s: %s", c.opts.TaintKey, c.opts.TaintEffect, r.message)
	}
	if written.taintRemoved {
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

	// Every node that lists an extension carries the condition (a node
	// whose extensions do not affect readiness says NoRequiredExtensions,
	// which the update operator's health gate reads); nodes that do not use
	// nodehealth are never written.
	if r.conditionChanged && (len(d.statuses) > 0 || nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition) != nil) {
		if err := c.writeCondition(ctx, node, r.status, r.reason, r.message); err != nil {
			return err
		}
		c.mu.Lock()
		st.conditionSig = r.sig
		c.mu.Unlock()
	}

	if d.escalate {
		c.evictions.Add(name)
	}
	if !d.nextCheck.IsZero() {
		c.queue.AddAfter(name, d.nextCheck.Sub(r.now))
	}
	return nil
}

// bootRecordToWrite returns the boot record the node's write carries (nil:
// none). It is kept only on nodes that list gating extensions: nodes that do
// not use nodehealth are never written. A write of dead marks alone (a node
// held by a guard) is rate limited, so that a mass failure under a
// suspension does not write every Node at once; the node tries again
// shortly.
func (c *Controller) bootRecordToWrite(node *v1.Node, d decision) *string {
	if countAffecting(d.statuses) == 0 || !(d.recordBoot || (d.ended && !d.taint)) {
		return nil
	}
	rec := d.record.String()
	if node.Annotations[nodev1alpha1.BootAnnotation] == rec {
		return nil
	}
	if d.deadMarksChanged && !d.started && !d.ended && !c.deadMarks.TryAccept() {
		c.queue.AddAfter(node.Name, deadMarkRetry)
		return nil
	}
	return &rec
}

// additionHeld re-checks the guards right before a taint addition is
// written: the own-view guard holds every addition, the blast radius failure
// taints and the NoExecute escalation. A guard that fired between the
// decision and the write (or between a conflict and its retry) turns the
// write into an error, and the node is decided again.
func (c *Controller) additionHeld(zone string, noExecute, failureTaint bool) error {
	ownViewStale, suspended, why := c.guardsHold(zone)
	if ownViewStale {
		return errors.New("the own view went stale since the decision; not adding the taint, deciding again")
	}
	if suspended && (noExecute || failureTaint) {
		return fmt.Errorf("gating was suspended since the decision (%s); not adding the taint, deciding again", why)
	}
	return nil
}

// guardsHold asks both guards: whether the own view is stale (every taint
// addition and eviction held), and whether the blast radius suspends failure
// taints and evictions in zone, and why. Every path that adds a taint or
// evicts asks it (additionHeld, escalationDue).
func (c *Controller) guardsHold(zone string) (ownViewStale, suspended bool, why string) {
	c.mu.Lock()
	ownViewStale = c.ownViewStaleLocked()
	c.mu.Unlock()
	suspended, why = c.blast.suspended(zone)
	return ownViewStale, suspended, why
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
		name:      node.Name,
		uid:       node.UID,
		bootID:    node.Status.NodeInfo.BootID,
		zone:      node.Labels[zoneLabel],
		tainted:   nodeutil.HasTaint(node, c.opts.TaintKey, c.opts.TaintEffect),
		noExecute: nodeutil.HasTaint(node, c.opts.TaintKey, v1.TaintEffectNoExecute),
		created:   node.CreationTimestamp.Time,
		leaving:   leavingFactsOf(node, &c.opts),
	}
	facts.record, facts.hasRecord = parseBootRecord(node.Annotations[nodev1alpha1.BootAnnotation])
	return exts, facts, nil
}

// primeBlastRadius counts every node of the caches for the blast radius
// before the first sync. Without it, a controller restarted during an
// incident would judge the first nodes it syncs against counters that hold
// only those nodes, and taint them although most of the cluster fails. Each
// node is evaluated on a scratch state as its first sync will evaluate it;
// nothing is written and no state is kept.
func (c *Controller) primeBlastRadius(ctx context.Context) {
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.clock.Now()
	var changes []suspensionChange
	for _, node := range nodes {
		if node.Labels[nodev1alpha1.ExcludeLabel] == "true" {
			continue
		}
		exts, facts, err := c.nodeInputs(node)
		if err != nil {
			continue
		}
		c.mu.Lock()
		live := c.live.Has(node.Name)
		c.mu.Unlock()
		d := evaluate(evalInput{now: now, opts: &c.opts, node: facts, prev: newNodeState(now), exts: exts,
			leases: c.tracker.lookupLeases(exts), live: live, blast: c.blast.view(node.Name, facts.zone)})
		changes = append(changes, c.blast.update(node.Name, facts.zone, d.tracked, d.failing)...)
	}
	failing := len(c.blast.failingNodes())
	klog.FromContext(ctx).Info("Counted the nodes for the blast radius before the first sync", "nodes", len(nodes), "failing", failing)
	c.handleSuspensionChanges(ctx, changes, now)
}

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

// updateEscalationClocks pauses the eviction clock of every failing node whose
// escalation is suspended at at (blast radius of its zone or the cluster, or
// the controller's own view) and resumes the others.
func (c *Controller) updateEscalationClocks(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ownViewStale := c.ownViewStaleLocked()
	for name, st := range c.nodes {
		m, counted := c.blast.memberOf(name)
		if !counted || !m.failing {
			continue
		}
		suspended, _ := c.blast.suspended(m.zone)
		st.eviction.advance(at, suspended || ownViewStale)
	}
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

// indexLeaseRefs remembers which Leases a node references under a
// non-default name, replacing what it referenced before. Callers hold c.mu.
func (c *Controller) indexLeaseRefs(node string, exts []requiredExtension) {
	c.dropLeaseRefs(node)
	var keys []string
	for _, e := range exts {
		if e.lease.Name == e.name+"."+node {
			continue
		}
		key := e.lease.String()
		if c.leaseRefs[key] == nil {
			c.leaseRefs[key] = sets.New[string]()
		}
		c.leaseRefs[key].Insert(node)
		keys = append(keys, key)
	}
	if len(keys) > 0 {
		c.nodeLeaseRefs[node] = keys
	}
}

// dropLeaseRefs forgets the Leases a node referenced. Callers hold c.mu.
func (c *Controller) dropLeaseRefs(node string) {
	for _, key := range c.nodeLeaseRefs[node] {
		if nodes := c.leaseRefs[key]; nodes != nil {
			nodes.Delete(node)
			if nodes.Len() == 0 {
				delete(c.leaseRefs, key)
			}
		}
	}
	delete(c.nodeLeaseRefs, node)
}

func (c *Controller) forgetNode(name string) {
	c.mu.Lock()
	delete(c.nodes, name)
	c.live.Delete(name)
	c.dropLeaseRefs(name)
	c.updateContribution(name, contribution{})
	c.mu.Unlock()
	// A deleted node's drain, and its record of the pods it left, go with it.
	c.drains.end(name)
	c.handleSuspensionChanges(context.Background(), c.blast.update(name, "", false, false), c.clock.Now())
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
	first := st.invalidList != key
	st.invalidList = key
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
	if werr := c.writeCondition(ctx, node, v1.ConditionUnknown, EventInvalidExtensionList, message); werr != nil {
		klog.FromContext(ctx).Error(werr, "Writing the condition of a node with an invalid extension list")
		return
	}
	c.mu.Lock()
	if st := c.nodes[node.Name]; st != nil {
		// Whatever the list becomes, the condition must be rewritten.
		st.conditionSig = "invalid"
	}
	c.mu.Unlock()
}

// updateContribution moves a node's share of the gauges. Callers hold c.mu.
func (c *Controller) updateContribution(node string, next contribution) {
	prev := c.contributions[node]
	if prev.reason != "" {
		c.metrics.GatedNodes.WithLabelValues(string(prev.reason)).Dec()
	}
	for _, e := range prev.notReady {
		c.metrics.notReadySeries.dec(e)
	}
	if prev.invalid {
		c.metrics.InvalidLists.Dec()
	}
	if prev.tracked {
		c.metrics.TrackedNodes.Dec()
	}
	if prev.leaving {
		c.metrics.LeavingNodes.Dec()
	}
	if next.reason != "" {
		c.metrics.GatedNodes.WithLabelValues(string(next.reason)).Inc()
		next.gatedSince = prev.gatedSince
		if prev.reason == "" {
			next.gatedSince = c.clock.Now()
		}
	}
	// notReady becomes the label values the node is counted under, so that
	// the next update takes it from the same series.
	series := make([]string, 0, len(next.notReady))
	for _, e := range next.notReady {
		l := c.metrics.notReadySeries.label(e)
		if !slices.Contains(series, l) {
			series = append(series, l)
			c.metrics.notReadySeries.inc(l)
		}
	}
	next.notReady = series
	if next.invalid {
		c.metrics.InvalidLists.Inc()
	}
	if next.tracked {
		c.metrics.TrackedNodes.Inc()
	}
	if next.leaving {
		c.metrics.LeavingNodes.Inc()
	}
	if next.reason == "" && len(next.notReady) == 0 && !next.invalid && !next.tracked && !next.leaving {
		delete(c.contributions, node)
		return
	}
	c.contributions[node] = next
}

// longestGates returns, by reason, how long the longest-gated node has been
// gated (nodehealth_longest_gate_seconds).
func (c *Controller) longestGates() map[gateCause]float64 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[gateCause]float64{}
	for _, contrib := range c.contributions {
		if contrib.reason == "" {
			continue
		}
		age := now.Sub(contrib.gatedSince).Seconds()
		if longest, ok := out[contrib.reason]; !ok || age > longest {
			out[contrib.reason] = age
		}
	}
	return out
}

func gateReason(st *nodeState) gateCause {
	if !st.gated {
		return ""
	}
	return st.gate.cause
}

func notReadyNames(statuses []extensionStatus) []string {
	var out []string
	for _, s := range statuses {
		if !s.ready {
			out = append(out, s.name)
		}
	}
	sort.Strings(out)
	return out
}

// handleSuspensionChanges reports suspensions that began or ended at at, and
// pauses or resumes the eviction clock of every failing node at that instant:
// a node not synced during the suspension must not have the suspension
// counted as failure time.
func (c *Controller) handleSuspensionChanges(ctx context.Context, changes []suspensionChange, at time.Time) {
	logger := klog.FromContext(ctx)
	if len(changes) > 0 {
		c.updateEscalationClocks(at)
	}
	for _, ch := range changes {
		scope := "cluster"
		if strings.HasPrefix(ch.scope, "zone ") {
			scope = "zone"
		}
		if ch.suspended {
			logger.Info("Suspending failure taints and evictions: too many nodes fail at once, which looks like a broken extension rollout rather than broken nodes",
				"scope", ch.scope, "failing", ch.failing, "total", ch.total, "threshold", ch.threshold)
			c.metrics.Suspensions.WithLabelValues(scope).Inc()
		} else {
			logger.Info("Resuming failure taints and evictions", "scope", ch.scope, "failing", ch.failing, "total", ch.total)
			for _, n := range c.blast.failingNodes() {
				c.enqueue(n)
			}
		}
	}
	if len(changes) > 0 {
		cluster, zones := c.blast.suspendedScopes()
		v := 0.0
		if cluster {
			v = 1
		}
		c.metrics.GatingSuspended.WithLabelValues("cluster").Set(v)
		c.metrics.GatingSuspended.WithLabelValues("zones").Set(float64(zones))
	}
}

// recountFailing brings the blast-radius count up to date before a failure
// taint is decided: every other node is counted from its last-evaluated facts
// (its list, whether it was ready in its boot, planned releases, fail-open)
// combined with the current expiry of its Leases, so that a Lease past its
// expiry counts whether or not its node was evaluated since. Callers hold
// c.mu. It costs one Lease lookup per extension of every node, and runs only
// when a node is about to be tainted for a failure while nothing is
// suspended.
func (c *Controller) recountFailing(current string, now time.Time) []suspensionChange {
	var changes []suspensionChange
	for name, st := range c.nodes {
		if name == current || st.exts == nil || st.invalidList != "" {
			continue
		}
		changes = append(changes, c.blast.refresh(name, c.failingAt(st, now))...)
	}
	return changes
}

// failingAt reports whether a node counts as failing at now from what its
// last evaluation found and the current state of its Leases (docs/controller.md,
// blast radius): an unplanned failure of a gating extension after the node
// was ready in its boot, with no planned release in progress.
func (c *Controller) failingAt(st *nodeState, now time.Time) bool {
	if !st.readyInBoot || len(st.gate.planned) > 0 || st.leavingSignal(now, &c.opts) != "" {
		return false
	}
	failing := false
	for _, ext := range st.exts {
		if !ext.affects || st.hasFailedOpen(ext.name) {
			continue
		}
		obs, ok := c.tracker.get(ext.lease.Namespace, ext.lease.Name)
		switch {
		case ok && obs.released() && c.opts.MaintenanceReasons.Has(obs.reason) && st.plannedInBoot(ext.name):
			return false
		case !ok, obs.released(), obs.observedAt.IsZero(), !now.Before(obs.expiresAt(c.opts.RenewalGrace)):
			failing = true
		case st.markedDead(ext.name, obs):
			failing = true
		}
	}
	return failing
}

// plannedInBoot reports whether the planned release of ext belongs to the
// node's current boot, as its last evaluation classified it: a release of
// the boot before a reboot is no maintenance of this one. A release the
// evaluation has not seen yet is taken as this boot's, as the evaluation
// does (plannedInThisBoot).
func (s *nodeState) plannedInBoot(ext string) bool {
	boot, seen := s.plannedBoot[ext]
	return !seen || boot == s.bootID
}
