package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

const (
	condTrue    = "True"
	condFalse   = "False"
	condUnknown = "Unknown"
)

// evaluate judges every node at t: the blast-radius count is brought up to
// date over all nodes first, so that failures that come due together are all
// counted before any one of them is tainted (docs/controller.md "Blast radius").
func (m *Model) evaluate(t time.Time) {
	if m.together {
		m.owed = true
		return
	}
	m.updateBlastRadius(t)
	for _, n := range m.sortedNodes() {
		m.evaluateNode(n, t)
	}
}

// ---------------------------------------------------------------------------
// Lease readiness

// leaseReady: the Lease has a holder and a renewal was observed (or counted
// observed) within its duration, at least MinimumLeaseDuration, plus the
// renewal grace, by the controller's own clock. With a canary and a current
// view, the expiry counts only once the view's horizon is past it too: up to
// then a renewal may be on its way unseen, however recently the canary was
// observed. A stale view judges by the clock (and holds what that decides).
// The horizon is the node's own (horizonOf).
func (m *Model) leaseReady(node, ext string, t time.Time) bool {
	return m.leaseReadyOn(node, ext, t, m.horizonOf(node))
}

// leaseReadyOn is leaseReady judged on horizon h.
func (m *Model) leaseReadyOn(node, ext string, t, h time.Time) bool {
	if m.cfg.CanaryInterval > 0 && !m.ownViewStale && h.Before(t) {
		t = h
	}
	l := m.leases[leaseKey{node, ext}]
	if l == nil || !l.held || !l.observedSet {
		return false
	}
	if l.startGrace {
		if n := m.nodes[node]; n != nil && n.record.markedDead(n.UID, ext, l.renewTime) {
			// Judged expired before the restart and not renewed since:
			// the start grace does not revive it.
			return false
		}
	}
	d := max(l.duration, m.cfg.MinimumLeaseDuration)
	// Choice: the Lease is expired at exactly observed + duration + grace
	// ("expires after 50 s of silence").
	from := l.observed
	if l.graceFrom.After(from) {
		from = l.graceFrom
	}
	return t.Before(from.Add(d + m.cfg.RenewalGrace))
}

// plannedRelease: the extension's Lease is released with a maintenance
// reason, and the release was made in the node's current boot (a planned
// release gates only in the boot it was made in).
//
// Choice: after a reboot the old release no longer gates whatever the Lease
// does; a new release (after a renewal) in the new boot is a new request for
// maintenance and gates.
func (m *Model) plannedRelease(n *node, ext string) bool {
	l := m.leases[leaseKey{n.Name, ext}]
	return l != nil && !l.held && l.releaseEpoch == n.epoch && (m.maintenance[l.reason] || l.asked && n.gate != nil)
}

// renewedSince: a real renewal of the extension was observed strictly after
// the gate began (docs/controller.md: "fresh renewals were observed after the gate
// began"). Instants of the controller's clock are compared: a renewal
// observed at the very instant the cause was observed does not count, as the
// controller cannot tell which came first.
//
// Choice: a gate that began when its failure was first held counts a real
// renewal (not a Start's grace) observed in that very instant: the hold was
// judged on Leases that did not show it, so it came after. Which came first
// is then known, and whether the suspension lifted before or after that
// renewal in the instant does not change the outcome (seed
// 17597418052033749223: a controller that started, suspended and lifted in
// one instant, with a held node's renewal in it).
func (m *Model) renewedSince(n *node, ext string, g *gate) bool {
	l := m.leases[leaseKey{n.Name, ext}]
	if l == nil || !l.observedSet {
		return false
	}
	return l.observed.After(g.start) || g.heldFromStart && !l.startGrace && l.observed.Equal(g.start)
}

// facts is what a node's judgement at one instant rests on.
type facts struct {
	// listsGating: the node lists an extension that gates: affectsReadiness,
	// or a planned release of this boot (which gates even without it).
	listsGating bool
	gating      []string // the gating extensions that have not failed open
	notReady    []string // those of gating not ready now
	info        []string // the listed extensions that do not gate, not ready now
	planned     bool     // a planned release of this boot is among notReady
	allPlanned  bool     // every extension in notReady is a planned release
	leaving     string   // why the node is leaving ("" when it is not)
}

// factsOf judges the node on its own horizon (horizonOf).
func (m *Model) factsOf(n *node, t time.Time) facts {
	return m.factsOn(n, t, m.horizonOf(n.Name))
}

// factsOn judges the node's Leases on horizon h.
func (m *Model) factsOn(n *node, t, h time.Time) facts {
	f := facts{allPlanned: true, leaving: m.leaving(n, t)}
	for _, e := range n.Extensions {
		planned := m.plannedRelease(n, e.Name)
		if !e.AffectsReadiness && !planned {
			// Tracked and reported, never gates.
			f.info = m.appendNotReady(f.info, n, e.Name, t, h)
			continue
		}
		f.listsGating = true
		// Choice: a planned release gates even for an extension that failed
		// open (it asks for maintenance).
		if n.failedOpen[e.Name] && !planned {
			f.info = m.appendNotReady(f.info, n, e.Name, t, h)
			continue
		}
		f.gating = append(f.gating, e.Name)
		if !m.leaseReadyOn(n.Name, e.Name, t, h) {
			f.notReady = append(f.notReady, e.Name)
			f.planned = f.planned || planned
			f.allPlanned = f.allPlanned && planned
		}
	}
	sort.Strings(f.gating)
	sort.Strings(f.notReady)
	sort.Strings(f.info)
	return f
}

// appendNotReady appends ext to list if its Lease is not ready on horizon h.
func (m *Model) appendNotReady(list []string, n *node, ext string, t, h time.Time) []string {
	if m.leaseReadyOn(n.Name, ext, t, h) {
		return list
	}
	return append(list, ext)
}

// leaving: the node is leaving the cluster, or under someone else's
// maintenance (docs/controller.md, "Leaving nodes"), and why: its
// deletionTimestamp is set; it carries a taint of LeavingNodeTaints; or a
// KEP-5683 lifecycle condition DrainInProgress, Drained or
// MaintenanceInProgress is True with a reason nodehealth does not write, and
// the node is unschedulable or the condition's lastTransitionTime is less
// than LifecycleConditionMaxAge ago.
//
// Choice: the signals are tried in that order and the first one that holds is
// the one named; the reason names the signal as the controller's message does.
func (m *Model) leaving(n *node, t time.Time) string {
	if n.Deleting {
		return "deletionTimestamp set"
	}
	for _, key := range n.Taints {
		for _, l := range m.cfg.LeavingNodeTaints {
			if key == l {
				return "taint " + key
			}
		}
	}
	for _, kind := range []string{"DrainInProgress", "Drained", "MaintenanceInProgress"} {
		for _, c := range n.LifecycleConditions {
			if c.Type != kind || c.Status != condTrue || ownLifecycleReasons[c.Reason] {
				continue
			}
			if n.Unschedulable || t.Before(c.LastTransitionTime.Add(m.cfg.LifecycleConditionMaxAge)) {
				return "condition " + kind
			}
		}
	}
	return ""
}

// ownLifecycleReasons are the reasons nodehealth writes on lifecycle
// conditions (the update operator's and the controller's eviction's).
var ownLifecycleReasons = map[string]bool{"BottlerocketUpdate": true, "UpdateFailed": true, "ExtensionFailed": true}

// isFailing: the node is failing for the blast radius and the eviction
// clock: it is in service (ungated in its current boot), a gating extension
// is not ready, and no planned release of this boot is among its failures
// (while a gate includes a planned release, the other failures are planned
// too).
//
// Choice: "held counts as failing" applies to held failures; a node held
// only because a bootstrap gate is pending under the own-view guard, or
// because its planned gate waits for the guard, is not in service or not
// unplanned, and is not counted.
//
// A leaving node never fails: it may be gated, but it is never escalated.
func isFailing(n *node, f facts) bool {
	return !n.Excluded && n.inService && len(f.notReady) > 0 && !f.planned && f.leaving == ""
}

// tracked: the node counts in the blast radius' denominator: it lists at
// least one affectsReadiness extension, and it is not leaving (a leaving
// node counts on neither side: a scale-down of a third of the nodes must
// not suspend gating for the rest).
//
// Choice: excluded nodes are not counted at all; bootstrapping nodes are
// counted in the denominator (they list an extension) but never fail.
func tracked(n *node, f facts) bool {
	if n.Excluded || f.leaving != "" {
		return false
	}
	for _, e := range n.Extensions {
		if e.AffectsReadiness {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Blast radius

// updateBlastRadius counts failing nodes, cluster-wide and per zone, from
// every node's facts and the current expiry of its Leases, and moves each
// scope's suspension with hysteresis.
//
// A node counts in the zone its label names now (the Node of its last
// NodeAdded or NodeUpdated): a relabelled node's failure moves from its old
// zone's count to its new one's, and the node without a label counts
// cluster-wide only (docs/controller.md, "Blast radius").
func (m *Model) updateBlastRadius(t time.Time) {
	// The controller recounts every other node's Leases at the view's
	// latest horizon before it taints a node for a failure, whether or not
	// that node's sync took the horizon's move yet (recountFailing): a node
	// whose expiry the move made due counts (seeds 3152080200983510809 and
	// 11558201572992610440, where kube-proxy died everywhere).
	total, failing := 0, 0
	zoneTotal, zoneFailing := map[string]int{}, map[string]int{}
	for _, n := range m.nodes {
		facts := m.factsOn(n, t, m.horizon)
		if !tracked(n, facts) {
			continue
		}
		f := isFailing(n, facts)
		total++
		if f {
			failing++
		}
		if n.Zone != "" {
			zoneTotal[n.Zone]++
			if f {
				zoneFailing[n.Zone]++
			}
		}
	}
	m.clusterSuspended = nextSuspended(m.clusterSuspended, failing, total, m.cfg.ClusterThreshold)
	zones := map[string]bool{}
	for z, tot := range zoneTotal {
		if nextSuspended(m.zoneSuspended[z], zoneFailing[z], tot, m.cfg.ZoneThreshold) {
			zones[z] = true
		}
	}
	m.zoneSuspended = zones
}

// nextSuspended is the hysteresis of one scope: suspend when more than 2
// nodes fail and the share reaches the threshold; resume when the share falls
// below max(threshold − 5 points, threshold / 2) or 2 or fewer nodes fail.
//
// Choice: shares are compared exactly, with the threshold taken to a basis
// point (the configuration holds whole percents), so that 3 of 20 is not
// "below" 15 % through rounding.
func nextSuspended(was bool, failing, total int, threshold float64) bool {
	bp := int64(math.Round(threshold * 10000)) // basis points
	if bp <= 0 || total == 0 || failing <= 2 {
		return false
	}
	// share ≥ x basis points ⇔ failing·10000 ≥ x·total; in half basis
	// points so that threshold/2 stays exact.
	reaches := func(halfBP int64) bool { return int64(failing)*20000 >= halfBP*int64(total) }
	if was {
		return reaches(max(2*bp-1000, bp))
	}
	return reaches(2 * bp)
}

// blastSuspended: failure taints and evictions of this node are suspended by
// the blast radius of the cluster or of its zone.
func (m *Model) blastSuspended(n *node) bool {
	return m.clusterSuspended || (n.Zone != "" && m.zoneSuspended[n.Zone])
}

// ---------------------------------------------------------------------------
// Gate causes

// rebooted: status.nodeInfo.bootID changed between two non-empty values, or
// (when the previous value is unknown) differs from the one recorded in the
// boot record. A kubelet restart keeps the bootID and is not a reboot.
func rebooted(old, cur string, rec *bootRecord) bool { return changed(old, cur, rec.get().bootID) }

// recreated: the UID changed between two non-empty values, or (when the
// previous value is unknown) differs from the one recorded in the boot
// record.
//
// Choice: a re-creation seen as an update keeps what the controller wrote on
// the Node (taint, condition, record) as it was; only the facts of Node
// change. A re-creation together with a reboot is reported as a re-creation.
func recreated(old, cur string, rec *bootRecord) bool { return changed(old, cur, rec.get().uid) }

func changed(old, cur, recorded string) bool {
	if cur == "" || old != "" {
		return cur != "" && old != cur
	}
	return recorded != "" && recorded != cur
}

// beginBootstrapGate: a new node, a reboot or a re-creation gates the node
// with full scope and gateStart = now, whatever gate it was in ("a reboot or
// re-creation seen during any gate restarts it as full"). It begins a new
// boot: fail-opens and planned releases of the previous boot no longer
// apply, and the node is not in service (no eviction clock, not failing)
// until it is ungated. While the own-view guard holds, the gate stays
// pending (held) and gets gateStart = the lift (ownViewRecovers).
func (m *Model) beginBootstrapGate(n *node, at time.Time, cause string) {
	n.epoch = m.newEpoch()
	n.endedInStale = nil // a new boot's gate: nothing of the last to put back
	n.failedOpen = map[string]bool{}
	n.inService = false
	n.clock = evictionClock{last: at}
	n.regSince = at
	n.gate = &gate{cause: cause, full: true, start: at, reason: cause, scope: map[string]bool{}}
}

// findNode judges a node found at start (or whose exclusion label was
// removed) from what is written on it: the boot record catches reboots and
// re-creations while the controller was down; a node found tainted is a
// ControllerStarted gate of full scope; a node found untainted is in
// service. Fail-opens recorded for the current boot are restored, also on a
// node that is found gated.
func (m *Model) findNode(n *node, at time.Time) {
	n.forget(at)
	if n.Excluded {
		return
	}
	m.adoptFoundReleases(n)
	rec := n.record
	switch {
	case recreated("", n.UID, rec):
		m.beginBootstrapGate(n, at, nodev1alpha1.ReasonNodeRecreated)
		n.evicted, n.noExecute = false, false
		return
	case rebooted("", n.BootID, rec):
		// Choice: a reboot revealed by the record is reported as
		// NodeRebooted (also on a node found tainted), not ControllerStarted.
		m.beginBootstrapGate(n, at, nodev1alpha1.ReasonNodeRebooted)
		return
	}
	if rec != nil {
		n.failedOpen = parseFailedOpen(rec.failedOpen)
	}
	if !n.tainted {
		n.inService = true
		return
	}
	cause := nodev1alpha1.ReasonControllerStarted
	n.gate = &gate{cause: cause, full: true, start: at, reason: cause, scope: map[string]bool{}}
	// Choice: a node found gated whose boot record names its current boot
	// and UID was ready in this boot (the record is written only for nodes
	// in service): it stays in service, so its failures count for the blast
	// radius and may escalate once its Leases' start grace runs out.
	// Without a record, or with a pending one (written while it was
	// still gated in this boot), it is bootstrapping. Either way the gate
	// is full.
	n.inService = rec != nil && !rec.pending
}

// adoptFoundReleases: a controller that finds a node (at start, or when its
// exclusion label is removed) cannot know in which boot a release it finds
// was made, even one it saw before it let the node go; it takes the boot the
// node is in as far as its boot record tells (a reboot the record reveals,
// in findNode, makes the release one of the previous boot).
func (m *Model) adoptFoundReleases(n *node) {
	for k, l := range m.leases {
		if k.node == n.Name && !l.held {
			l.releaseEpoch = n.epoch
		}
	}
}

// noteAddedExtensions: an extension added to the list during a failed-only
// gate joins its scope (it must renew after gateStart).
//
// Choice: an entry whose affectsReadiness turns true counts as added.
func (m *Model) noteAddedExtensions(n *node, old Node) {
	if n.gate == nil || n.gate.full {
		return
	}
	had := map[string]bool{}
	for _, e := range old.Extensions {
		if e.AffectsReadiness {
			had[e.Name] = true
		}
	}
	for _, e := range n.Extensions {
		if e.AffectsReadiness && !had[e.Name] {
			n.gate.scope[e.Name] = true
		}
	}
}

// ---------------------------------------------------------------------------
// Own view

// ownViewGoesStale remembers which Leases were ready when the guard fired.
//
// Choice: "ready when the view went stale" is judged at the instant the
// guard fires, as the evaluations before it judged: against the horizon, so
// a Lease that ran out between the horizon and the guard was ready.
func (m *Model) ownViewGoesStale(at time.Time) {
	for k, l := range m.leases {
		l.readyAtStale = m.leaseReady(k.node, k.ext, at)
	}
	m.ownViewStale, m.staleSince = true, at
}

// ownViewRecovers: every Lease that was ready when the view went stale and
// is held now (also one released and renewed again since) gets a full
// duration of grace from now (graceFrom), which is no renewal; a Lease
// already expired or released then stays as it was. Every gate, tainted or pending,
// gets gateStart = now and keeps its scope; renewals seen during the stale
// view no longer satisfy it. A gate found at start whose first failure was
// judged on the stale view is ControllerStarted again: a failure that still
// stands names it again in the evaluation that follows (gateReason).
func (m *Model) ownViewRecovers(at time.Time) {
	m.ownViewStale = false
	for _, l := range m.leases {
		if l.readyAtStale && l.held && l.observed.Before(at) {
			l.graceFrom = at
		}
		l.readyAtStale = false
	}
	for _, n := range m.nodes {
		n.endedInStale = nil
		if n.gate != nil {
			// A restart is no hold: a renewal in its instant may be
			// one the stalled watch held back.
			n.gate.start, n.gate.heldFromStart = at, false
			if n.gate.failedInStall {
				n.gate.reason, n.gate.failedInStall = nodev1alpha1.ReasonControllerStarted, false
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Judging one node

func (m *Model) evaluateNode(n *node, t time.Time) {
	if m.worldAt.Equal(t) && !n.writtenAt.Equal(t) {
		n.writtenAt, n.beforeWrites = t, nodeWrites{tainted: n.tainted, noExecute: n.noExecute, evicted: n.evicted,
			condWritten: n.condWritten, record: n.record}
	}
	if n.Excluded {
		leaveExcludedNodeAlone(n)
		return
	}
	tickEvictionClock(n, t)
	m.applyStartupTimeouts(n, t)
	f := m.factsOf(n, t)
	wasHeld := n.held
	n.held = false
	if n.gate != nil {
		m.widenFailedOnlyScope(n, f, t)
		if m.gateMayEnd(n, f, t) {
			if m.retryMayMeetTheGuard(n) {
				n.endedInStale = n.snapshot()
			}
			n.removalRefused = n.removalRefused || n.tainted && m.writesRefused
			ungate(n)
		}
	} else if len(f.notReady) > 0 {
		m.openFailureGate(n, f, t, wasHeld)
	}
	if !n.held && (n.gate == nil || !wasHeld) {
		n.heldSince = time.Time{}
	}
	m.placeTaint(n, f)
	m.writeCondition(n, f, t)
	m.runEvictionClock(n, f, t)
	m.writeBootRecord(n, f, t)
	if !n.tainted && !n.held {
		n.evicted = false // the failure is over
	}
	if !n.tainted || f.leaving != "" {
		// The NoExecute variant goes with the taint, and from a node
		// that leaves (it is never escalated).
		n.noExecute = false
	}
}

// leaveExcludedNodeAlone: an excluded node loses the taint and its condition
// (if it has one) reads Unknown / NodeExcluded; the controller forgets it.
// Its boot record stays as it was.
func leaveExcludedNodeAlone(n *node) {
	n.tainted = false
	switch {
	case n.condWritten:
		n.condStatus, n.condReason = condUnknown, nodev1alpha1.ReasonNodeExcluded
	default:
		// A condition decided while the API server refused the
		// controller's writes never reached the Node (seed
		// 11274034325090150136: a node re-created during an outage of
		// the writes and excluded before it ended).
		n.condStatus, n.condReason = "", ""
	}
	n.gate, n.inService, n.held, n.evicted, n.noExecute = nil, false, false, false, false
	n.condNotReady, n.condInfo = nil, nil
	n.clock = evictionClock{}
}

// failedOpenListed: an extension the node lists as affecting readiness
// failed open in this boot and is not ready yet.
func failedOpenListed(n *node) bool {
	for _, e := range n.Extensions {
		if e.AffectsReadiness && n.failedOpen[e.Name] {
			return true
		}
	}
	return false
}

// applyStartupTimeouts: during a bootstrap gate (new, rebooted, re-created,
// or found gated without being in service), an extension with a startup
// timeout that has not renewed since gateStart when the timeout passes
// either keeps the node gated (KeepGated: reported as StartupTimeout, see
// gateReason) or fails open (Ungate: stops gating until it renews).
//
// Choice: nothing fails open while the own view is stale (the missing
// renewal may be the view's fault); the gateStart the lift sets restarts the
// timeouts of gates that are still on.
func (m *Model) applyStartupTimeouts(n *node, t time.Time) {
	if m.ownViewStale {
		return
	}
	for _, e := range n.Extensions {
		if e.FailOpen && m.startupTimedOut(n, e, t) {
			n.failedOpen[e.Name] = true
		}
	}
}

// startupTimedOut: e never came up (no renewal observed) since gateStart of
// a bootstrap gate, and its startup timeout has passed.
//
// Choice: startup timeouts apply only while the node waits before it was in
// service in its current boot (as docs/controller.md says), never to a
// failure gate or to a node found gated that was in service: a restart must
// not turn a failure into a fail-open.
func (m *Model) startupTimedOut(n *node, e Extension, t time.Time) bool {
	g := n.gate
	return g != nil && g.full && !n.inService && e.AffectsReadiness && e.StartupTimeout > 0 &&
		!n.failedOpen[e.Name] && !m.renewedSince(n, e.Name, g) && !t.Before(g.start.Add(e.StartupTimeout))
}

// widenFailedOnlyScope: a failed-only gate's scope is every extension seen
// not ready since gateStart (a planned release counts as a failure).
//
// Choice: in the instant a guard's lift gave a held failure its gate, an
// extension whose renewal counts for the gate (renewedSince) is not in its
// scope, whether that renewal was observed before or after the lift: the
// gate waits for what fails at the lift, and the order of one instant does
// not change what the node ends with. (Seen only once an own-view recovery
// restarts the gate keeping its scope: seed 15330235846551453348.)
func (m *Model) widenFailedOnlyScope(n *node, f facts, t time.Time) {
	if n.gate.full {
		return
	}
	if n.gate.heldFromStart && n.resumedAt.Equal(t) {
		for e := range n.gate.scope {
			if !slices.Contains(f.notReady, e) && m.renewedSince(n, e, n.gate) {
				delete(n.gate.scope, e)
			}
		}
	}
	for _, e := range f.notReady {
		n.gate.scope[e] = true
	}
}

// gateMayEnd: the ungate rule. Every gating extension is ready, and each
// extension in the gate's scope (all of them for a full gate, the failed
// ones for a failed-only gate) renewed after gateStart. A node that lists no
// gating extension is never gated, except that a taint placed at creation
// stays for the registration grace. A node whose gating extensions all
// failed open has nothing to wait for.
func (m *Model) gateMayEnd(n *node, f facts, t time.Time) bool {
	g := n.gate
	if g.pending && m.ownViewStale {
		return false // not forgotten: it gates when the guard lifts
	}
	if !f.listsGating {
		return !m.inRegistrationGrace(n, t)
	}
	if len(f.notReady) > 0 {
		return false
	}
	if !g.full && !n.tainted && m.ownViewStale {
		// Its taint is off the node (another writer's doing, or a
		// write refused) while the own view is stale: the guard holds
		// it (placeTaint), a held failure is judged afresh, and nothing
		// fails (seed 17122793937090481195).
		return true
	}
	for _, e := range f.gating {
		if (g.full || g.scope[e]) && !m.renewedSince(n, e, g) {
			return false
		}
	}
	return true
}

// inRegistrationGrace: the node may still be waiting for rules and
// self-registering Leases to fill its list.
//
// Choice: the grace runs from when the controller first saw the node (added,
// re-created, or found gated at start) and applies to such nodes whether or
// not they were tainted at creation; a node that lists no gating extension
// meanwhile keeps the taint it was created with and gets none. A rebooted
// node, or one in service, that lists no gating extension is ungated at once.
func (m *Model) inRegistrationGrace(n *node, t time.Time) bool {
	switch n.gate.cause {
	case nodev1alpha1.ReasonNodeRegistered, nodev1alpha1.ReasonNodeRecreated, nodev1alpha1.ReasonControllerStarted:
		return !n.inService && t.Before(n.regSince.Add(m.cfg.RegistrationGrace))
	}
	return false
}

// ungate removes the taint: the node is in service in its current boot and
// its eviction clock resets. (The boot record is written in the same
// evaluation, writeBootRecord.)
func ungate(n *node) {
	n.gate = nil
	n.tainted = false
	n.inService = true
	n.clock = evictionClock{last: n.clock.last}
}

// openFailureGate: a node in service with a gating extension not ready is
// gated (failed-only scope, gateStart = now), unless a guard holds it. The
// own-view guard suspends every taint addition; the blast radius suspends
// failure taints only.
//
// Choice: a gate whose failures are planned (a planned release of this boot
// is among them) is not a failure taint: it is placed while the blast radius
// is suspended, like a bootstrap gate, but held while the own view is stale.
//
// Choice: a node held for its failure and still failing when the guard lifts
// is gated with gateStart = when its failure was first held (the cause was
// observed then, docs/controller.md), so a renewal observed since counts.
func (m *Model) openFailureGate(n *node, f facts, t time.Time, wasHeld bool) {
	if m.ownViewStale || (!f.planned && f.leaving == "" && m.blastSuspended(n)) {
		n.held = true // failure taints are never owed: judged afresh later
		if !wasHeld || n.heldSince.IsZero() {
			n.heldSince = t
		}
		return
	}
	start, heldFromStart := t, wasHeld && !n.heldSince.IsZero()
	if heldFromStart {
		start = n.heldSince
	}
	reason := nodev1alpha1.ReasonExtensionsNotReady
	n.gate = &gate{cause: reason, start: start, reason: reason, scope: map[string]bool{}, heldFromStart: heldFromStart}
	if heldFromStart {
		n.resumedAt = t
	}
	m.widenFailedOnlyScope(n, f, t)
}

// placeTaint: a gate that has something to wait for is tainted, unless the
// own-view guard holds: then the gate stays pending and the node is held
// (a bootstrap seen while the guard holds is not forgotten: the pending gate
// cannot end before the guard lifts, and gets gateStart = the lift).
// Bootstrap gates are not suspended by the blast radius.
//
// Choice: a taint decided while the API server refuses the controller's
// writes is not on the node (unless an ungate's refused removal left it
// there: then the gate has it, no write needed); the controller decides it
// again once its writes are taken, under the guards in force then ("a write decided before a
// guard fired is re-decided, never replayed"). A failure gate a guard holds
// then was never tainted: the node is held for its failure, as if the guard
// had come first (judged afresh at the lift, heldSince = the gate's start).
//
// The blast radius holds the taint of a failing node only (isFailing): a
// failure gate an own-view recovery restarted, nothing failing and waiting
// for renewals, is not counted, and its taint, which another writer removed
// during a suspension, is put back (simulation seed 4348327652707732555).
//
// A full gate on a failing node is the gate of a node found gated at a start
// that was in service in its boot (findNode): its failure counts for the
// blast radius like any other, so a taint someone else removed from it is a
// failure taint too, held while the blast radius suspends (docs/controller.md,
// "Other writers"; seeds 10644956011548756368 and 15660107569789160911, where
// the model put it back as if the gate were a bootstrap's). The gate stays,
// full: the taint the lift puts back waits for every extension's renewal
// since the gate's start, as the found gate did.
func (m *Model) placeTaint(n *node, f facts) {
	if n.gate == nil || len(f.gating) == 0 || n.tainted {
		return
	}
	failureHeld := !n.gate.full && !n.gate.pending &&
		(m.ownViewStale || (isFailing(n, f) && m.blastSuspended(n)))
	switch {
	case failureHeld:
		n.held, n.heldSince, n.gate = true, n.gate.start, nil
	case n.gate.full && !m.ownViewStale && isFailing(n, f) && m.blastSuspended(n):
		n.held = true
	case m.ownViewStale:
		n.held, n.gate.pending = true, true
	case m.writesRefused && n.removalRefused:
		// The ungate's removal was refused: the taint this gate wants is
		// still on the node, and no write is needed (seed
		// 18207859432137299208).
		n.tainted, n.gate.pending, n.removalRefused = true, false, false
	case m.writesRefused:
		// Decided, not on the node: decided again when writes are taken.
	default:
		n.tainted, n.gate.pending, n.gate.taintedAt = true, false, m.now
	}
}

// writeCondition sets SystemExtensionsReady.
//
// Choice: every evaluated node gets the condition, also a
// node that never listed a gating extension (True / NoRequiredExtensions),
// even while it still carries its creation taint during the registration
// grace.
func (m *Model) writeCondition(n *node, f facts, t time.Time) {
	switch {
	case n.held:
		n.condStatus, n.condReason = condFalse, nodev1alpha1.ReasonGatingSuspended
	case n.gate != nil && len(f.gating) > 0 && f.leaving != "":
		// Whatever gates it, the condition says why it is not escalated.
		m.gateReason(n, f, t) // keeps the gate's last reason current
		n.condStatus, n.condReason = condFalse, nodev1alpha1.ReasonNodeLeaving
	case n.gate != nil && len(f.gating) > 0:
		n.condStatus, n.condReason = condFalse, m.gateReason(n, f, t)
	case failedOpenListed(n):
		// Not "every extension ready": the update operator's health gate
		// does not pass it.
		n.condStatus, n.condReason = condTrue, nodev1alpha1.ReasonExtensionsFailedOpen
	case !f.listsGating:
		n.condStatus, n.condReason = condTrue, nodev1alpha1.ReasonNoRequiredExtensions
	default:
		n.condStatus, n.condReason = condTrue, nodev1alpha1.ReasonExtensionsReady
	}
	n.condNotReady = nil
	if n.condStatus == condFalse {
		n.condNotReady = slices.Clone(f.notReady)
	}
	n.condInfo = slices.Clone(f.info)
	n.condWritten = n.condWritten || !m.writesRefused
}

// gateReason: a bootstrap gate reports its cause (StartupTimeout once a
// KeepGated extension missed its startup timeout); a gate found at start and
// a failure gate report ExtensionsNotReady, or PlannedMaintenance while a
// planned release of this boot is among the failures (its other failures are
// planned too).
//
// Choice: while every extension of such a gate looks ready but has not
// renewed since gateStart yet, the last reason stays (ControllerStarted
// until an extension first fails).
//
// A gate found at start that first fails while the own view is stale says
// so until the view recovers, and is ControllerStarted again then
// (ownViewRecovers): the failure may be the view's fault, and the recovery
// judges every Lease as it was when the guard fired (seed
// 3916660364228779899).
func (m *Model) gateReason(n *node, f facts, t time.Time) string {
	g := n.gate
	for _, e := range n.Extensions {
		if !e.FailOpen && m.startupTimedOut(n, e, t) {
			return nodev1alpha1.ReasonStartupTimeout
		}
	}
	switch g.cause {
	case nodev1alpha1.ReasonNodeRegistered, nodev1alpha1.ReasonNodeRebooted, nodev1alpha1.ReasonNodeRecreated:
		return g.cause
	}
	if len(f.notReady) > 0 {
		if g.reason == nodev1alpha1.ReasonControllerStarted {
			g.failedInStall = m.ownViewStale
		}
		g.reason = nodev1alpha1.ReasonExtensionsNotReady
		// While a planned release is among the failures, the others are
		// planned too (docs/controller.md), and the reason says so.
		if f.planned {
			g.reason = nodev1alpha1.ReasonPlannedMaintenance
		}
	}
	return g.reason
}

// tickEvictionClock counts the time since the previous evaluation if the
// clock was counting then (failing, unplanned, not suspended).
func tickEvictionClock(n *node, t time.Time) {
	if n.clock.counting {
		n.clock.counted += t.Sub(n.clock.last)
	}
	n.clock.last = t
}

// runEvictionClock: the clock starts at the first unplanned failure of a
// node in service (never during bootstrap), resets when the node is ungated
// or recovers while held, and pauses while a guard suspends gating (time
// already counted is kept). Escalation happens at the evaluation where the
// counted time reaches EvictionTimeout and nothing suspends it; a drain
// interrupted by a suspension continues when it ends if the node is still
// failing.
//
// Choice: while the node's failures are planned (a planned release of this
// boot is among them) the clock is paused too, not reset; it continues if
// the planned Lease renews while another failure remains. A gated node whose
// extensions all look ready but have not renewed since gateStart is not
// failing: its clock is paused until it is ungated.
//
// Mode None runs no clock. A node whose clock runs out takes a turn of the
// cluster-wide rate (EscalationsPerSecond, burst 1: turns at least 1/rate
// apart, handed out in the order nodes come due) and is escalated at its
// turn if it is still due then; the turn is spent either way, and a node
// holds only one at a time.
//
// Choice: nodes that come due in one instant take their turns in name
// order. In real time no two nodes come due at the same instant, so a tie
// has no order of its own: a controller whose workers evaluate the nodes of
// a tie at once may hand the turns out in another, which SwapTiedTurns
// accepts.
func (m *Model) runEvictionClock(n *node, f facts, t time.Time) {
	turnCame := !n.turn.IsZero() && !t.Before(n.turn)
	if turnCame {
		n.turn = time.Time{}
	}
	// A leaving node has no eviction clock: should it stop leaving while
	// still failing, its clock starts afresh.
	if m.cfg.EvictionMode == EvictionModeNone || !n.inService || (n.gate == nil && len(f.notReady) == 0) || f.leaving != "" {
		n.clock = evictionClock{last: t}
		return
	}
	failing := isFailing(n, f)
	if failing && !n.clock.running {
		n.clock.running, n.clock.counted = true, 0
	}
	suspended := m.ownViewStale || m.blastSuspended(n)
	n.clock.counting = n.clock.running && failing && !suspended
	// Choice: EvictionTimeout 0 escalates at the first evaluation of the
	// failure.
	due := m.dueNow(n)
	switch {
	case turnCame:
		if due {
			m.escalateAtTurn(n, t)
		}
	case !n.turn.IsZero():
		// Waits for its turn.
	case due && !n.clock.escalated:
		n.tie = turnTie{due: t}
		if turn := m.takeTurn(t); turn.After(t) {
			n.turn = turn
		} else {
			m.escalateAtTurn(n, t)
		}
	case due:
		// A drain cut by a suspension goes on.
		m.escalate(n)
	}
}

// takeTurn hands out the next turn of the cluster-wide escalation rate.
func (m *Model) takeTurn(t time.Time) time.Time {
	turn := t
	if m.nextTurn.After(t) {
		turn = m.nextTurn
	}
	if r := m.cfg.EscalationsPerSecond; r > 0 {
		m.nextTurn = turn.Add(time.Duration(math.Round(float64(time.Second) / r)))
	}
	return turn
}

// escalateAtTurn escalates a node at its turn of the rate, keeping what
// SwapTiedTurns would put back.
func (m *Model) escalateAtTurn(n *node, t time.Time) {
	n.tie.escalatedAt, n.tie.evicted, n.tie.noExecute = t, n.evicted, n.noExecute
	m.escalate(n)
}

// SwapTiedTurns trades the turns of two nodes that came due in the same
// instant: escalated, which its turn escalated now, and waiting, which holds
// a later turn. escalated gives its escalation back and waits for waiting's
// turn; waiting takes the turn of now, which escalates it if it is still
// due (waitingEscalated: the driver saw the controller escalate it now) and
// is spent otherwise (the driver saw the controller escalate neither: the
// node no longer fails, and the turn it took first went by unused). It
// reports false, changing nothing, when the two are not such a pair, or when
// whether waiting is due does not match waitingEscalated: only the order
// within a tie is open, never whether or when a turn is spent.
//
// A driver that sees the controller escalate a node the model has waiting,
// or leave the node the model escalated at its turn, calls it to say which
// order of the tie the controller took (its several workers evaluate the
// nodes of a tie at once, and whichever takes a turn first has the earlier
// one; seed 8630686478205880935: n17 and n19 came due together with the
// rate spent until 3m34s, the controller gave n19 that turn and n17 the
// next, and n19, recovered by then, spent its turn unescalated).
func (m *Model) SwapTiedTurns(escalated, waiting string, waitingEscalated bool) bool {
	x, y := m.nodes[escalated], m.nodes[waiting]
	if x == nil || y == nil || x == y || x.tie.due.IsZero() || !x.tie.due.Equal(y.tie.due) ||
		!x.tie.escalatedAt.Equal(m.now) || !y.turn.After(m.now) || y.clock.escalated ||
		m.dueNow(y) != waitingEscalated {
		return false
	}
	x.turn, y.turn = y.turn, time.Time{}
	x.clock.escalated = false
	x.evicted, x.noExecute = x.tie.evicted, x.tie.noExecute
	x.tie.escalatedAt = time.Time{}
	if waitingEscalated {
		m.escalateAtTurn(y, m.now)
	}
	return true
}

// HoldAgainAtResume takes back the taint the blast radius's resume put on a
// held node in this instant, when its scope is suspended again in the same
// instant: the node is held, as before the resume. It reports false,
// changing nothing, for any other node.
//
// The model evaluates every node at each observation; the controller's
// resume queues the failing nodes, and its workers sync them one by one. A
// failure observed in the instant of the resume can suspend the scope
// again before the sync of a queued node, which then finds it suspended and
// holds the node (seed 11717233602785484563: zone z1 resumed at n1's planned
// release and suspended again at n15's crash; the controller had synced
// n11, n21 and n1 by then, not n3 and n9). In real time either order
// happens; a driver that sees the controller hold such a node calls it.
func (m *Model) HoldAgainAtResume(name string) bool {
	n := m.nodes[name]
	if n == nil || !n.resumedAt.Equal(m.now) || n.gate == nil || !n.gate.heldFromStart || !n.tainted ||
		n.clock.escalated || m.ownViewStale || !m.blastSuspended(n) {
		return false
	}
	n.tainted, n.held, n.heldSince, n.gate = false, true, n.gate.start, nil
	n.condStatus, n.condReason = condFalse, nodev1alpha1.ReasonGatingSuspended
	n.resumedAt = time.Time{}
	return true
}

// dueNow: the node's eviction clock has run out while counting, as
// runEvictionClock's last evaluation of it left the clock.
func (m *Model) dueNow(n *node) bool {
	return n.clock.counting && m.cfg.EvictionTimeout >= 0 && n.clock.counted >= m.cfg.EvictionTimeout
}

// escalate: the node's pods are evicted (mode Evict) or the NoExecute
// variant of its taint is added (mode NoExecute).
func (m *Model) escalate(n *node) {
	n.clock.escalated = true
	// Choice: Evicted says the pods went, so only an escalation in mode
	// Evict sets it, and a configuration change to another mode leaves it
	// (the pods are gone whatever the controller runs with now).
	n.evicted = n.evicted || m.evicts()
	// Choice: a variant decided while the API server refuses the
	// controller's writes is not on the node. The escalation stands, and
	// the evaluation once writes are taken adds the variant if the node is
	// still due (case due in runEvictionClock); a new gate before then
	// (a reboot) starts its own clock, and the variant never comes (seed
	// 2388285751009756394: the model put it on during an outage, the node
	// rebooted before the writes came back, and the controller's new gate
	// carried no variant).
	if m.cfg.EvictionMode == EvictionModeNoExecute && !m.writesRefused {
		n.noExecute = true
	}
}

// writeBootRecord keeps nodehealth.io/boot current for a node in service:
// written in the evaluation that ungates it, once for a node found in
// service, and again when the set of fail-opens of this boot changes. A node
// still gated in its boot gets a pending record while an extension has
// failed open (so that a restart neither starts that startup timeout again
// nor takes the node for one that was ready), and keeps it up to date until
// the ungate: a fail-open that ended leaves it too, or a restart would
// restore it.
//
// Choice: the record is written for every node in service whose record
// differs, whether or not it is tainted or held at that moment (so a node
// found in service and tainted at once still counts as in service after a
// restart), and also for nodes that list no gating extension.
//
// A node in service also carries its dead marks: every gating extension
// whose Lease is held but expired, at the renewal it expired at. While the
// own view is stale the marks stay as they were (an expiry judged on a stale
// view may be the view's fault).
//
// Choice: the controller marks at most 4 extensions per node; the
// simulation's nodes list fewer, so the model marks them all.
func (m *Model) writeBootRecord(n *node, f facts, t time.Time) {
	var fo []string
	for e := range n.failedOpen {
		fo = append(fo, e)
	}
	sort.Strings(fo)
	want := bootRecord{bootID: n.BootID, uid: n.UID, failedOpen: strings.Join(fo, ",")}
	if n.inService && m.ownViewStale {
		if rec := n.record.get(); rec.uid == n.UID {
			want.dead = rec.dead
		}
	} else if n.inService {
		var dead []string
		for _, e := range f.notReady {
			if l := m.leases[leaseKey{n.Name, e}]; l != nil && l.held && l.observedSet {
				dead = append(dead, fmt.Sprintf("%s@%d", e, l.renewTime))
			}
		}
		want.dead = strings.Join(dead, ",")
	}
	if !n.inService {
		rec := n.record.get()
		pendingHere := rec.pending && rec.bootID == n.BootID && rec.uid == n.UID
		if n.gate == nil || (len(fo) == 0 && !pendingHere) {
			return
		}
		want.pending = true
	}
	if m.writesRefused {
		// Decided, not on the Node: the record is written with the next
		// evaluation after the API server takes writes again, and a
		// node excluded before then keeps the record it had (seed
		// 2869923648807023944: an ungate refused by an outage left the
		// previous boot's record, and the node, excluded during the
		// outage, was found rebooted when the label went).
		return
	}
	if n.record == nil || *n.record != want {
		n.record = &want
	}
}
