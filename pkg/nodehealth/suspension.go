package nodehealth

// This file holds the guards in the sync path: whether a taint or an eviction
// is held, the count brought up to date, what a suspension's start and end
// change.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

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
	members := map[string]member{}
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
		d := evaluate(evalInput{now: now, vouchedUntil: c.vouchedUntil(), opts: &c.opts, node: facts, prev: newNodeState(now), exts: exts,
			leases: c.tracker.lookupLeases(exts), live: live, blast: c.blast.view(node.Name, facts.zone)})
		if d.tracked {
			members[node.Name] = member{zone: facts.zone, failing: d.failing}
		}
	}
	changes := c.blast.recount(members)
	failing := len(c.blast.failingNodes())
	klog.FromContext(ctx).Info("Counted the nodes for the blast radius before the first sync", "nodes", len(nodes), "failing", failing)
	c.handleSuspensionChanges(ctx, changes, now)
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
		st.escalation.clock.advance(at, suspended || ownViewStale)
	}
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
// combined with the current expiry of its Leases and whether it is leaving
// now, so that a Lease past its expiry, or a node that stopped leaving,
// counts whether or not its node was evaluated since. Callers hold
// c.mu. It costs one Lease lookup per extension of every node, and runs only
// when a node is about to be tainted for a failure, or escalated, while
// nothing is suspended.
func (c *Controller) recountFailing(current string, now time.Time) []suspensionChange {
	var changes []suspensionChange
	expiryNow := expiryInstant(now, c.vouchedUntil(), c.ownViewStaleLocked())
	for name, st := range c.nodes {
		if name == current || st.exts == nil || st.last.invalidList != "" {
			continue
		}
		failing := c.failingAt(st, now, expiryNow)
		if _, counted := c.blast.memberOf(name); !counted && slices.ContainsFunc(st.exts, func(e requiredExtension) bool { return e.affects }) &&
			st.leavingSignal(now, &c.opts) == "" {
			// Its last evaluation found the node leaving, and it is not
			// any more: a foreign lifecycle condition grows stale at an
			// instant, with no event, and a failure of another node that
			// comes due in that instant is not decided on a count without
			// it (seed 13131537040437977849).
			if node, err := c.nodeLister.Get(name); err == nil {
				changes = append(changes, c.blast.update(name, zoneOf(node), true, failing)...)
			}
			continue
		}
		changes = append(changes, c.blast.refresh(name, failing)...)
	}
	return changes
}

// failingAt reports whether a node counts as failing at now from what its
// last evaluation found and the current state of its Leases (docs/controller.md,
// blast radius): an unplanned failure of a gating extension after the node
// was ready in its boot, with no planned release in progress. Lease
// expiries are judged at expiryNow, as the evaluation judges them
// (evalInput.vouchedUntil).
func (c *Controller) failingAt(st *nodeState, now, expiryNow time.Time) bool {
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
			// A planned release makes the node's other failures planned.
			return false
		case !ok, obs.released(), obs.observedAt.IsZero(), !expiryNow.Before(obs.expiresAt(c.opts.RenewalGrace)), st.markedDead(ext.name, obs):
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
