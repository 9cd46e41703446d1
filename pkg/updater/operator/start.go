package operator

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Reasons the rollout starts no node, for the halt metric and Events.
const (
	HaltPaused        = "Paused"
	HaltUpdateFailed  = "UpdateFailed"
	HaltOutsideWindow = "OutsideWindow"
)

var haltReasons = []string{HaltPaused, HaltUpdateFailed, HaltOutsideWindow}

type candidate struct {
	name, zone, version string
	own                 bool
}

// syncStart runs the start pass: it records the failures that are due,
// takes a snapshot of the cache, lets planStarts decide per policy, reports
// (Events, timers, metrics, the policies' status) and, when some policy
// would start a node, confirms with a consistent LIST of shadows and
// policies and starts what planStarts decides on that fresher snapshot. A
// stale cache (just after acquiring leadership, or behind a burst of
// writes) never overshoots the limits, and a pause or pin written before
// the LIST is honoured.
//
// Passes are serialized (one queue key, countMu), and a pass writes a
// policy's observedGeneration before it lists and starts: once the status
// shows a generation, no start decided on an older one follows. A status
// that only counts differently is written after the starts, and the pass's
// requests go through startClient: a hand-off waits for neither.
func (c *Controller) syncStart(ctx context.Context) error {
	c.countMu.Lock()
	defer c.countMu.Unlock()
	now := c.clock.Now()
	shadows, err := c.shadowLister.List(labels.Everything())
	if err != nil {
		return err
	}
	c.updateGauges(shadows)

	// Failures before starts: a failure that is due halts its policy even
	// if its node's own sync has not run yet.
	recorded, err := c.recordDueFailures(ctx, shadows)
	if err != nil {
		return err
	}
	if recorded {
		return nil // the failures' events bring the start pass back
	}

	policies, err := c.policyLister.List(labels.Everything())
	if err != nil {
		return err
	}
	reads := gateReads{}
	anyStart, statuses, err := c.planFromCache(ctx, shadows, policies, now, reads)
	if err != nil {
		return err
	}
	// A new generation is observed before any start decided on it; other
	// changes of the status (counts, offers) wait until after the starts,
	// which they would only delay.
	if !anyStart || statuses.observeGeneration {
		if err := c.writeStatuses(ctx, statuses); err != nil || !anyStart {
			return err
		}
		statuses = pendingStatuses{}
	}

	// Confirm with consistent reads: resourceVersion "" is served from etcd.
	fresh, freshPolicies, err := c.listConsistently(ctx)
	if err != nil {
		return err
	}
	if err := c.startConfirmed(ctx, fresh, freshPolicies, now, reads); err != nil {
		return err
	}
	return c.writeStatuses(ctx, statuses)
}

// recordDueFailures records the failures that are due and says whether it
// recorded any.
func (c *Controller) recordDueFailures(ctx context.Context, shadows []*updatesv1alpha1.BottlerocketShadow) (bool, error) {
	recorded := false
	for _, s := range shadows {
		if !counts(s) {
			continue
		}
		node, err := c.nodeOf(s)
		if err != nil {
			return false, err
		}
		if f := c.dueFailure(s, node, c.now()); f != nil {
			if err := c.recordFailure(ctx, s, f); err != nil {
				return false, err
			}
			recorded = true
		}
	}
	return recorded, nil
}

// planFromCache plans every policy on the cache and reports the plans
// (Events, timers, metrics); it says whether some policy would start a node
// and returns the policies' statuses that changed.
func (c *Controller) planFromCache(ctx context.Context, shadows []*updatesv1alpha1.BottlerocketShadow, policies []*updatesv1alpha1.UpdatePolicy, now time.Time, reads gateReads) (bool, pendingStatuses, error) {
	pols := parsePolicies(policies, c.opts.Deadlines)
	snap, err := c.snapshot(shadows, pols, now)
	if err != nil {
		return false, pendingStatuses{}, err
	}
	plans := make(map[string]plan, len(pols))
	anyStart := false
	for _, pol := range pols {
		p := c.planGated(ctx, snap, pol, reads)
		plans[pol.name] = p
		anyStart = anyStart || len(p.starts) > 0
	}
	c.report(ctx, snap, pols, plans)
	return anyStart, changedStatuses(snap, pols, plans, policies), nil
}

// listConsistently lists the shadows and the policies from etcd rather than
// the cache, for the starts to be decided on.
func (c *Controller) listConsistently(ctx context.Context) ([]*updatesv1alpha1.BottlerocketShadow, []*updatesv1alpha1.UpdatePolicy, error) {
	list, err := c.startClient.UpdatesV1alpha1().BottlerocketShadows().List(ctx, metav1.ListOptions{ResourceVersion: ""})
	if err != nil {
		return nil, nil, fmt.Errorf("listing shadows to confirm the update count: %w", err)
	}
	fresh := make([]*updatesv1alpha1.BottlerocketShadow, 0, len(list.Items))
	for i := range list.Items {
		fresh = append(fresh, &list.Items[i])
	}
	plist, err := c.startClient.UpdatesV1alpha1().UpdatePolicies().List(ctx, metav1.ListOptions{ResourceVersion: ""})
	if err != nil {
		return nil, nil, fmt.Errorf("listing update policies to confirm them: %w", err)
	}
	freshPolicies := make([]*updatesv1alpha1.UpdatePolicy, 0, len(plist.Items))
	for i := range plist.Items {
		freshPolicies = append(freshPolicies, &plist.Items[i])
	}
	return fresh, freshPolicies, nil
}

// startConfirmed plans every policy again on the consistent lists and
// starts what that plan decides.
func (c *Controller) startConfirmed(ctx context.Context, fresh []*updatesv1alpha1.BottlerocketShadow, freshPolicies []*updatesv1alpha1.UpdatePolicy, now time.Time, reads gateReads) error {
	pols := parsePolicies(freshPolicies, c.opts.Deadlines)
	snap, err := c.snapshot(fresh, pols, now)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for _, pol := range pols {
		p := c.planGated(ctx, snap, pol, reads)
		if p.gatesUnread {
			return fmt.Errorf("UpdatePolicy %s: a start was planned without its gates", pol.name)
		}
		for _, st := range p.starts {
			logger.V(2).Info("Starting node", "policy", pol.name, "generation", pol.generation, "node", st.node)
			// The started version is the pin when the policy has one.
			if err := c.start(ctx, snap.shadows[st.node], st.version, pol.name, pol.ignoreWaves); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshot reads the Nodes the shadows describe and which policies select
// them.
func (c *Controller) snapshot(shadows []*updatesv1alpha1.BottlerocketShadow, pols []*policy, now time.Time) (*snapshot, error) {
	snap := &snapshot{now: now, ownNode: c.opts.OwnNode, lifecycleMaxAge: c.opts.LifecycleConditionMaxAge,
		shadows: make(map[string]*updatesv1alpha1.BottlerocketShadow, len(shadows)),
		nodes:   make(map[string]nodeView, len(shadows)), policies: make(map[string]*policy, len(pols)), gates: map[string]*podGate{},
		alertSources: c.opts.AlertSources, hooksConfigured: c.opts.Hooks.configured()}
	for _, p := range pols {
		snap.policies[p.name] = p
	}
	for _, s := range shadows {
		snap.shadows[s.Name] = s
		node, err := c.nodeOf(s)
		if err != nil {
			return nil, err
		}
		if node == nil {
			continue
		}
		set := labels.Set(node.Labels)
		v := nodeView{zone: node.Labels[ZoneLabel], managed: node.DeletionTimestamp == nil && c.opts.Selector.Matches(set), blocked: c.notStartable(node),
			inScope: c.opts.Selector.Matches(set), leaving: nodeutil.LeavingFactsOf(node, c.opts.LeavingNodeTaints), notReady: c.notReady(node)}
		for _, p := range pols {
			if p.selector.Matches(set) {
				v.selectedBy = append(v.selectedBy, p.name)
			}
		}
		snap.nodes[s.Name] = v
	}
	return snap, nil
}

// report sends the planned Events, arms the timers, and logs and counts the
// halts.
func (c *Controller) report(ctx context.Context, snap *snapshot, pols []*policy, plans map[string]plan) {
	notes := conflictNotes(snap)
	var wakeAt time.Time
	for _, pol := range pols {
		p := plans[pol.name]
		for n, nt := range p.notes {
			notes[n] = nt
		}
		wake(&wakeAt, p.wake)
	}
	for _, name := range sortedNames(notes) {
		s := snap.shadows[name]
		if nt := notes[name]; nt.reason == "" {
			c.forget(name)
		} else if s != nil {
			c.tell(s, nt.reason, "%s", nt.message)
		}
	}
	if !wakeAt.IsZero() {
		c.after(startKey, wakeAt.Sub(snap.now))
	}
	c.setHalts(ctx, pols, plans)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pendingStatuses are the policies whose status a pass changes, with their
// new status.
type pendingStatuses struct {
	writes []statusWrite
	// observeGeneration: some write records a new observedGeneration.
	observeGeneration bool
}

type statusWrite struct {
	policy *updatesv1alpha1.UpdatePolicy // the policy as the pass read it
	status updatesv1alpha1.UpdatePolicyStatus
	pol    *policy
}

// changedStatuses is each policy's status where it changed: zero writes
// while nothing changes.
func changedStatuses(snap *snapshot, pols []*policy, plans map[string]plan, objs []*updatesv1alpha1.UpdatePolicy) pendingStatuses {
	byName := make(map[string]*updatesv1alpha1.UpdatePolicy, len(objs))
	for _, o := range objs {
		byName[o.Name] = o
	}
	var out pendingStatuses
	for _, pol := range pols {
		o := byName[pol.name]
		st := policyStatus(snap, pol, plans[pol.name], &o.Status)
		if apiequality.Semantic.DeepEqual(st, o.Status) {
			continue
		}
		out.writes = append(out.writes, statusWrite{policy: o, status: st, pol: pol})
		out.observeGeneration = out.observeGeneration || st.ObservedGeneration != o.Status.ObservedGeneration
	}
	return out
}

// writeStatuses writes the changed statuses. Only the leader runs the
// controller, so only the leader writes.
func (c *Controller) writeStatuses(ctx context.Context, pending pendingStatuses) error {
	for _, w := range pending.writes {
		o, st, pol := w.policy, w.status, w.pol
		wasConflict := meta.IsStatusConditionTrue(o.Status.Conditions, updatesv1alpha1.PolicySelectorConflict)
		n := o.DeepCopy()
		n.Status = st
		if _, err := c.startClient.UpdatesV1alpha1().UpdatePolicies().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"}); err != nil {
			if apierrors.IsNotFound(err) {
				continue // deleted: its event brings the pass back
			}
			if apierrors.IsConflict(err) {
				// Most often the cache has not caught up with this
				// pass's own last status write, whose event does not
				// bring the pass back (see the policy handler): try
				// again shortly rather than wait for another event.
				c.startQueue.AddRateLimited(startKey)
				continue
			}
			return fmt.Errorf("writing the status of UpdatePolicy %s: %w", pol.name, err)
		}
		if pol.generation != o.Status.ObservedGeneration {
			klog.FromContext(ctx).Info("UpdatePolicy generation observed", "policy", pol.name, "generation", pol.generation,
				"paused", pol.paused, "targetVersion", pol.targetVersion, "invalid", pol.invalid)
		}
		if cond := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.PolicySelectorConflict); cond != nil && cond.Status == metav1.ConditionTrue && !wasConflict {
			c.recorder.Event(o, v1.EventTypeWarning, updatesv1alpha1.PolicySelectorConflict, cond.Message)
		}
		// Once per change of what blocks: the message names the pods.
		if cond := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.PolicyBlocked); cond != nil && cond.Status == metav1.ConditionTrue &&
			!sameCondition(meta.FindStatusCondition(o.Status.Conditions, updatesv1alpha1.PolicyBlocked), cond) {
			c.recorder.Event(o, v1.EventTypeNormal, "StartBlocked", cond.Message)
		}
	}
	return nil
}

func sameCondition(a, b *metav1.Condition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func (c *Controller) start(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, version, policy string, ignoreWaves bool) error {
	c.mu.Lock()
	last := c.lastHealthyEnd
	c.mu.Unlock()
	now := c.now()
	klog.FromContext(ctx).Info("Starting update", "node", s.Name, "from", s.Status.CurrentVersion, "to", version, "policy", policy, "ignoreWaves", ignoreWaves)
	// writeSpec carries spec.ignoreWaves through the update's states.
	s = s.DeepCopy()
	s.Spec.IgnoreWaves = ignoreWaves
	if err := c.writeSpecWith(ctx, c.startClient, s, updatesv1alpha1.StateStagedAndPerformedUpdate, version,
		map[string]string{startedAnnotation: now.UTC().Format(time.RFC3339), updatesv1alpha1.PolicyAnnotation: policy,
			// The version a rollback returns to.
			updatesv1alpha1.FromVersionAnnotation: s.Status.CurrentVersion}); err != nil {
		if apierrors.IsConflict(err) {
			c.startQueue.Add(startKey)
			return nil
		}
		return err
	}
	c.event(s, v1.EventTypeNormal, "UpdateStarted", "Updating from %s to %s (UpdatePolicy %s)", s.Status.CurrentVersion, version, policy)
	c.metrics.Starts.Inc()
	if !last.IsZero() {
		c.metrics.NextStartDelay.Observe(c.clock.Since(last).Seconds())
	}
	return nil
}

// setHalts logs changes of each policy's halt and sends an Event on each
// shadow whose failure stopped halting (it was resumed).
func (c *Controller) setHalts(ctx context.Context, pols []*policy, plans map[string]plan) {
	logger := klog.FromContext(ctx)
	reasons := map[string]string{}
	by := map[string]bool{}
	active := map[string]bool{}
	for _, pol := range pols {
		p := plans[pol.name]
		reasons[pol.name] = p.halt
		for _, n := range p.haltedBy {
			by[n] = true
		}
		for r, on := range p.active {
			active[r] = active[r] || on
		}
	}
	for _, r := range haltReasons {
		v := 0.0
		if active[r] {
			v = 1
		}
		c.metrics.RolloutHalted.WithLabelValues(r).Set(v)
	}
	c.mu.Lock()
	prev, prevBy := c.halted, c.haltedBy
	c.halted, c.haltedBy = reasons, by
	c.mu.Unlock()
	for _, n := range sortedNames(prevBy) {
		if by[n] {
			continue
		}
		if s, err := c.shadowLister.Get(n); err == nil {
			logger.Info("Failed update resumed", "node", n)
			c.event(s, v1.EventTypeNormal, "UpdateResumed", "The failure recorded at %s no longer halts the rollout",
				s.Annotations[updatesv1alpha1.FailedAnnotation])
		}
	}
	for _, n := range sortedNames(by) {
		if !prevBy[n] {
			logger.Info("Rollout halted by a failed update; resume with `kubectl nodehealth update resume NODE`", "node", n,
				"reason", c.shadowAnnotation(n, updatesv1alpha1.FailureReasonAnnotation))
		}
	}
	for _, name := range sortedNames(reasons) {
		if p, ok := prev[name]; ok && p == reasons[name] {
			continue
		}
		if reasons[name] == "" {
			logger.Info("UpdatePolicy may start nodes", "policy", name, "previously", prev[name])
		} else {
			logger.Info("UpdatePolicy starts no node", "policy", name, "reason", reasons[name])
		}
	}
}

func (c *Controller) shadowAnnotation(name, key string) string {
	if s, err := c.shadowLister.Get(name); err == nil {
		return s.Annotations[key]
	}
	return ""
}

// notStartable says why a node must not start ("" when it may): the seed's
// rule never to start on an unhealthy node, and the updater's own
// extension, without which nobody would drain it before the reboot.
func (c *Controller) notStartable(node *v1.Node) string {
	if node.Labels[nodev1alpha1.ExcludeLabel] == "true" {
		return fmt.Sprintf("the node is excluded (%s=true)", nodev1alpha1.ExcludeLabel)
	}
	if cond := nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition); cond == nil || cond.Status != v1.ConditionTrue {
		return fmt.Sprintf("its %s condition is not True", nodev1alpha1.SystemExtensionsReadyCondition)
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(node.Annotations[nodev1alpha1.SystemExtensionsAnnotation], c.opts.LeaseNamespace)
	if err != nil {
		return err.Error()
	}
	for _, e := range list {
		if e.Name == updatesv1alpha1.UpdaterExtension {
			return ""
		}
	}
	return fmt.Sprintf("its %s annotation does not list %s (is the update agent running there?)",
		nodev1alpha1.SystemExtensionsAnnotation, updatesv1alpha1.UpdaterExtension)
}

// notReady says why a node takes a slot of a policy with countNotReady
// ("" when it does not): it is not Ready, or the node-health controller
// gates it for a failure. A gate for planned maintenance (an extension,
// ours included, released its Lease to update) is not a failure: a node
// someone updates is counted by its own signals, ours by its shadow.
func (c *Controller) notReady(node *v1.Node) string {
	if r := nodeutil.Condition(node, v1.NodeReady); r == nil || r.Status != v1.ConditionTrue {
		return "not Ready"
	}
	if !nodeutil.HasTaint(node, c.opts.Drain.ReadinessTaintKey, "") {
		return ""
	}
	cond := nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition)
	if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason == nodev1alpha1.ReasonPlannedMaintenance {
		return ""
	}
	return fmt.Sprintf("gated by the node-health controller (%s False, reason %s)", nodev1alpha1.SystemExtensionsReadyCondition, cond.Reason)
}

// tell sends an Event about a node once per distinct message.
func (c *Controller) tell(s *updatesv1alpha1.BottlerocketShadow, reason, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	c.mu.Lock()
	seen := c.told[s.Name] == msg
	c.told[s.Name] = msg
	c.mu.Unlock()
	if !seen {
		c.event(s, v1.EventTypeNormal, reason, "%s", msg)
	}
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	delete(c.told, name)
	c.mu.Unlock()
}
