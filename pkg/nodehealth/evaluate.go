package nodehealth

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// nodeFacts are the parts of a Node an evaluation reads.
type nodeFacts struct {
	name    string
	uid     types.UID
	bootID  string
	zone    string
	tainted bool
	// noExecute: the NoExecute variant of the taint is present.
	noExecute bool
	record    bootRecord
	hasRecord bool
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
	// failedAt is when the extension stopped being ready: the expiry
	// instant, when the release was observed, or when the Lease was deleted
	// (or first seen missing).
	failedAt         time.Time
	renewedSinceGate bool
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
	statuses   []extensionStatus
	// suppressed: the node should be gated for a failure but the taint is
	// withheld because gating is suspended.
	suppressed bool
	// escalate: the eviction clock ran out.
	escalate bool
	// nextCheck is when the evaluation may change without any event.
	nextCheck time.Time
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
}

type startupTimeout struct {
	extension string
	timeout   time.Duration
	policy    FailurePolicy
}

// evalEnv is what an evaluation needs beyond the node and its state.
type evalEnv struct {
	now     time.Time
	opts    *Options
	tracker *leaseTracker
	// live: the node appeared while the controller was running (not in its
	// initial view), so it is new.
	live bool
	// suspended reports whether failure taints and evictions are suspended
	// for the node's zone; ownViewStale whether all taint additions are.
	suspended    func(zone string) bool
	ownViewStale bool
	// updateFailing tells the blast-radius counter whether the node fails.
	updateFailing func(failing, tracked bool)
}

// evaluate runs one step of a node's gate state machine (DESIGN §5).
func evaluate(env evalEnv, f nodeFacts, st *nodeState, exts []requiredExtension) decision {
	now := env.now
	var d decision
	earliest := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (d.nextCheck.IsZero() || t.Before(d.nextCheck)) {
			d.nextCheck = t
		}
	}

	// Reboots and re-creations, seen live or through the boot record.
	firstSight := st.uid == ""
	switch {
	case !firstSight && f.uid != st.uid:
		st.gate(causeRecreated, now)
		st.handledUID = f.uid
	case !firstSight && st.bootID != "" && f.bootID != "" && f.bootID != st.bootID:
		st.gate(causeRebooted, now)
		st.handledBoot = f.bootID
	case f.hasRecord && f.record.UID != f.uid && st.handledUID != f.uid:
		st.gate(causeRecreated, now)
		st.handledUID = f.uid
	case f.hasRecord && f.record.BootID != "" && f.bootID != "" && f.record.BootID != f.bootID && st.handledBoot != f.bootID:
		st.gate(causeRebooted, now)
		st.handledBoot = f.bootID
	case firstSight && env.live:
		st.gate(causeNew, now)
	case firstSight && f.tainted:
		// Found gated after a start or a failover: the gate stands, and the
		// extensions must renew again after this moment.
		st.gate(causeFoundGated, now)
		st.readyInBoot = f.hasRecord && f.record.sameBoot(f.uid, f.bootID)
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
	st.uid, st.bootID = f.uid, f.bootID

	// Evaluate every extension.
	grace := env.opts.RenewalGrace
	var gating, notReady []*extensionStatus
	allPlanned := true
	d.statuses = make([]extensionStatus, 0, len(exts))
	missing := map[string]time.Time{}
	defer func() { st.missing = missing }()
	for _, e := range exts {
		s := extensionStatus{name: e.name, lease: e.lease.String(), affects: e.affects}
		s.gating = e.affects && !st.failedOpen.Has(e.name)
		obs, ok := env.tracker.get(e.lease.Namespace, e.lease.Name)
		switch {
		case !ok:
			s.reason, s.detail = extLeaseMissing, fmt.Sprintf("lease %s does not exist", s.lease)
			s.failedAt = st.missingSince(e.name, now)
			if at, deleted := env.tracker.deletedAt(e.lease.Namespace, e.lease.Name); deleted && at.Before(s.failedAt) {
				s.failedAt = at
			}
			missing[e.name] = s.failedAt
		case obs.released():
			s.reason = extLeaseReleased
			s.planned = env.opts.MaintenanceReasons.Has(obs.reason)
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
		case !now.Before(obs.expiresAt(grace)):
			s.reason = extLeaseExpired
			s.failedAt = obs.expiresAt(grace)
			s.detail = fmt.Sprintf("no renewal observed for %s (lease duration %s + grace %s)",
				now.Sub(obs.observedAt).Round(time.Second), obs.duration, grace)
		default:
			s.ready, s.reason = true, extReady
			earliest(obs.expiresAt(grace))
		}
		if ok {
			s.lastRenewal = obs.observedAt
			s.renewedSinceGate = obs.observedAt.After(st.gateStart)
			if s.reason == extLeaseReleased {
				// The release itself is what was observed.
				s.renewedSinceGate = false
			}
		}
		if s.ready && st.failedOpen.Has(e.name) {
			// Failing open lasts until the extension becomes ready; from
			// then on it gates like any other.
			st.failedOpen.Delete(e.name)
			s.gating = e.affects
		}
		d.statuses = append(d.statuses, s)
	}
	for i := range d.statuses {
		s := &d.statuses[i]
		if s.gating {
			gating = append(gating, s)
		}
	}

	// Startup timeouts apply while the node waits for its extensions after
	// a bootstrap gate.
	if st.gated && !st.readyInBoot {
		for i, e := range exts {
			s := &d.statuses[i]
			if !s.gating || e.rule == nil || e.rule.StartupTimeout <= 0 || (s.ready && s.renewedSinceGate) {
				continue
			}
			deadline := st.gateStart.Add(e.rule.StartupTimeout)
			if now.Before(deadline) {
				earliest(deadline)
				continue
			}
			if !st.failedOpen.Has(e.name) && !st.startupExpired.Has(e.name) {
				d.startupTimeouts = append(d.startupTimeouts, startupTimeout{extension: e.name, timeout: e.rule.StartupTimeout, policy: e.rule.FailurePolicy})
			}
			if e.rule.FailurePolicy == FailurePolicyUngate {
				st.failedOpen.Insert(e.name)
				s.gating = false
				s.detail += fmt.Sprintf("; startup timeout %s passed, not gating the node until it becomes ready", e.rule.StartupTimeout)
			} else {
				st.startupExpired.Insert(e.name)
				s.reason = extStartupTimeout
				s.detail += fmt.Sprintf("; not ready %s after the node was gated (startup timeout), keeping the node gated", e.rule.StartupTimeout)
			}
		}
		gating = gating[:0]
		for i := range d.statuses {
			if d.statuses[i].gating {
				gating = append(gating, &d.statuses[i])
			}
		}
	}
	for _, s := range gating {
		if !s.ready {
			notReady = append(notReady, s)
			allPlanned = allPlanned && s.planned
		}
	}
	// A planned release lasts until that Lease renews: while it does not,
	// the node's other failures are planned too (the updater reboots the
	// node, and its other extensions expire meanwhile).
	for _, s := range d.statuses {
		if s.planned && st.gated {
			st.plannedExts.Insert(s.name)
		}
		if s.ready {
			st.plannedExts.Delete(s.name)
		}
	}
	for name := range st.plannedExts {
		if !slices.ContainsFunc(d.statuses, func(s extensionStatus) bool { return s.name == name }) {
			st.plannedExts.Delete(name)
		}
	}
	if len(notReady) > 0 && len(st.plannedExts) > 0 {
		allPlanned = true
	}

	// Nodes without gating extensions are never gated. A taint placed at
	// creation stays for the registration grace, so that extensions have time
	// to register themselves.
	if len(gating) == 0 {
		wasGated := st.gated
		if st.gated {
			st.gated = false
			st.cause = causeNone
		}
		st.resetEscalation()
		env.updateFailing(false, false)
		// Only a node that listed gating extensions before is "ungated"; a
		// node that never did was never gated by this controller.
		d.ended = wasGated && st.hadGating
		if d.ended {
			// Released by failing open: the node is in service.
			st.readyInBoot = true
		}
		d.record = st.wantRecord(f)
		if len(st.failedOpen) > 0 {
			// Every gating extension failed open: the record is what tells
			// a restarted controller so.
			d.recordBoot = !f.hasRecord || !equalRecords(f.record, d.record)
		}
		if f.tainted && !st.hadGating && len(st.failedOpen) == 0 {
			graceEnd := st.firstSeen.Add(env.opts.RegistrationGrace)
			if now.Before(graceEnd) {
				d.taint = true
				earliest(graceEnd)
			}
		}
		return d
	}
	st.hadGating = true

	if len(notReady) > 0 {
		if !st.gated {
			cause := causeNotReady
			if allPlanned {
				cause = causeMaintenance
			}
			st.gate(cause, now)
			d.started = true
			for _, s := range notReady {
				if s.planned {
					st.plannedExts.Insert(s.name)
				}
			}
			for _, s := range notReady {
				if !s.failedAt.IsZero() && (d.detectedAt.IsZero() || s.failedAt.Before(d.detectedAt)) {
					d.detectedAt = s.failedAt
				}
			}
		} else if st.cause == causeFoundGated {
			// Found gated at a start: once an extension is known not to be
			// ready, that is the reason, not the restart. The gate stays
			// full (st.full): every extension must still renew.
			st.cause = causeNotReady
			if allPlanned {
				st.cause = causeMaintenance
			}
		} else if st.cause == causeMaintenance && !allPlanned {
			st.cause = causeNotReady
		} else if st.cause == causeNotReady && allPlanned {
			st.cause = causeMaintenance
		}
		if len(st.startupExpired) > 0 && !st.readyInBoot {
			for _, s := range notReady {
				if s.reason == extStartupTimeout {
					st.cause = causeStartupExpiry
				}
			}
		}
	} else if st.gated {
		// A failed-only gate waits for the extensions that failed (or were
		// added) since gateStart; the others never stopped renewing, and
		// waiting for their next renewal is needless downtime.
		latest := time.Time{}
		fresh := true
		for _, s := range gating {
			if !st.full && !st.scope.Has(s.name) {
				continue
			}
			fresh = fresh && s.renewedSinceGate
			if s.lastRenewal.After(latest) {
				latest = s.lastRenewal
			}
		}
		if fresh {
			st.ungate()
			d.ended = true
			d.ungateLatency = now.Sub(latest)
		}
	} else if !st.readyInBoot {
		// Found ready without a record of this boot (first start of the
		// controller on an existing cluster): adopt the node as ready rather
		// than gating every node of the cluster at once.
		st.readyInBoot = true
	}

	if st.gated && !st.full {
		for _, s := range notReady {
			st.scope.Insert(s.name)
		}
		for _, s := range gating {
			if _, known := st.extReady[s.name]; !known && len(st.extReady) > 0 {
				// Added to the list during the gate.
				st.scope.Insert(s.name)
			}
		}
	}

	// Failing nodes count toward the blast radius whether tainted or not.
	failing := st.gated && st.readyInBoot && !allPlanned && len(notReady) > 0
	if failing != st.failing && !failing {
		st.resetEscalation()
	}
	st.failing = failing
	env.updateFailing(failing, true)
	suspended := env.suspended(f.zone)

	d.taint = st.gated
	if st.gated && !f.tainted {
		// Untaints always proceed; additions wait while the controller cannot
		// trust its own view, and failure taints while gating is suspended.
		if env.ownViewStale || (failing && suspended) {
			d.taint = false
			d.suppressed = true
		}
	}
	d.record = st.wantRecord(f)
	if !st.gated && (!f.hasRecord || !equalRecords(f.record, d.record)) {
		d.recordBoot = true
	}

	// Escalation: only unplanned failures after the node was ready.
	if failing && env.opts.Eviction.Mode != EvictionModeNone && env.opts.Eviction.Timeout >= 0 {
		elapsed := st.escalationClock(now, suspended || env.ownViewStale)
		if elapsed >= env.opts.Eviction.Timeout {
			d.escalate = !suspended && !env.ownViewStale && !st.escalated
		} else if !suspended && !env.ownViewStale {
			earliest(now.Add(env.opts.Eviction.Timeout - elapsed))
		}
	}
	// The NoExecute variant stays while the node is gated and goes with the
	// gate; it is added only once the rate-limited escalation marked the node.
	d.noExecute = st.gated && (f.noExecute || (st.escalated && env.opts.Eviction.Mode == EvictionModeNoExecute))
	return d
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
	if f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && len(f.record.FailedOpen) > 0 {
		s.failedOpen = sets.New(f.record.FailedOpen...)
	}
}

// wantRecord is the boot record the node should carry once it is ungated.
func (s *nodeState) wantRecord(f nodeFacts) bootRecord {
	return bootRecord{BootID: f.bootID, UID: f.uid, FailedOpen: sets.List(s.failedOpen)}
}

func equalRecords(a, b bootRecord) bool {
	return a.BootID == b.BootID && a.UID == b.UID && slices.Equal(a.FailedOpen, b.FailedOpen)
}

// conditionFor builds the SystemExtensionsReady condition of a decision, and a
// signature that changes only when the condition means something new (not
// when only the ages in its message move).
func conditionFor(now time.Time, st *nodeState, d decision, suspendedWhy string) (status v1.ConditionStatus, reason, message, signature string) {
	var failing, info []string
	var sig []string
	for _, s := range d.statuses {
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
	switch {
	case st.gated && d.suppressed:
		status, reason = v1.ConditionFalse, nodev1alpha1.ReasonGatingSuspended
		message = "Not tainted although extensions are not ready: " + suspendedWhy + ". Not ready: " + strings.Join(failing, ", ")
	case st.gated:
		status, reason = v1.ConditionFalse, string(st.cause)
		message = gateMessage(st.cause)
		if len(failing) > 0 {
			message += " Not ready: " + strings.Join(failing, ", ") + "."
		} else {
			message += " Waiting for every required extension to renew its Lease after the node was gated."
		}
	default:
		status, reason = v1.ConditionTrue, nodev1alpha1.ReasonExtensionsReady
		message = "Every required system extension is ready."
		if countGating(d.statuses) == 0 {
			reason, message = nodev1alpha1.ReasonNoRequiredExtensions, "The node lists no system extension that affects readiness."
		}
	}
	if len(info) > 0 {
		message += " Not ready but not affecting readiness: " + strings.Join(info, ", ") + "."
	}
	signature = string(status) + "|" + reason + "|" + strings.Join(sig, ",")
	return status, reason, message, signature
}

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
