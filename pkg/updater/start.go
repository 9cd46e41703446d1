package updater

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/shadow"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
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

// syncStart decides which Idle nodes start an update now. It reads the
// informer cache to find candidates, then confirms the counts with a
// consistent LIST before starting any, so a stale cache (just after
// acquiring leadership, or behind a burst of writes) never overshoots the
// limits.
func (c *Controller) syncStart(ctx context.Context) error {
	c.countMu.Lock()
	defer c.countMu.Unlock()
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	shadows, err := c.shadowLister.List(labels.Everything())
	if err != nil {
		return err
	}
	c.updateGauges(shadows)

	// Failures before starts: a failure that is due halts the rollout even
	// if its node's own sync has not run yet.
	recorded := false
	for _, s := range shadows {
		if !counts(s) {
			continue
		}
		node, err := c.nodeOf(s)
		if err != nil {
			return err
		}
		if f := c.dueFailure(s, node, c.now()); f != nil {
			if err := c.recordFailure(ctx, s, f); err != nil {
				return err
			}
			recorded = true
		}
	}
	if recorded {
		return nil // the failures' events bring the start pass back
	}

	halt, haltedBy := c.haltReason(shadows, now)
	c.setHalt(ctx, halt, haltedBy)
	if halt != "" {
		return nil
	}

	cands, managed := c.candidates(ctx, shadows, now)
	if len(cands) == 0 || !c.anyStartable(cands, shadows, managed) {
		return nil
	}

	// Confirm with a consistent read: resourceVersion "" is served from etcd.
	list, err := c.client.UpdatesV1alpha1().BottlerocketShadows().List(ctx, metav1.ListOptions{ResourceVersion: ""})
	if err != nil {
		return fmt.Errorf("listing shadows to confirm the update count: %w", err)
	}
	fresh := make(map[string]*updatesv1alpha1.BottlerocketShadow, len(list.Items))
	fresher := make([]*updatesv1alpha1.BottlerocketShadow, 0, len(list.Items))
	for i := range list.Items {
		fresh[list.Items[i].Name] = &list.Items[i]
		fresher = append(fresher, &list.Items[i])
	}
	h, by := c.haltReason(fresher, now)
	c.setHalt(ctx, h, by)
	if h != "" {
		return nil
	}
	total := 0
	zoneTotal := map[string]int{}
	updating := 0
	zoneUpdating := map[string]int{}
	othersBusy := false
	for _, s := range fresher {
		zone := managed[s.Name]
		if !counts(s) || c.scaledDown(s) {
			continue
		}
		updating++
		zoneUpdating[zone]++
		if s.Name != c.opts.OwnNode {
			othersBusy = true
		}
	}
	for _, zone := range managed {
		total++
		zoneTotal[zone]++
	}
	limit, _ := scaledLimit(c.opts.MaxConcurrent, total)

	for i, cand := range cands {
		s, ok := fresh[cand.name]
		if !ok || s.Spec.State != updatesv1alpha1.StateIdle || s.Status.CurrentState != updatesv1alpha1.StateIdle || counts(s) {
			continue // changed since the cache was read; its event brings us back
		}
		if cand.own && (othersBusy || i < len(cands)-1) {
			logger.V(2).Info("The operator's own node waits until every other node is done", "node", cand.name)
			continue
		}
		if updating >= limit {
			logger.V(2).Info("Concurrency limit reached", "updating", updating, "limit", limit)
			return nil
		}
		if c.opts.MaxConcurrentPerZone != nil {
			zl, _ := scaledLimit(*c.opts.MaxConcurrentPerZone, zoneTotal[cand.zone])
			if zoneUpdating[cand.zone] >= zl {
				logger.V(2).Info("Zone limit reached", "zone", cand.zone, "updating", zoneUpdating[cand.zone], "limit", zl)
				continue
			}
		}
		if err := c.start(ctx, s, cand.version); err != nil {
			return err
		}
		updating++
		zoneUpdating[cand.zone]++
		if !cand.own {
			othersBusy = true
		}
	}
	return nil
}

func (c *Controller) start(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, version string) error {
	c.mu.Lock()
	last := c.lastHealthyEnd
	c.mu.Unlock()
	now := c.now()
	klog.FromContext(ctx).Info("Starting update", "node", s.Name, "from", s.Status.CurrentVersion, "to", version)
	if err := c.writeSpec(ctx, s, updatesv1alpha1.StateStagedAndPerformedUpdate, version,
		map[string]string{startedAnnotation: now.UTC().Format(time.RFC3339)}); err != nil {
		if apierrors.IsConflict(err) {
			c.queue.Add(startKey)
			return nil
		}
		return err
	}
	c.event(s, v1.EventTypeNormal, "UpdateStarted", "Updating from %s to %s", s.Status.CurrentVersion, version)
	c.metrics.Starts.Inc()
	if !last.IsZero() {
		c.metrics.NextStartDelay.Observe(c.clock.Since(last).Seconds())
	}
	return nil
}

// anyStartable reports whether the cache leaves some candidate under the
// limits. The cache can only lag behind the slots taken, never show one
// taken that is free for longer than until the event that frees it, which
// brings the start pass back: when it shows every candidate blocked, the
// consistent LIST is not needed.
func (c *Controller) anyStartable(cands []candidate, shadows []*updatesv1alpha1.BottlerocketShadow, managed map[string]string) bool {
	updating := 0
	zoneUpdating, zoneTotal := map[string]int{}, map[string]int{}
	for _, zone := range managed {
		zoneTotal[zone]++
	}
	for _, s := range shadows {
		if counts(s) && !c.scaledDown(s) {
			updating++
			zoneUpdating[managed[s.Name]]++
		}
	}
	if limit, _ := scaledLimit(c.opts.MaxConcurrent, len(managed)); updating >= limit {
		return false
	}
	if c.opts.MaxConcurrentPerZone == nil {
		return true
	}
	for _, cand := range cands {
		if zl, _ := scaledLimit(*c.opts.MaxConcurrentPerZone, zoneTotal[cand.zone]); zoneUpdating[cand.zone] < zl {
			return true
		}
	}
	return false
}

// scaledDown reports whether the shadow's Node was deleted (or replaced by a
// Node of the same name) before its update got past the drain: it was scaled
// down, not broken by the release, and its slot is free at once, before the
// shadow controller deleted the shadow. A node deleted past the drain counts
// until the update controller marks it failed.
func (c *Controller) scaledDown(s *updatesv1alpha1.BottlerocketShadow) bool {
	node, err := c.nodeLister.Get(s.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return false
	}
	return (err != nil || !shadow.Describes(s, node)) && !shadow.PastDrain(s)
}

// haltReason says why no node may start now ("" when they may) and which
// nodes' failures halt the rollout. Every active reason is reported in the
// halt metric; the first of paused, failed, outside-window is returned.
func (c *Controller) haltReason(shadows []*updatesv1alpha1.BottlerocketShadow, now time.Time) (string, []string) {
	var by []string
	for _, s := range shadows {
		if shadow.Halting(s) {
			by = append(by, s.Name)
		}
	}
	sort.Strings(by)
	open, change := c.opts.Windows.State(now)
	if !change.IsZero() && !open {
		c.after(startKey, change.Sub(now))
	}
	active := map[string]bool{HaltPaused: c.opts.Paused, HaltUpdateFailed: len(by) > 0, HaltOutsideWindow: !open}
	reason := ""
	for _, r := range haltReasons {
		v := 0.0
		if active[r] {
			v = 1
			if reason == "" {
				reason = r
			}
		}
		c.metrics.RolloutHalted.WithLabelValues(r).Set(v)
	}
	return reason, by
}

// setHalt logs changes of the halt and sends an Event on each shadow whose
// failure stopped halting the rollout (it was resumed).
func (c *Controller) setHalt(ctx context.Context, reason string, by []string) {
	now := map[string]bool{}
	for _, n := range by {
		now[n] = true
	}
	c.mu.Lock()
	prev, prevBy := c.halted, c.haltedBy
	c.halted, c.haltedBy = reason, now
	c.mu.Unlock()
	logger := klog.FromContext(ctx)
	for n := range prevBy {
		if now[n] {
			continue
		}
		if s, err := c.shadowLister.Get(n); err == nil {
			logger.Info("Failed update resumed", "node", n)
			c.event(s, v1.EventTypeNormal, "UpdateResumed", "The failure recorded at %s no longer halts the rollout",
				s.Annotations[updatesv1alpha1.FailedAnnotation])
		}
	}
	for n := range now {
		if !prevBy[n] {
			logger.Info("Rollout halted by a failed update; resume with `kubectl nodehealth update resume NODE`", "node", n,
				"reason", c.shadowAnnotation(n, updatesv1alpha1.FailureReasonAnnotation))
		}
	}
	if prev != reason {
		if reason == "" {
			logger.Info("Rollout may start nodes", "previously", prev)
		} else {
			logger.Info("Rollout starts no node", "reason", reason)
		}
	}
}

func (c *Controller) shadowAnnotation(name, key string) string {
	if s, err := c.shadowLister.Get(name); err == nil {
		return s.Annotations[key]
	}
	return ""
}

// candidates lists the Idle nodes that may start now, in start order (own
// node last, then by name), and the zone of every managed node. It sends an
// Event the first time a node is found blocked for a given cause, and arms a
// timer for the earliest end of a back-off.
func (c *Controller) candidates(ctx context.Context, shadows []*updatesv1alpha1.BottlerocketShadow, now time.Time) ([]candidate, map[string]string) {
	managed := map[string]string{}
	var out []candidate
	var nextBackoff time.Time
	for _, s := range shadows {
		node, err := c.nodeLister.Get(s.Name)
		if err != nil || node.DeletionTimestamp != nil || !c.opts.Selector.Matches(labels.Set(node.Labels)) || !shadow.Describes(s, node) {
			continue
		}
		zone := node.Labels[ZoneLabel]
		managed[s.Name] = zone
		if s.Spec.State != updatesv1alpha1.StateIdle || s.Status.CurrentState != updatesv1alpha1.StateIdle || counts(s) {
			continue
		}
		target := c.opts.TargetVersion
		if target == "" {
			target = s.Status.TargetVersion
		}
		if target == "" || s.Status.CurrentVersion == "" {
			continue
		}
		cmp, err := brapi.CompareVersions(s.Status.CurrentVersion, target)
		if err != nil {
			c.tell(s, "InvalidVersion", "Cannot compare versions %q and %q: %v", s.Status.CurrentVersion, target, err)
			continue
		}
		if cmp == 0 {
			c.forget(s.Name)
			continue
		}
		if cmp > 0 {
			c.tell(s, "DowngradeRefused", "Node runs %s, newer than the target %s; it is never downgraded", s.Status.CurrentVersion, target)
			continue
		}
		if until := backoffUntil(s); until.After(now) {
			if nextBackoff.IsZero() || until.Before(nextBackoff) {
				nextBackoff = until
			}
			continue
		}
		if why := c.notStartable(node); why != "" {
			c.tell(s, "UpdateBlocked", "Not starting the update to %s: %s", target, why)
			continue
		}
		c.forget(s.Name)
		out = append(out, candidate{name: s.Name, zone: zone, version: target, own: s.Name == c.opts.OwnNode})
	}
	if !nextBackoff.IsZero() {
		c.after(startKey, nextBackoff.Sub(now))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].own != out[j].own {
			return !out[i].own
		}
		return out[i].name < out[j].name
	})
	return out, managed
}

// notStartable says why a node must not start ("" when it may): the seed's
// rule never to start on an unhealthy node, and the updater's own
// extension, without which nobody would drain it before the reboot.
func (c *Controller) notStartable(node *v1.Node) string {
	if node.Labels[nodev1alpha1.ExcludeLabel] == "true" {
		return fmt.Sprintf("the node is excluded (%s=true)", nodev1alpha1.ExcludeLabel)
	}
	if cond := extensionsReady(node); cond == nil || cond.Status != v1.ConditionTrue {
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
