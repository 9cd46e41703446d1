package nodehealth

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// nodeFacts are the parts of a Node an evaluation reads.
type nodeFacts struct {
	name   string
	uid    types.UID
	bootID string
	zone   string
	// resourceVersion is the version of the Node the facts were read from.
	resourceVersion string
	tainted         bool
	// noExecute: the NoExecute variant of the taint is present.
	noExecute bool
	record    bootRecord
	hasRecord bool
	// created is the Node's creationTimestamp (the API server's clock).
	created time.Time
	// leaving: what could make the node leaving, judged at the
	// evaluation's instant.
	leaving leavingFacts
}

// extensionStatus is the evaluated state of one extension on one node.
type extensionStatus struct {
	name    string
	lease   string
	affects bool
	// gating: affects readiness and did not fail open after a startup timeout.
	gating  bool
	ready   bool
	planned bool
	// reason is Ready, LeaseMissing, LeaseReleased, LeaseExpired, NeverRenewed
	// or StartupTimeout.
	reason      string
	detail      string
	lastRenewal time.Time
	// renewTime is the Lease's own spec.renewTime, which a dead mark of the
	// boot record names.
	renewTime time.Time
	// failedAt is when the extension stopped being ready: the expiry
	// instant, when the release was observed, or when the Lease was deleted
	// (or first seen missing).
	failedAt         time.Time
	renewedSinceGate bool
	// startGrace: lastRenewal is when this controller first saw the Lease,
	// not a renewal it observed (leaseObservation.startGrace).
	startGrace bool
}

// Extension status reasons.
const (
	extReady          = nodev1alpha1.ExtensionReady
	extLeaseMissing   = nodev1alpha1.ExtensionLeaseMissing
	extLeaseReleased  = nodev1alpha1.ExtensionLeaseReleased
	extLeaseExpired   = nodev1alpha1.ExtensionLeaseExpired
	extNeverRenewed   = nodev1alpha1.ExtensionNeverRenewed
	extStartupTimeout = nodev1alpha1.ExtensionStartupTimeout
)

// decision is what one evaluation wants done to a node.
type decision struct {
	// taint and noExecute: whether the readiness taint (with the configured
	// effect) and its NoExecute variant should be on the node.
	taint     bool
	noExecute bool
	// recordBoot: write record, the boot record for the node's current
	// boot and UID.
	recordBoot bool
	record     bootRecord
	// failOpenLeavesRecord: the node lists no extension that affects
	// readiness, and the record of its boot names a fail-open that ended
	// (its extension renewed off the list): written all the same.
	failOpenLeavesRecord bool
	statuses             []extensionStatus
	// suppressed: the node should be gated for a failure but the taint is
	// withheld because gating is suspended.
	suppressed bool
	// escalate: the eviction clock ran out.
	escalate bool
	// nextCheck is when the evaluation may change without any event;
	// leaseCheck the earliest expiry of a ready Lease, which is nextCheck
	// when nothing else is due.
	nextCheck  time.Time
	leaseCheck time.Time
	// awaitsView is the latest expiry of a Lease that the clock has passed
	// and the view does not vouch for yet (evalInput.vouchedUntil): the
	// Lease counts as ready until the canary's horizon passes it, and the
	// node is judged again then. Zero when there is none.
	awaitsView time.Time
	// started and ended are set when the gate began or ended in this step.
	started bool
	ended   bool
	// ungateLatency is from the last required renewal to the ungate decision.
	ungateLatency time.Duration
	// detectedAt is the failure instant that caused a new failure gate.
	detectedAt time.Time
	// startupTimeouts are the extensions whose startup timeout passed in
	// this step.
	startupTimeouts []startupTimeout
	// startup is the start-up timeline of a boot whose gate ended in this
	// step; startupExtensions has every gating extension's time to its
	// first ready renewal (the timeline lists the slowest only), for the
	// histograms.
	startup           *nodev1alpha1.StartupTimeline
	startupExtensions map[string]time.Duration
	// steady: a renewal of a ready Lease can change nothing but the node's
	// expiry timer (steadiness).
	steady bool
	// deadMarksChanged: the record's dead marks differ from the node's.
	deadMarksChanged bool
	// failing and tracked: how the node counts for the blast radius
	// (tracked: it lists an extension that affects readiness);
	// suspendedWhy says why failure taints are suspended for it, if they
	// are. recount: a failure taint or an escalation is decided on a count
	// that may be behind; the controller brings it up to date and
	// evaluates again.
	failing, tracked bool
	suspendedWhy     string
	// leaving says why the node is leaving ("" when it is not): it is
	// neither failing nor tracked, and never escalated.
	leaving string
	recount bool
	// next is the node's state after this evaluation.
	next *nodeState
}

type startupTimeout struct {
	extension string
	timeout   time.Duration
	policy    FailurePolicy
}

// evalInput is the snapshot an evaluation decides from: the node's facts,
// the state the controller kept of it, what was observed of each of its
// Leases, the guards and the clock. Nothing in it changes while, or
// because, the node is evaluated.
type evalInput struct {
	now  time.Time
	opts *Options
	node nodeFacts
	// prev is the state kept of the node; the evaluation reads it and
	// returns the next one (decision.next).
	prev *nodeState
	exts []requiredExtension
	// leases holds what the tracker observed of each extension's Lease, in
	// the order of exts.
	leases []leaseLookup
	// unlisted are the extensions that failed open in the node's boot and
	// that its list does not hold now (nodeState.unlistedFailedOpen), and
	// unlistedLeases what the tracker observed of their Leases, in their
	// order: a renewal ends a fail-open whether or not the node lists the
	// extension.
	unlisted       []requiredExtension
	unlistedLeases []leaseLookup
	// live: the node appeared while the controller was running (not in its
	// initial view), so it is new.
	live bool
	// ownViewStale: the own-view guard holds every taint addition.
	ownViewStale bool
	// vouchedUntil is the canary's horizon (canary.vouchedUntil): while the
	// view is current, a Lease expires for the evaluation once both now and
	// the horizon are past its expiry. Zero: no canary, the clock alone.
	// While the view is stale the clock alone judges, and the own-view
	// guard holds what that decides.
	vouchedUntil time.Time
	// blast is the blast radius as the node sees it; recount: the
	// controller can bring the count up to date and ask again
	// (decision.recount).
	blast   blastView
	recount bool
}

// leaseLookup is what the tracker knows of one Lease (ok: it exists), and
// when it was deleted if it is missing and the tracker remembers.
type leaseLookup struct {
	obs       leaseObservation
	ok        bool
	deletedAt time.Time
}

// lookupLeases snapshots what the tracker knows of exts' Leases.
func (t *leaseTracker) lookupLeases(exts []requiredExtension) []leaseLookup {
	out := make([]leaseLookup, len(exts))
	for i, ext := range exts {
		l := &out[i]
		l.obs, l.ok = t.get(ext.lease.Namespace, ext.lease.Name)
		if !l.ok {
			l.deletedAt, _ = t.deletedAt(ext.lease.Namespace, ext.lease.Name)
		}
	}
	return out
}

// evaluate runs one step of a node's gate state machine (docs/controller.md).
// It is the controller's decision function, pure: it reads nothing but its
// input, changes nothing in it, and returns the decision with the node's
// next state, so a table of (state, facts, Leases) → decision tests it. The
// blast-radius count, the timers and the writes follow from the decision
// (Controller.evaluateNode, apply). The steps follow kube-controller-manager's
// nodelifecycle split, each named after the reference model's rule it
// implements (pkg/nodehealth/model/rules.go):
//
//	bootChange           rebooted, recreated, findNode, beginBootstrapGate
//	extensionStatuses    leaseReady, each extension's readiness from its Lease
//	applyStartupTimeouts applyStartupTimeouts
//	plannedReleases      plannedRelease
//	gateTransition       openFailureGate, gateMayEnd (mayUngate), ungate, widenFailedOnlyScope
//	isFailing            isFailing, and the blast radius it counts in
//	placeTaint           placeTaint
//	writeBootRecord      writeBootRecord
//	runEvictionClock     runEvictionClock
func evaluate(in evalInput) decision {
	e := &evaluation{in: in, now: in.now, expiryNow: expiryInstant(in.now, in.vouchedUntil, in.ownViewStale),
		f: in.node, st: in.prev.clone(), exts: in.exts, allPlanned: true}
	e.d.next = e.st
	e.leavingSignal()
	e.bootChange()
	e.extensionStatuses()
	e.applyStartupTimeouts()
	e.plannedReleases()
	if len(e.gating) == 0 {
		e.noGatingExtensions()
		return e.d
	}
	e.st.last.hadGating = true
	e.gateTransition()
	e.isFailing()
	e.placeTaint()
	e.writeBootRecord()
	e.runEvictionClock()
	e.steadiness()
	return e.d
}

// expiryInstant is the instant Lease expiries are judged at: while the view
// is current, the earlier of now and the view's horizon (vouchedUntil, zero
// without a canary); while it is stale, now, and the own-view guard holds
// what that decides.
func expiryInstant(now, vouchedUntil time.Time, stale bool) time.Time {
	if !stale && !vouchedUntil.IsZero() && vouchedUntil.Before(now) {
		return vouchedUntil
	}
	return now
}

// leavingSignal judges whether the node is leaving (docs/controller.md,
// "Leaving nodes") and keeps what it read in the node's state, where the
// blast-radius recount and the escalation read it again at their own instant.
func (e *evaluation) leavingSignal() {
	why, changes := e.f.leaving.Signal(e.now, e.in.opts.LifecycleConditionMaxAge)
	e.st.leaving = e.f.leaving
	e.d.leaving = why
	// A foreign lifecycle condition stops counting when it grows stale:
	// the node is evaluated then, and is not steady meanwhile (steadiness).
	e.leavingChanges = changes
	e.earliest(changes)
}

// steadiness decides whether, after this evaluation, only the expiry of a
// ready Lease can change the node's evaluation: it is ungated and not
// failing, every extension is ready and gates as it affects readiness (none
// failed open: the renewal that ends a fail-open changes the node),
// nothing is withheld or escalating, its leaving does not change with the
// clock (a foreign lifecycle condition growing stale), and the next check is
// a Lease expiry, not a startup timeout, grace or eviction clock. A renewal of such a node's
// Lease is evaluated by moving its expiry timer (Controller.recheckTimer),
// which is what this evaluation would decide again.
func (e *evaluation) steadiness() {
	st, d := e.st, &e.d
	// A creation taint waiting for the end of its registration grace (due
	// whatever the Leases do) is on a node without gating extensions, which
	// is never steady: noGatingExtensions decides it, not this.
	if st.gated || e.failing || d.suppressed || d.escalate || len(d.startupTimeouts) > 0 || !e.leavingChanges.IsZero() ||
		e.unlistedFailOpen || len(d.statuses) == 0 || d.leaseCheck.IsZero() || !d.nextCheck.Equal(d.leaseCheck) {
		return
	}
	for _, s := range d.statuses {
		if !s.ready || s.affects != s.gating {
			return
		}
	}
	d.steady = true
}

// evaluation is one run of evaluate: its inputs and what the steps found so
// far.
type evaluation struct {
	in  evalInput
	now time.Time
	// expiryNow is the instant Lease expiries are judged at: now, or the
	// view's horizon if that is earlier.
	expiryNow time.Time
	f         nodeFacts
	st        *nodeState
	exts      []requiredExtension
	d         decision

	// gating are the statuses of the extensions that gate the node,
	// notReady those of them that are not ready; allPlanned: every not
	// ready one counts as planned (plannedReleases).
	gating, notReady []*extensionStatus
	allPlanned       bool
	// failing and suspended: set by failure, read by escalation.
	failing, suspended bool
	// leavingChanges is when the node's leaving changes with the clock
	// alone (a foreign lifecycle condition grows stale); zero: never.
	leavingChanges time.Time
	// releasesBoot is the boot a planned release first seen in this
	// evaluation belongs to, when it is not the node's current one: on a
	// node first seen with a boot record that reveals a reboot, a release
	// found was made before that reboot (plannedInThisBoot).
	releasesBoot string
	// bootOnLeftover: a reboot or re-creation began in this evaluation
	// on a node that still carries the taint of a gate that had ended.
	bootOnLeftover bool
	// replaced: this evaluation found the Node replaced by another object
	// (its UID changed): a taint on it is the one it was created with.
	replaced bool
	// unlistedFailOpen: an extension the list does not hold is still
	// failed open (endUnlistedFailOpens).
	unlistedFailOpen bool
}

// earliest lowers the decision's nextCheck to t if t is a future instant.
func (e *evaluation) earliest(t time.Time) {
	if !t.IsZero() && t.After(e.now) && (e.d.nextCheck.IsZero() || t.Before(e.d.nextCheck)) {
		e.d.nextCheck = t
	}
}

// bootChange starts a full gate on a reboot or a re-creation, seen live or
// through the boot record, and adopts a node seen for the first time.
func (e *evaluation) bootChange() {
	st, f, now := e.st, e.f, e.now
	firstSight := st.uid == ""
	wasGated := st.gated
	switch {
	case !firstSight && f.uid != st.uid:
		st.beginGate(causeRecreated, now)
		st.handled.uid = f.uid
		e.replaced = true
	case !firstSight && st.bootID != "" && f.bootID != "" && f.bootID != st.bootID:
		st.beginGate(causeRebooted, now)
		st.handled.boot = f.bootID
		if now.After(st.firstSeen) {
			// Not at first sight's instant (a start): what is found then
			// is judged by the boot record.
			st.rebootSeen = now
		}
	case f.hasRecord && f.record.UID != f.uid && st.handled.uid != f.uid:
		st.beginGate(causeRecreated, now)
		st.handled.uid = f.uid
		st.startup.foundAtStart = firstSight && !e.in.live
	case f.hasRecord && f.record.BootID != "" && f.bootID != "" && f.record.BootID != f.bootID && st.handled.boot != f.bootID:
		st.beginGate(causeRebooted, now)
		st.handled.boot = f.bootID
		st.startup.foundAtStart = firstSight && !e.in.live
		if firstSight {
			// A controller that starts after the reboot cannot tell when
			// a release it finds was made; the updater releases before it
			// reboots and renews only once the Node shows the new boot, so
			// the release belongs to the boot the record names.
			e.releasesBoot = f.record.BootID
		}
	case firstSight && e.in.live:
		st.beginGate(causeNew, now)
		st.createdLive = true
	case firstSight && f.tainted:
		// Found gated after a start or a failover: the gate stands, and the
		// extensions must renew again after this moment.
		st.beginGate(causeFoundGated, now)
		st.startup.foundAtStart = true
		st.readyInBoot = f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && !f.record.Pending
		st.restoreFailedOpen(f)
	case firstSight:
		st.restoreFailedOpen(f)
		// Found untainted after a start or a failover: the node is in
		// service, so a failure of its extensions is a failure (counted for
		// the blast radius), not a bootstrap. This is what keeps a first
		// install on a cluster with a broken extension from gating every
		// node at once.
		st.readyInBoot = true
	}
	// A reboot of a node this controller had ungated (an ungate whose
	// write was refused) finds the ended gate's taint on it: not the new
	// gate's (placeTaint). A replaced Node's taint is its own (replaced).
	e.bootOnLeftover = !firstSight && !wasGated && st.gated && st.gate.cause.bootstrap() && f.tainted
	st.uid, st.bootID = f.uid, f.bootID
}

// extensionStatuses judges every extension by its Lease.
func (e *evaluation) extensionStatuses() {
	st := e.st
	st.recordedDead = nil
	if e.f.hasRecord && e.f.record.UID == e.f.uid {
		st.recordedDead = e.f.record.Dead
	}
	missing := map[string]time.Time{}
	e.d.statuses = make([]extensionStatus, 0, len(e.exts))
	for i, ext := range e.exts {
		l := e.in.leases[i]
		obs, ok := l.obs, l.ok
		s := e.leaseStatus(ext, l)
		if !ok {
			missing[ext.name] = s.failedAt
		}
		if ok {
			s.lastRenewal, s.renewTime, s.startGrace = obs.observedAt, obs.renewTime, obs.startGrace
			// A release is what was observed, not a renewal.
			s.renewedSinceGate = renewedSince(obs, st.gate) && s.reason != extLeaseReleased
		}
		if !ok || !obs.released() {
			delete(st.plannedBoot, ext.name)
		}
		if s.ready && s.renewedSinceGate && ext.affects && st.startup.firstReady != nil {
			// The first ready renewal after the gate began (or began
			// again at an own-view recovery) is the extension's start-up.
			if at, seen := st.startup.firstReady[ext.name]; !seen || !at.After(st.gate.start) {
				st.startup.firstReady[ext.name] = s.lastRenewal
			}
		}
		if base, failed := st.failedOpen[ext.name]; failed {
			base.lease = ext.lease
			st.failedOpen[ext.name] = base
		}
		// lastRenewal is an observed renewal, never an own-view
		// recovery's grace (leaseObservation.graceFrom).
		if st.failOpenEnds(ext.name, s.lastRenewal, s.startGrace, s.ready) {
			// Failing open lasts until the extension renews; from then
			// on it gates like any other.
			s.gating = ext.affects
		}
		e.d.statuses = append(e.d.statuses, s)
	}
	st.missing = missing
	e.endUnlistedFailOpens()
	e.collectGating()
}

// endUnlistedFailOpens ends the fail-open of an extension the node's list
// does not hold now on a renewal observed after it failed open, as for a
// listed one: the extension came up, and the boot record loses it, so that
// neither this controller nor a restarted one takes it for failed open when
// a label or a rule puts it on the list again (simulation seed
// 11458548706464037492). A fail-open restored from the record takes the
// Lease at its first evaluation for baseline here too.
func (e *evaluation) endUnlistedFailOpens() {
	st, grace := e.st, e.in.opts.RenewalGrace
	for i, ext := range e.in.unlisted {
		if !st.hasFailedOpen(ext.name) || slices.ContainsFunc(e.exts, func(x requiredExtension) bool { return x.name == ext.name }) {
			continue
		}
		l := e.in.unlistedLeases[i]
		ready := l.ok && !l.obs.released() && !l.obs.observedAt.IsZero() && e.expiryNow.Before(l.obs.expiresAt(grace))
		if !st.failOpenEnds(ext.name, l.obs.observedAt, l.obs.startGrace, ready) {
			// Its next renewal must be evaluated: the node is not
			// steady while it waits for one.
			e.unlistedFailOpen = true
		}
	}
}

// leaseStatus judges one extension by what the tracker observed of its
// Lease (ok: the Lease exists).
func (e *evaluation) leaseStatus(ext requiredExtension, l leaseLookup) extensionStatus {
	obs, ok := l.obs, l.ok
	st, now, grace := e.st, e.now, e.in.opts.RenewalGrace
	s := extensionStatus{name: ext.name, lease: ext.lease.String(), affects: ext.affects}
	s.gating = ext.affects && !st.hasFailedOpen(ext.name)
	switch {
	case !ok:
		s.reason, s.detail = extLeaseMissing, fmt.Sprintf("lease %s does not exist", s.lease)
		s.failedAt = st.missingSince(ext.name, now)
		if !l.deletedAt.IsZero() && l.deletedAt.Before(s.failedAt) {
			s.failedAt = l.deletedAt
		}
	case obs.released():
		s.reason = extLeaseReleased
		s.planned = e.plannedInThisBoot(ext.name, obs.reason, obs.releasedAt)
		// A planned release asks for maintenance: it gates even from an
		// extension whose failures never do.
		s.gating = s.gating || s.planned
		s.detail = "released"
		if obs.reason != "" {
			s.detail += ", reason " + obs.reason
		}
		if obs.message != "" {
			s.detail += ": " + obs.message
		}
		s.failedAt = obs.releasedAt
	case obs.observedAt.IsZero():
		s.reason, s.detail = extNeverRenewed, fmt.Sprintf("lease %s was never renewed", s.lease)
	case !e.expiryNow.Before(obs.expiresAt(grace)):
		s.reason = extLeaseExpired
		s.failedAt = obs.expiresAt(grace)
		s.detail = fmt.Sprintf("no renewal observed for %s (lease duration %s + grace %s)",
			now.Sub(obs.observedAt).Round(time.Second), obs.duration, grace)
	case st.markedDead(ext.name, obs):
		// Judged expired before a restart, and not renewed since: the
		// start grace does not revive it.
		s.reason = extLeaseExpired
		s.failedAt = now
		s.detail = "judged expired before the controller restarted, and not renewed since (boot record)"
	default:
		s.ready, s.reason = true, extReady
		exp := obs.expiresAt(grace)
		if !now.Before(exp) && exp.After(e.d.awaitsView) {
			// Past by the clock, beyond the view's horizon: a renewal
			// may be on its way unseen (evalInput.vouchedUntil).
			e.d.awaitsView = exp
		}
		e.earliest(exp)
		if e.d.leaseCheck.IsZero() || exp.Before(e.d.leaseCheck) {
			e.d.leaseCheck = exp
		}
	}
	return s
}

// markedDead reports whether the node's boot record, as its last evaluation
// read it, marks the extension's Lease dead at the renewTime the Lease still
// has, while nothing but this controller's start grace keeps it ready: the
// evaluation and the blast-radius recount (failingAt) both ask it.
func (s *nodeState) markedDead(ext string, obs leaseObservation) bool {
	at, ok := s.recordedDead[ext]
	return ok && obs.startGrace && !obs.renewTime.IsZero() && at == obs.renewTime.UnixMicro()
}

// deadMarks are the dead marks the node's boot record should carry: the
// gating extensions of a node in service whose Lease is expired, by name,
// at most maxDead. Bootstrap gates need none: they are full, and a
// restarted controller keeps a gated node gated until every extension
// renews.
func (e *evaluation) deadMarks() map[string]int64 {
	if !e.st.readyInBoot {
		return nil
	}
	if e.in.ownViewStale {
		// An expiry judged on a stale view may be the view's fault: the
		// marks stay as they are until it is current again.
		if e.f.hasRecord && e.f.record.UID == e.f.uid {
			return e.f.record.Dead
		}
		return nil
	}
	var marks map[string]int64
	for _, s := range e.d.statuses {
		if s.gating && s.reason == extLeaseExpired && !s.renewTime.IsZero() && len(marks) < maxDead {
			if marks == nil {
				marks = map[string]int64{}
			}
			marks[s.name] = s.renewTime.UnixMicro()
		}
	}
	return marks
}

// plannedInThisBoot reports whether a release with reason, observed at
// releasedAt, is planned and was made in the node's current boot. The boot a
// release belongs to is the one in which it was first seen: after a reboot
// the node's gate is the reboot gate over its gating extensions, whatever the
// releasing extension (the updater, which renews only once the Node shows the
// new boot) does next. A release observed before the controller watched the
// Node being created was made for an earlier Node of that name: it belongs to
// no boot of this one. A release observed in the instant a reboot was seen
// belongs to the new boot, whichever of the two an evaluation saw first: the
// controller's clock cannot order them, and the release then holds the node
// until the updater renews, as it does in the new boot anyway.
func (e *evaluation) plannedInThisBoot(extension, reason string, releasedAt time.Time) bool {
	if !e.in.opts.MaintenanceReasons.Has(reason) {
		return false
	}
	boot, seen := e.st.plannedBoot[extension]
	if seen && boot != e.f.bootID && !e.st.rebootSeen.IsZero() && releasedAt.Equal(e.st.rebootSeen) {
		seen = false
	}
	if !seen {
		boot = e.f.bootID
		switch {
		case e.st.createdLive && releasedAt.Before(e.st.firstSeen):
			boot = releasedForEarlierNode
		case e.releasesBoot != "":
			boot = e.releasesBoot
		}
		if e.st.plannedBoot == nil {
			e.st.plannedBoot = map[string]string{}
		}
		e.st.plannedBoot[extension] = boot
	}
	return boot == e.f.bootID
}

// releasedForEarlierNode marks a release made for a deleted Node of the same
// name; no bootID equals it.
const releasedForEarlierNode = "(a deleted node of this name)"

// collectGating lists the gating statuses.
func (e *evaluation) collectGating() {
	e.gating = e.gating[:0]
	for i := range e.d.statuses {
		if e.d.statuses[i].gating {
			e.gating = append(e.gating, &e.d.statuses[i])
		}
	}
}

// applyStartupTimeouts: startup timeouts apply while the node waits for its extensions after a
// bootstrap gate: an extension past its timeout fails open (Ungate) or keeps
// the node gated and says so (KeepGated).
func (e *evaluation) applyStartupTimeouts() {
	st, now := e.st, e.now
	if !st.gated || st.readyInBoot {
		return
	}
	for i, ext := range e.exts {
		s := &e.d.statuses[i]
		// A startup timeout is for an extension that never came up after
		// the gate began: one that renewed since and failed later (it may
		// be released now) started, and its failure is not a startup one.
		if !s.gating || ext.rule == nil || ext.rule.StartupTimeout <= 0 || s.lastRenewal.After(st.gate.start) {
			continue
		}
		deadline := st.gate.start.Add(ext.rule.StartupTimeout)
		if now.Before(deadline) {
			e.earliest(deadline)
			continue
		}
		if ext.rule.FailurePolicy == FailurePolicyUngate && e.in.ownViewStale {
			// Nothing fails open on a view that may hide the renewal;
			// the lift restarts the gate and its timeouts.
			continue
		}
		if !st.hasFailedOpen(ext.name) && !st.startupReported.Has(ext.name) {
			e.d.startupTimeouts = append(e.d.startupTimeouts, startupTimeout{extension: ext.name, timeout: ext.rule.StartupTimeout, policy: ext.rule.FailurePolicy})
			insert(&st.startupReported, ext.name)
		}
		if ext.rule.FailurePolicy == FailurePolicyUngate {
			st.failOpen(ext.name, s.lastRenewal, s.startGrace)
			s.gating = false
			s.detail += fmt.Sprintf("; startup timeout %s passed, not gating the node until it becomes ready", ext.rule.StartupTimeout)
		} else {
			insert(&st.startupExpired, ext.name)
			s.reason = extStartupTimeout
			s.detail += fmt.Sprintf("; not ready %s after the node was gated (startup timeout), keeping the node gated", ext.rule.StartupTimeout)
		}
	}
	e.collectGating()
}

// plannedReleases finds the gating extensions that are not ready, and
// whether their failure is planned. A planned release lasts until that Lease
// renews or is deleted: while it does not, the node's other failures are planned too (the
// updater reboots the node, and its other extensions expire meanwhile),
// whichever came first. A failure that came first and is held by a guard
// leaves no gate to remember the release in, so a release among the
// failures makes them planned in the evaluation that sees it (seed
// 5177122390577962639: a restarted controller held the node the updater
// had asked to taint).
func (e *evaluation) plannedReleases() {
	st := e.st
	anyPlanned := false
	for _, s := range e.gating {
		if !s.ready {
			e.notReady = append(e.notReady, s)
			e.allPlanned = e.allPlanned && s.planned
			anyPlanned = anyPlanned || s.planned
		}
	}
	if anyPlanned {
		e.allPlanned = true
	}
	for _, s := range e.d.statuses {
		if s.planned && st.gated {
			insert(&st.gate.planned, s.name)
		}
		if s.ready || s.reason == extLeaseMissing {
			// Renewed, or deleted: a missing Lease is an unplanned
			// failure whatever it said before (simulation seed
			// 18378656569196115148: a Lease released for an update,
			// then deleted, kept the node's failures planned).
			st.gate.planned.Delete(s.name)
		}
	}
	for name := range st.gate.planned {
		if !slices.ContainsFunc(e.d.statuses, func(s extensionStatus) bool { return s.name == name }) {
			st.gate.planned.Delete(name)
		}
	}
	if len(e.notReady) > 0 && len(st.gate.planned) > 0 {
		e.allPlanned = true
	}
}

// noGatingExtensions decides for a node without gating extensions: it is
// never gated. A taint placed at creation stays for the registration grace,
// so that extensions have time to register themselves.
func (e *evaluation) noGatingExtensions() {
	st, f, now := e.st, e.f, e.now
	wasGated := st.gated
	if st.gated {
		st.gated = false
		st.gate.cause = causeNone
	}
	st.resetEscalation()
	e.d.failing, e.d.tracked = false, countAffecting(e.d.statuses) > 0 && e.d.leaving == ""
	// Only a node that listed gating extensions before is "ungated"; a
	// node that never did was never gated by this controller.
	e.d.ended = wasGated && st.last.hadGating
	if e.d.ended {
		e.recordStartup()
		st.startup.cause, st.startup.firstReady = causeNone, nil
		// Released by failing open: the node is in service.
		st.readyInBoot = true
	}
	e.d.record = st.wantRecord(f)
	ended := f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && len(f.record.FailedOpen) > len(e.d.record.FailedOpen)
	if len(st.failedOpen) > 0 || ended {
		// Every gating extension failed open: the record is what tells
		// a restarted controller so. A fail-open that ended leaves it,
		// also on a node whose list no longer holds the extension.
		e.d.recordBoot = !f.hasRecord || !equalRecords(f.record, e.d.record)
		e.d.failOpenLeavesRecord = ended && countAffecting(e.d.statuses) == 0
	}
	if f.tainted && !st.last.hadGating && len(st.failedOpen) == 0 {
		graceEnd := st.firstSeen.Add(e.in.opts.RegistrationGrace)
		if now.Before(graceEnd) {
			e.d.taint = true
			e.earliest(graceEnd)
		}
	}
}

// gateTransition gates a node whose gating extension is not ready, keeps the
// gate's reason current, and ungates once the extensions in the gate's scope
// renewed after it began.
func (e *evaluation) gateTransition() {
	st := e.st
	switch {
	case len(e.notReady) > 0:
		e.stayOrBecomeGated()
	case st.gated:
		e.mayUngate()
	case !st.readyInBoot:
		// Found ready without a record of this boot (first start of the
		// controller on an existing cluster): adopt the node as ready rather
		// than gating every node of the cluster at once.
		st.readyInBoot = true
	}

	e.startupExpiryCause()
	e.widenFailedOnlyScope()
}

// mayUngate ungates a gated node whose extensions are all ready once those
// in the gate's scope renewed after it began.
func (e *evaluation) mayUngate() {
	st, now := e.st, e.now
	// A failed-only gate waits for the extensions that failed (or were
	// added) since gateStart; the others never stopped renewing, and
	// waiting for their next renewal is needless downtime.
	latest := time.Time{}
	fresh := true
	for _, s := range e.gating {
		if !st.gate.full && !st.gate.scope.Has(s.name) {
			continue
		}
		fresh = fresh && s.renewedSinceGate
		if s.lastRenewal.After(latest) {
			latest = s.lastRenewal
		}
	}
	// A node held for a failure was never tainted: judged afresh, it
	// is ungated as soon as nothing it requires is failing (no failure
	// taint is ever owed, and no renewal is owed either). A taint the
	// cache still shows on it is the leftover of an ungate whose write
	// failed, held off since (placeTaint), not a gate in force.
	// So is one whose taint another writer took off while the own view is
	// stale: the guard holds its addition in this very evaluation
	// (placeTaint), and nothing fails, so it ends now rather than at the
	// node's next sync, which only the condition's own write brought
	// (simulation seed 17122793937090481195).
	held := (st.last.suppressed || e.taintHeldOffNow()) && !st.gate.full
	// A bootstrap, reboot or re-creation seen while the own-view guard
	// holds is pending: it gates when the guard lifts (gateStart = the
	// lift), and renewals observed before that, delivered by a watch
	// that is catching up, may predate the cause (docs/controller.md).
	// A taint still on the node is one the held gate owes its
	// removal (placeTaint), not the gate's.
	pending := st.last.suppressed && st.gate.full && e.in.ownViewStale
	if (fresh || held) && !pending {
		e.recordStartup()
		st.ungate()
		e.d.ended = true
		e.d.ungateLatency = now.Sub(latest)
	}
}

// taintHeldOffNow reports whether the gate's taint is off the node while the
// own view is stale, not on its way there from this gate's own write:
// placeTaint holds it off (an addition), which makes a failed-only gate a
// held failure.
func (e *evaluation) taintHeldOffNow() bool {
	return e.in.ownViewStale && !e.f.tainted && !e.ownTaintInFlight()
}

// ownTaintInFlight reports whether this gate wrote its taint and the Node
// the evaluation read predates that write: the taint is the gate's own, on
// its way, and no guard holds it.
func (e *evaluation) ownTaintInFlight() bool {
	return e.st.gate.taintWritten && !cacheReached(e.f, e.st.gate.taintWrittenRV)
}

// widenFailedOnlyScope keeps the scope of a failed-only gate: what fails
// now, and what was added to the node's list during the gate.
func (e *evaluation) widenFailedOnlyScope() {
	st := e.st
	if st.gated && !st.gate.full {
		if st.last.suppressed {
			// Held for a failure: judged afresh at every evaluation, so
			// the gate the lift taints waits for what fails then (the
			// model's openFailureGate). An extension that expired only
			// in a stale view and is ready by the own-view recovery's
			// grace owes no renewal (seeds 15089412335168732690 and
			// 3960348572464930654). A leftover taint still on the node
			// changes nothing: it was held off (placeTaint).
			st.gate.scope = nil
			st.gate.judgedAfreshAt = e.now
		} else if st.gate.heldFromStart && st.gate.judgedAfreshAt.Equal(e.now) {
			// Still the instant the hold ended: what fails "then" does
			// not depend on whether an extension's renewal in it was
			// delivered before or after the lift. One whose renewal
			// counts leaves the scope, or an own-view recovery that
			// restarts the gate would wait for it again on one order
			// and not the other (seed 15330235846551453348).
			for _, s := range e.gating {
				if s.ready && s.renewedSinceGate {
					st.gate.scope.Delete(s.name)
				}
			}
		}
		for _, s := range e.notReady {
			insert(&st.gate.scope, s.name)
		}
		for _, s := range e.gating {
			if _, known := st.last.extReady[s.name]; !known && len(st.last.extReady) > 0 {
				// Added to the list during the gate.
				insert(&st.gate.scope, s.name)
			}
		}
	}
}

// stayOrBecomeGated handles a node with gating extensions not ready.
func (e *evaluation) stayOrBecomeGated() {
	st, now := e.st, e.now
	switch {
	case !st.gated:
		cause := causeNotReady
		if e.allPlanned {
			cause = causeMaintenance
		}
		st.beginGate(cause, now)
		e.d.started = true
		for _, s := range e.notReady {
			if s.planned {
				insert(&st.gate.planned, s.name)
			}
		}
		for _, s := range e.notReady {
			if !s.failedAt.IsZero() && (e.d.detectedAt.IsZero() || s.failedAt.Before(e.d.detectedAt)) {
				e.d.detectedAt = s.failedAt
			}
		}
	default:
		e.keepFailureCauseCurrent()
	}
}

// keepFailureCauseCurrent makes a gate's cause say what its failures are
// now: planned while every failure is (or a planned release of this gate
// stands), not ready otherwise.
func (e *evaluation) keepFailureCauseCurrent() {
	st := e.st
	switch {
	case st.gate.cause == causeFoundGated:
		// Found gated at a start: once an extension is known not to be
		// ready, that is the reason, not the restart. The gate stays
		// full (st.gate.full): every extension must still renew. On a
		// stale view it is so only until the recovery (recoverView).
		st.gate.cause = causeNotReady
		if e.allPlanned {
			st.gate.cause = causeMaintenance
		}
		st.gate.foundGatedInStall = e.in.ownViewStale
	case st.gate.cause == causeMaintenance && !e.allPlanned:
		st.gate.cause = causeNotReady
	case st.gate.cause == causeNotReady && e.allPlanned:
		st.gate.cause = causeMaintenance
	}
}

// startupExpiryCause makes StartupTimeout the gate's reason while an
// extension that missed its startup timeout (KeepGated) has not come up, and
// gives the gate its own cause back once it has. Every gating extension
// counts, ready or not: after a reboot the Lease of the previous boot may
// still be valid when the timeout passes, and the extension has not come up
// in this boot all the same.
func (e *evaluation) startupExpiryCause() {
	st := e.st
	if !st.gated || len(st.startupExpired) == 0 || st.readyInBoot {
		return
	}
	expired := false
	for _, s := range e.gating {
		expired = expired || s.reason == extStartupTimeout
	}
	switch {
	case expired && st.gate.cause != causeStartupExpiry:
		st.gate.causeBeforeExpiry, st.gate.cause = st.gate.cause, causeStartupExpiry
	case !expired && st.gate.cause == causeStartupExpiry:
		// The late extension came up: the gate is its cause's again
		// while the others renew, as its failures are now, not as they
		// were when the timeout passed (simulation seed
		// 5918163945968055005: a planned release that ended meanwhile
		// said PlannedMaintenance until the node's next sync).
		st.gate.cause = st.gate.causeBeforeExpiry
		if len(e.notReady) > 0 {
			e.keepFailureCauseCurrent()
		}
	}
}

// isFailing decides whether the node fails for the blast radius and the
// eviction clock (the model's isFailing): an unplanned failure of a gating
// extension after the node was ready in its boot. Failing nodes count
// whether tainted or not. It asks the blast radius, as it would count with
// the node judged so, whether failure taints are suspended for it.
func (e *evaluation) isFailing() {
	st, f := e.st, e.f
	leaving := e.d.leaving != ""
	failing := st.gated && st.readyInBoot && !e.allPlanned && len(e.notReady) > 0 && !leaving
	switch {
	case leaving:
		// A leaving node is never escalated: no eviction clock, and a
		// drain under way stops (escalationDue). Should it stop leaving
		// while still failing, its clock starts afresh.
		st.resetEscalation()
	case (e.in.blast.failing() || st.escalation.clock.started()) && !failing && st.gated:
		// Still gated: its failures became planned, or it waits for
		// renewals after the gate restarted. The eviction clock pauses,
		// keeping what it counted; only an ungate or a recovery resets it.
		st.escalation.clock.advance(e.now, true)
		// An escalated node's drain pauses with it, as under a
		// suspension, and goes on if the failure does: the escalation
		// is not decided again (seed 6830237159890156263).
		st.escalation.interrupted = st.escalation.marked
	case (e.in.blast.failing() || st.escalation.clock.started()) && !failing:
		st.resetEscalation()
	}
	e.failing = failing
	// A leaving node counts on neither side of the blast radius: a
	// scale-down of a third of the nodes must not suspend gating for the
	// rest.
	e.d.failing, e.d.tracked = failing, countAffecting(e.d.statuses) > 0 && !leaving
	e.suspended, e.d.suspendedWhy = e.in.blast.suspendedIf(e.d.tracked, failing)
	// Failures that come due together (a restart's grace running out, a
	// mass failure) are all counted before any one of them is tainted or
	// escalated, not one by one as their nodes are synced: the node whose
	// timer is handled first must not slip through.
	e.d.recount = failing && !e.suspended && e.in.recount && (!f.tainted || e.escalationComesDue())
}

// placeTaint decides the taint (the model's placeTaint): untaints always
// proceed; additions wait while the controller cannot trust its own view,
// and failure taints while gating is suspended. A failure gate that begins
// in this evaluation on a node still tainted found the taint of a gate that
// ended (an ungate whose write the Node's change refused: seed
// 16365078962249930749); that taint is owed its removal, and is held off
// like an addition. It stays owed until the removal is written: the
// evaluation that began the gate may have failed to write it too (an
// outage of the controller's writes: seed 5546801762588968901), and its
// retries find the gate begun and the node held. So is the taint a reboot
// finds in the same way (seed 5144553269545614998): its gate is pending
// while the own view is stale, and a held full gate keeps owing that
// removal until the lift, also while the API server refuses it.
func (e *evaluation) placeTaint() {
	st, f := e.st, e.f
	e.d.taint = st.gated
	if e.ownTaintInFlight() {
		// The gate's own taint, written: a guard that fires now holds
		// new taints only.
		return
	}
	// Reached by the cache (or never written): the cache says from now on.
	st.gate.taintWritten, st.gate.taintWrittenRV = false, ""
	bootLeftover := e.bootOnLeftover || st.last.suppressed && st.gate.full
	// Neither a gate that begins in this evaluation nor one held in the
	// last wrote the taint the node carries: an ended gate's, or someone
	// else's. The stale own view holds every addition, whatever makes the
	// gate (a planned release, a leaving node's failure: seed
	// 6450100404079171451, a taint someone added to a leaving node in the
	// instant its extension expired in a stale view).
	// A Node replaced by another object carries nothing the controller
	// wrote: a taint on it was placed at creation (kubelet
	// registerWithTaints, the admission policy) and is the re-creation's
	// gate, kept while the own view is stale as a new node's is, whatever
	// the old object's gate was. Taken for a leftover, it came off a
	// machine none of whose extensions had renewed (simulation seed
	// 12441625308791025956).
	leftover := f.tainted && !e.replaced && ((e.d.started || st.last.suppressed) && (e.failing || e.in.ownViewStale) || bootLeftover)
	if st.gated && (!f.tainted || leftover) && (e.in.ownViewStale || (e.failing && e.suspended)) {
		e.d.taint = false
		e.d.suppressed = true
		if e.d.started {
			st.gate.heldFromStart = true
		}
	}
}

// renewedSince reports whether the Lease renewed after the gate began: by
// the controller's clock, strictly after gateStart, since a renewal observed
// in the very instant of the cause may have come before it. A gate held from
// its start is the exception: its start is when the failure was first held,
// judged on Leases that showed no renewal, so a real renewal (not a start's
// grace) observed in that instant came after. Whether a suspension lifted
// before or after such a renewal in the instant then does not change the
// outcome (seed 17597418052033749223: a controller that started, suspended
// and lifted in one instant, with a held node's renewal in it).
func renewedSince(obs leaseObservation, g gateSpan) bool {
	return obs.observedAt.After(g.start) || g.heldFromStart && !obs.startGrace && obs.observedAt.Equal(g.start)
}

// cacheReached reports whether the Node the evaluation read is the version
// written at resourceVersion rv, showing the taint written, or a later one.
// resourceVersions compare as the API server assigns them (k8s.io/apimachinery's
// resourceversion); where they do not (a server that does not make them
// comparable, or no version known) the write counts as reached once the
// cache shows the taint.
func cacheReached(f nodeFacts, rv string) bool {
	return writeShown(f.resourceVersion, rv, f.tainted)
}

// writeShown reports whether a cached object at resourceVersion cached
// shows a write that gave it resourceVersion written: a later version
// does; the same one does if it shows what was written (shows). Where the
// versions do not compare, showing what was written is all there is to go by.
func writeShown(cached, written string, shows bool) bool {
	cmp, err := resourceversion.CompareResourceVersion(cached, written)
	if err != nil {
		return shows
	}
	return cmp > 0 || cmp == 0 && shows
}

// writeBootRecord decides the boot record the node carries and whether to
// write it (the model's writeBootRecord).
func (e *evaluation) writeBootRecord() {
	st, f := e.st, e.f
	e.d.record = st.wantRecord(f)
	e.d.record.Dead = e.deadMarks()
	var recordedDead map[string]int64
	if f.hasRecord {
		recordedDead = f.record.Dead
	}
	e.d.deadMarksChanged = !maps.Equal(recordedDead, e.d.record.Dead)
	switch {
	case !st.gated:
		e.d.recordBoot = !f.hasRecord || !equalRecords(f.record, e.d.record)
	case st.readyInBoot && (e.d.deadMarksChanged || !f.hasRecord || !f.record.sameBoot(f.uid, f.bootID) || f.record.Pending ||
		!slices.Equal(f.record.FailedOpen, e.d.record.FailedOpen)):
		// A fail-open that ended while the node is gated or held for
		// another extension leaves the record as it does on a node in
		// service, or a restarted controller would restore it and report
		// the extension failed open until its next renewal (seed
		// 17519778984855938557).
		//
		// In service in this boot, but the record does not say so: the
		// ungate that should have written it was refused, and a failure
		// gated the node again before it could be written. A restarted
		// controller would take the old record for a reboot while it
		// was down (seeds 4052673543596324612, 13502343339044881667).
		//
		// A node in service whose extension died or came back: the
		// record of its boot says which Leases are dead, so that a
		// restart does not revive them (written at that transition only).
		e.d.recordBoot = true
	case !st.readyInBoot && (len(st.failedOpen) > 0 || (f.hasRecord && f.record.Pending && f.record.sameBoot(f.uid, f.bootID))):
		// Still gated in this boot by another extension: the record keeps
		// what failed open, so that a restarted controller does not start
		// its startup timeout again; Pending says the boot was not ready.
		// A fail-open that ended (its extension renewed) leaves the record
		// too, or a restarted controller would restore it and not let
		// that extension gate again.
		e.d.record.Pending = true
		e.d.recordBoot = !f.hasRecord || !equalRecords(f.record, e.d.record)
	}
}

// escalationComesDue reports whether this evaluation would escalate the
// failing node if nothing held it, without moving its clock.
func (e *evaluation) escalationComesDue() bool {
	st, opts := e.st, e.in.opts
	if opts.Eviction.Mode == EvictionModeNone || opts.Eviction.Timeout < 0 || (st.escalation.marked && !st.escalation.interrupted) {
		return false
	}
	return st.escalation.clock.ranOut(e.now, opts.Eviction.Timeout)
}

// runEvictionClock runs the eviction clock of an unplanned failure after the
// node was ready (the model's runEvictionClock), paused while a guard holds
// escalation, and decides the escalation when it runs out.
func (e *evaluation) runEvictionClock() {
	st, now, opts := e.st, e.now, e.in.opts
	held := e.suspended || e.in.ownViewStale
	if e.failing && opts.Eviction.Mode != EvictionModeNone && opts.Eviction.Timeout >= 0 {
		elapsed := st.escalation.clock.advance(now, held)
		if elapsed >= opts.Eviction.Timeout {
			e.d.escalate = !held && (!st.escalation.marked || st.escalation.interrupted)
		} else if !held {
			e.earliest(now.Add(opts.Eviction.Timeout - elapsed))
		}
	}
	// The NoExecute variant stays while the node is gated and goes with the
	// gate; it is added only once the rate-limited escalation marked the
	// node, and never while a guard holds: an escalation decided before the
	// guard fired waits for it to lift like any other.
	// A leaving node loses it: it is never escalated. So does a gate that
	// begins on the variant of a gate whose removal was refused
	// (noExecuteOwed): only its own escalation adds it. An escalation is
	// of a failure that stands: a variant someone removed from a node still
	// gated but no longer failing (its extension's renewal came with a
	// stall's end, and the gate the lift restarted waits for the next one)
	// is not added again, which would evict pods for a failure that ended.
	add := st.escalation.marked && e.failing && opts.Eviction.Mode == EvictionModeNoExecute && !held
	// A variant this controller wrote is on the node, though the cache may
	// not show it yet (seed 14614349608928335306: the escalation's write,
	// then a renewal delivered before the write's watch event; the sync
	// the renewal queued found a cache without the variant, a node no
	// longer failing, and took the variant off a node still gated).
	hasNX := e.f.noExecute
	if st.noExecuteWrittenRV != "" {
		if writeShown(e.f.resourceVersion, st.noExecuteWrittenRV, e.f.noExecute) {
			st.noExecuteWrittenRV = ""
		} else {
			hasNX = true
		}
	}
	if !hasNX || add {
		st.noExecuteOwed = false
	}
	e.d.noExecute = st.gated && e.d.leaving == "" && ((hasNX && !st.noExecuteOwed) || add)
}

// missingSince is when the controller first saw the extension's Lease
// missing, or now.
func (s *nodeState) missingSince(extension string, now time.Time) time.Time {
	if at, ok := s.missing[extension]; ok {
		return at
	}
	return now
}

// restoreFailedOpen takes the extensions that failed open in this boot from the
// boot record, after a start or a failover: without it, a node released by
// failurePolicy Ungate would be taken for a node whose extension just failed.
func (s *nodeState) restoreFailedOpen(f nodeFacts) {
	// A list longer than any this controller writes is someone else's: it
	// is not trusted to release extensions from gating.
	if f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && len(f.record.FailedOpen) > 0 && len(f.record.FailedOpen) <= maxFailedOpen {
		// Their renewals' baselines are taken at the first evaluation
		// (failOpenEnds).
		s.failedOpen = make(map[string]failOpenBaseline, len(f.record.FailedOpen))
		for _, ext := range f.record.FailedOpen {
			s.failedOpen[ext] = failOpenBaseline{}
		}
	}
}

// wantRecord is the boot record the node should carry once it is ungated.
// It keeps the boot's start-up timeline: the one this controller built, or
// the one the node's record of this boot already holds (after a start).
func (s *nodeState) wantRecord(f nodeFacts) bootRecord {
	r := bootRecord{BootID: f.bootID, UID: f.uid, FailedOpen: s.failedOpenNames(), Startup: s.startup.timeline}
	if len(r.FailedOpen) > maxFailedOpen {
		r.FailedOpen, r.FailedOpenOmitted = r.FailedOpen[:maxFailedOpen], len(r.FailedOpen)-maxFailedOpen
	}
	if r.Startup == nil && f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && f.record.Startup != nil &&
		len(f.record.Startup.Extensions) <= nodev1alpha1.MaxStartupExtensions {
		// Kept as it is, unless it is larger than any this controller
		// writes (someone else wrote it): then it is dropped.
		r.Startup = f.record.Startup
	}
	return r
}

// recordStartup builds the start-up timeline of a boot whose gate ends now,
// if the gate is the boot's start-up: a bootstrap, reboot or re-creation
// gate, or a gate found at start, before the node was ever ready in the boot.
// Failure and maintenance gates of a node already ready have none.
func (e *evaluation) recordStartup() {
	st, now := e.st, e.now
	if st.readyInBoot || st.startup.cause == causeNone {
		return
	}
	tl := &nodev1alpha1.StartupTimeline{
		Cause:        string(st.startup.cause),
		FoundAtStart: st.startup.foundAtStart,
		Start:        metav1.NewTime(st.startup.start.UTC().Truncate(time.Second)),
		Ready:        metav1.Duration{Duration: nodev1alpha1.RoundStartup(now.Sub(st.startup.start))},
	}
	if (st.startup.cause == causeNew || st.startup.cause == causeRecreated) && !e.f.created.IsZero() {
		tl.SinceCreation = &metav1.Duration{Duration: nodev1alpha1.RoundStartup(now.Sub(e.f.created))}
	}
	e.d.startupExtensions = map[string]time.Duration{}
	var exts []nodev1alpha1.StartupExtension
	for _, s := range e.d.statuses {
		if !s.affects {
			continue
		}
		entry := nodev1alpha1.StartupExtension{Name: s.name}
		if at, ok := st.startup.firstReady[s.name]; ok && at.After(st.gate.start) {
			d := at.Sub(st.startup.start)
			e.d.startupExtensions[s.name] = d
			entry.Ready = &metav1.Duration{Duration: nodev1alpha1.RoundStartup(d)}
		}
		exts = append(exts, entry)
	}
	sort.Slice(exts, func(i, j int) bool { return nodev1alpha1.Slower(exts[i], exts[j]) })
	if len(exts) > nodev1alpha1.MaxStartupExtensions {
		tl.Omitted = int32(len(exts) - nodev1alpha1.MaxStartupExtensions)
		exts = exts[:nodev1alpha1.MaxStartupExtensions]
	}
	tl.Extensions = exts
	st.startup.timeline = tl
	e.d.startup = tl
}

func equalRecords(a, b bootRecord) bool {
	return a.BootID == b.BootID && a.UID == b.UID && slices.Equal(a.FailedOpen, b.FailedOpen) &&
		a.FailedOpenOmitted == b.FailedOpenOmitted && a.Pending == b.Pending && maps.Equal(a.Dead, b.Dead)
}

// conditionFor builds the SystemExtensionsReady condition of a decision, and a
// signature that changes only when the condition means something new (not
// when only the ages in its message move).
func conditionFor(now time.Time, st *nodeState, d decision, suspendedWhy string) (status v1.ConditionStatus, reason, message, signature string) {
	failing, info, sig := notReadyLines(now, d.statuses)
	switch {
	case st.gated && d.suppressed:
		status, reason = v1.ConditionFalse, nodev1alpha1.ReasonGatingSuspended
		if len(failing) > 0 {
			message = "Not tainted although extensions are not ready: " + suspendedWhy + ". Not ready: " + strings.Join(failing, ", ") + "."
		} else {
			// A gate held before its extensions were judged (a reboot or
			// a new node seen while the own view is stale): nothing is
			// named as not ready, the gate says what the node waits for.
			message = "Not tainted although the node is gated: " + suspendedWhy + ". " + gateMessage(st.gate.cause)
		}
	case st.gated && d.leaving != "":
		status, reason = v1.ConditionFalse, nodev1alpha1.ReasonNodeLeaving
		message = "The node is leaving (" + d.leaving + "): it is not counted in the blast radius and never escalated. " + gateMessage(st.gate.cause)
		if len(failing) > 0 {
			message += " Not ready: " + strings.Join(failing, ", ") + "."
		}
		sig = append(sig, "leaving="+d.leaving)
	case st.gated:
		status, reason = v1.ConditionFalse, string(st.gate.cause)
		message = gateMessage(st.gate.cause)
		if len(failing) > 0 {
			message += " Not ready: " + strings.Join(failing, ", ") + "."
		} else {
			message += " Waiting for every required extension to renew its Lease after the node was gated."
		}
	case countAffecting(d.statuses) > countGatingAffecting(d.statuses):
		status, reason = v1.ConditionTrue, nodev1alpha1.ReasonExtensionsFailedOpen
		message = "The node is not gated, but a required extension failed open: it missed its startup timeout in this boot and its rule's failurePolicy is Ungate."
	default:
		status, reason = v1.ConditionTrue, nodev1alpha1.ReasonExtensionsReady
		message = "Every required system extension is ready."
		if countAffecting(d.statuses) == 0 {
			reason, message = nodev1alpha1.ReasonNoRequiredExtensions, "The node lists no system extension that affects readiness."
		}
	}
	if len(info) > 0 {
		message += infoListPrefix + strings.Join(info, ", ") + "."
	}
	signature = string(status) + "|" + reason + "|" + strings.Join(sig, ",")
	return status, reason, message, signature
}

// notReadyLines describes each extension that is not ready, as the
// condition's message names it: those that gate (failing) apart from those
// that do not (info). sig holds what of them the condition's signature
// compares (name, reason, whether it gates; never the ages), sorted.
func notReadyLines(now time.Time, statuses []extensionStatus) (failing, info, sig []string) {
	for _, s := range statuses {
		if s.ready {
			continue
		}
		line := s.name + " (" + s.reason
		if s.detail != "" {
			line += ": " + s.detail
		}
		if !s.lastRenewal.IsZero() && s.reason != extLeaseExpired {
			line += fmt.Sprintf("; last renewal observed %s ago", now.Sub(s.lastRenewal).Round(time.Second))
		}
		line += ")"
		if s.gating {
			failing = append(failing, line)
		} else {
			info = append(info, line)
		}
		sig = append(sig, s.name+"="+s.reason+"/"+fmt.Sprint(s.gating))
	}
	sort.Strings(sig)
	return failing, info, sig
}

// infoListPrefix begins the condition message's list of the extensions
// that are not ready but do not affect readiness.
const infoListPrefix = " Not ready but not affecting readiness: "

// countAffecting counts the extensions that affect readiness, whether they
// gate the node now or failed open.
func countAffecting(statuses []extensionStatus) int {
	n := 0
	for _, s := range statuses {
		if s.affects {
			n++
		}
	}
	return n
}

// countGatingAffecting counts the extensions that affect readiness and gate
// the node now (did not fail open).
func countGatingAffecting(statuses []extensionStatus) int {
	n := 0
	for _, s := range statuses {
		if s.affects && s.gating {
			n++
		}
	}
	return n
}

func countGating(statuses []extensionStatus) int {
	n := 0
	for _, s := range statuses {
		if s.gating {
			n++
		}
	}
	return n
}

func gateMessage(c gateCause) string {
	switch c {
	case causeNew:
		return "The node is new and waits for its system extensions."
	case causeRebooted:
		return "The node rebooted and waits for its system extensions to renew their Leases."
	case causeRecreated:
		return "The node was re-created and waits for its system extensions."
	case causeFoundGated:
		return "The controller started and found the node gated; it waits for fresh renewals."
	case causeMaintenance:
		return "Planned maintenance: an extension released its Lease for maintenance."
	case causeStartupExpiry:
		return "An extension did not become ready within its startup timeout."
	default:
		return "A required system extension is not ready."
	}
}
