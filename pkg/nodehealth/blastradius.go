package nodehealth

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// Shares are compared in basis points with integer cross-products, never as
// floats: in float64 0.20 − 0.05 is 0.15000000000000002, and a suspension
// meant to resume below 15 % resumed at exactly 15 % (issue 33).
const (
	basisPoints = 10000
	// hysteresisBP is how far below its threshold the failing share must
	// fall before a suspension ends, so that one node flapping at the edge
	// does not toggle it. For thresholds of 10 % or less the gap is half the
	// threshold instead, so that every threshold has a resume point above
	// zero (resumes).
	hysteresisBP = 500
)

// toBasisPoints turns a share (0..1) into whole basis points.
func toBasisPoints(share float64) int {
	return int(math.Round(share * basisPoints))
}

// minFailingToSuspend: a suspension needs more than this many failing nodes, so
// that a small cluster with one or two broken nodes still gates them.
const minFailingToSuspend = 2

// blastRadius counts failing nodes among the nodes that list at least one
// gating extension, cluster-wide and per zone, and decides when failure taints
// and evictions are suspended (docs/controller.md).
type blastRadius struct {
	opts BlastRadiusOptions
	// clusterBP and zoneBP are the thresholds in basis points.
	clusterBP, zoneBP int

	mu      sync.Mutex
	members map[string]member // by node name
	cluster counter
	zones   map[string]*counter
}

type member struct {
	zone    string
	failing bool
}

type counter struct {
	total, failing int
	suspended      bool
}

// reachesThreshold reports whether failing/total ≥ thresholdBP/10000.
func (c *counter) reachesThreshold(thresholdBP int) bool {
	return c.total > 0 && c.failing*basisPoints >= thresholdBP*c.total
}

// resumes reports whether the failing share is strictly below the resume
// point max(threshold − 5 points, threshold / 2) (docs/controller.md): below
// either term is below their maximum. Half the threshold keeps the resume
// point above zero for small thresholds, where threshold − 5 points would
// never be reached; it is compared doubled, so odd basis points stay exact.
func (c *counter) resumes(thresholdBP int) bool {
	return c.failing*basisPoints < (thresholdBP-hysteresisBP)*c.total ||
		2*c.failing*basisPoints < thresholdBP*c.total
}

// reevaluate applies the threshold with hysteresis and reports a change.
func (c *counter) reevaluate(thresholdBP int) bool {
	if thresholdBP <= 0 {
		changed := c.suspended
		c.suspended = false
		return changed
	}
	was := c.suspended
	switch {
	case !c.suspended && c.failing > minFailingToSuspend && c.reachesThreshold(thresholdBP):
		c.suspended = true
	case c.suspended && (c.failing <= minFailingToSuspend || c.resumes(thresholdBP)):
		c.suspended = false
	}
	return was != c.suspended
}

func newBlastRadius(opts BlastRadiusOptions) *blastRadius {
	return &blastRadius{opts: opts, clusterBP: toBasisPoints(opts.ClusterThreshold), zoneBP: toBasisPoints(opts.ZoneThreshold),
		members: map[string]member{}, zones: map[string]*counter{}}
}

// suspensionChange describes a suspension that began or ended.
type suspensionChange struct {
	scope     string // "cluster" or "zone <name>"
	suspended bool
	failing   int
	total     int
	threshold float64
}

func (c suspensionChange) String() string {
	verb := "suspended"
	if !c.suspended {
		verb = "resumed"
	}
	return fmt.Sprintf("failure taints and evictions %s in %s: %d of %d nodes failing (%.0f%%, threshold %.0f%%)",
		verb, c.scope, c.failing, c.total, 100*float64(c.failing)/float64(max(c.total, 1)), 100*c.threshold)
}

// update records whether a node is tracked (lists a gating extension) and
// failing, and returns the suspensions that began or ended.
func (b *blastRadius) update(node, zone string, tracked, failing bool) []suspensionChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, had := b.members[node]
	if had && old.zone == zone && old.failing == failing && tracked {
		return nil
	}
	if had {
		b.adjust(old, -1)
		delete(b.members, node)
	}
	if tracked {
		m := member{zone: zone, failing: failing}
		b.members[node] = m
		b.adjust(m, +1)
	}
	var changes []suspensionChange
	if b.cluster.reevaluate(b.clusterBP) {
		changes = append(changes, suspensionChange{scope: "cluster", suspended: b.cluster.suspended,
			failing: b.cluster.failing, total: b.cluster.total, threshold: b.opts.ClusterThreshold})
	}
	for _, z := range []string{old.zone, zone} {
		if c, ok := b.zones[z]; ok && z != "" && c.reevaluate(b.zoneBP) {
			changes = append(changes, suspensionChange{scope: "zone " + z, suspended: c.suspended,
				failing: c.failing, total: c.total, threshold: b.opts.ZoneThreshold})
		}
		if old.zone == zone {
			break
		}
	}
	return changes
}

// recount replaces every node's count with members (by node name; those
// listed only) and reevaluates each scope once, on the full count. Counting
// the nodes one by one with update would judge each scope on a part of its
// nodes, in the order they come: the hysteresis then keeps a suspension a
// partial count began although the full count would not begin it (seed
// 13756747834182287697).
func (b *blastRadius) recount(members map[string]member) []suspensionChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members = map[string]member{}
	b.cluster.total, b.cluster.failing = 0, 0
	for _, c := range b.zones {
		c.total, c.failing = 0, 0
	}
	for node, m := range members {
		b.members[node] = m
		b.adjust(m, +1)
	}
	var changes []suspensionChange
	if b.cluster.reevaluate(b.clusterBP) {
		changes = append(changes, suspensionChange{scope: "cluster", suspended: b.cluster.suspended,
			failing: b.cluster.failing, total: b.cluster.total, threshold: b.opts.ClusterThreshold})
	}
	zones := make([]string, 0, len(b.zones))
	for z := range b.zones {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		if c := b.zones[z]; z != "" && c.reevaluate(b.zoneBP) {
			changes = append(changes, suspensionChange{scope: "zone " + z, suspended: c.suspended,
				failing: c.failing, total: c.total, threshold: b.opts.ZoneThreshold})
		}
	}
	return changes
}

func (b *blastRadius) adjust(m member, delta int) {
	b.cluster.total += delta
	if m.failing {
		b.cluster.failing += delta
	}
	if m.zone == "" {
		return
	}
	c, ok := b.zones[m.zone]
	if !ok {
		c = &counter{}
		b.zones[m.zone] = c
	}
	c.total += delta
	if m.failing {
		c.failing += delta
	}
}

// suspended reports whether failure taints and evictions are suspended for a
// node in zone, and why.
func (b *blastRadius) suspended(zone string) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cluster.suspended {
		return true, fmt.Sprintf("%d of %d nodes in the cluster are failing (threshold %.0f%%)",
			b.cluster.failing, b.cluster.total, 100*b.opts.ClusterThreshold)
	}
	if c, ok := b.zones[zone]; ok && zone != "" && c.suspended {
		return true, fmt.Sprintf("%d of %d nodes in zone %s are failing (threshold %.0f%%)",
			c.failing, c.total, zone, 100*b.opts.ZoneThreshold)
	}
	return false, ""
}

// blastView is what the blast radius says about one node at one instant,
// as values: the cluster's and the node's zone's counters and how the node
// is counted. An evaluation asks it what the suspension would be with the
// node counted as the evaluation judges it (suspendedIf), and changes
// nothing; the controller applies the decision afterwards (update).
type blastView struct {
	clusterBP, zoneBP int
	clusterThreshold  float64
	zoneThreshold     float64
	zone              string
	cluster, zoneC    counter
	hasZone           bool
	member            member
	counted           bool
}

// view returns the blast radius as a node in zone sees it now.
func (b *blastRadius) view(node, zone string) blastView {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := blastView{clusterBP: b.clusterBP, zoneBP: b.zoneBP, clusterThreshold: b.opts.ClusterThreshold,
		zoneThreshold: b.opts.ZoneThreshold, zone: zone, cluster: b.cluster}
	if c, ok := b.zones[zone]; ok && zone != "" {
		v.zoneC, v.hasZone = *c, true
	}
	v.member, v.counted = b.members[node]
	return v
}

// failing reports whether the node is counted as failing now.
func (v blastView) failing() bool { return v.counted && v.member.failing }

// suspendedIf reports whether failure taints and evictions would be
// suspended for the node, and why, once it is counted as tracked and
// failing say: the same arithmetic update does, on copies.
func (v blastView) suspendedIf(tracked, failing bool) (bool, string) {
	cluster, zone := v.cluster, v.zoneC
	apply := func(m member, delta int) {
		cluster.total += delta
		if m.failing {
			cluster.failing += delta
		}
		if m.zone != "" && m.zone == v.zone {
			zone.total += delta
			if m.failing {
				zone.failing += delta
			}
		}
	}
	unchanged := v.counted && v.member.zone == v.zone && v.member.failing == failing && tracked
	if !unchanged {
		if v.counted {
			apply(v.member, -1)
		}
		if tracked {
			apply(member{zone: v.zone, failing: failing}, +1)
		}
		cluster.reevaluate(v.clusterBP)
		if v.hasZone || (tracked && v.zone != "") {
			zone.reevaluate(v.zoneBP)
		}
	}
	if cluster.suspended {
		return true, fmt.Sprintf("%d of %d nodes in the cluster are failing (threshold %.0f%%)",
			cluster.failing, cluster.total, 100*v.clusterThreshold)
	}
	if v.zone != "" && zone.suspended {
		return true, fmt.Sprintf("%d of %d nodes in zone %s are failing (threshold %.0f%%)",
			zone.failing, zone.total, v.zone, 100*v.zoneThreshold)
	}
	return false, ""
}

// memberOf returns how a node is counted (ok: it is).
func (b *blastRadius) memberOf(node string) (member, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.members[node]
	return m, ok
}

// isFailing reports whether a node is counted as failing: the one record of
// whether a node fails (its evaluation or a recount sets it).
func (b *blastRadius) isFailing(node string) bool {
	m, ok := b.memberOf(node)
	return ok && m.failing
}

// anySuspended reports whether any scope is suspended (for the metric).
func (b *blastRadius) suspendedScopes() (cluster bool, zones int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.zones {
		if c.suspended {
			zones++
		}
	}
	return b.cluster.suspended, zones
}

// failingNodes lists the failing nodes in name order, to re-evaluate when a
// suspension ends: the nodes whose eviction clocks the suspension held past
// their timeout come due together then, and take their turns of the eviction
// rate in the order they are evaluated (not the map's, which differs from run
// to run).
func (b *blastRadius) failingNodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for n, m := range b.members {
		if m.failing {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// refresh sets whether a counted node fails, leaving nodes that are not
// counted alone, and returns the suspensions that began or ended.
func (b *blastRadius) refresh(node string, failing bool) []suspensionChange {
	b.mu.Lock()
	m, ok := b.members[node]
	b.mu.Unlock()
	if !ok || m.failing == failing {
		return nil
	}
	return b.update(node, m.zone, true, failing)
}
