package nodehealth

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// gateCause says why a node is gated. The values are the reasons of the
// SystemExtensionsReady condition and of the nodehealth_gated_nodes metric.
type gateCause string

const (
	causeNone          gateCause = ""
	causeNew           gateCause = nodev1alpha1.ReasonNodeRegistered
	causeRebooted      gateCause = nodev1alpha1.ReasonNodeRebooted
	causeRecreated     gateCause = nodev1alpha1.ReasonNodeRecreated
	causeFoundGated    gateCause = nodev1alpha1.ReasonControllerStarted
	causeNotReady      gateCause = nodev1alpha1.ReasonExtensionsNotReady
	causeMaintenance   gateCause = nodev1alpha1.ReasonPlannedMaintenance
	causeStartupExpiry gateCause = nodev1alpha1.ReasonStartupTimeout
)

// bootCause reports whether a cause starts a bootstrap gate, which gates even
// while failure taints are suspended and never escalates.
func (c gateCause) bootstrap() bool {
	switch c {
	case causeNew, causeRebooted, causeRecreated:
		return true
	}
	return false
}

// bootRecord is the value of the nodehealth.io/boot annotation: the bootID and
// UID the node was last seen ready with. It lets a controller that was down
// during a reboot or a re-creation still notice it. FailedOpen lists the
// extensions released by a startup timeout with failurePolicy Ungate in this
// boot, so that a restarted controller does not take their absence for a
// failure (docs/controller.md, "The boot record").
//
// Pending marks a record written while the node was still gated in its
// boot, only to keep FailedOpen: an extension that failed open while another
// one kept the node gated. Such a record does not say the boot was ready.
//
// FailedOpen lists at most maxFailedOpen extensions, the first in name
// order; FailedOpenOmitted counts the others.
//
// Startup is the start-up timeline of the boot, written with the ungate that
// ends it (docs/controller.md, "The start-up timeline"); nothing reads it
// back but the plugin, and it never makes the record worth rewriting.
// Unknown fields (a newer controller's) are ignored when parsing.
type bootRecord struct {
	BootID     string    `json:"bootID,omitempty"`
	UID        types.UID `json:"uid"`
	FailedOpen []string  `json:"failedOpen,omitempty"`
	// FailedOpenOmitted counts the extensions that failed open but were
	// left out of FailedOpen (maxFailedOpen).
	FailedOpenOmitted int                           `json:"failedOpenOmitted,omitempty"`
	Pending           bool                          `json:"pending,omitempty"`
	Startup           *nodev1alpha1.StartupTimeline `json:"startup,omitempty"`
	// Dead maps each extension whose Lease the controller judged expired
	// on a node in service to that Lease's renewTime (Unix microseconds)
	// then: a restarted controller gives no start grace to a Lease whose
	// renewTime is still that one (docs/controller.md, "A restart does not
	// resurrect a dead extension"). At most maxDead entries.
	Dead map[string]int64 `json:"dead,omitempty"`
}

// maxDead bounds the extensions a boot record marks dead: one is enough to
// keep a failing node failing across a restart, and with maxFailedOpen names
// and the start-up timeline the record must stay under the 4 KiB the Node
// cache keeps of it. Further dead extensions get the start grace after a
// restart, like every Lease when the mark could not be written.
const maxDead = 4

// maxFailedOpen bounds the extensions a boot record lists in FailedOpen, as
// nodev1alpha1.MaxStartupExtensions bounds its timeline: a node's list may
// hold 64 extensions of 63-character names, 4.2 KiB as FailedOpen alone,
// over the 4 KiB nodeutil.TransformNode keeps of the record (a larger record
// is cached as a marker, unreadable, so the restart it is for would learn
// nothing from it). 32 names and the timeline stay under 3.5 KiB. A
// restarted controller judges the omitted extensions afresh: as failures if
// they are still not ready.
const maxFailedOpen = 32

// sameBoot reports whether the record was written in the node's current boot
// of its current incarnation.
func (r bootRecord) sameBoot(uid types.UID, bootID string) bool {
	return r.UID == uid && r.BootID == bootID
}

func parseBootRecord(value string) (bootRecord, bool) {
	var r bootRecord
	if value == "" || json.Unmarshal([]byte(value), &r) != nil || r.UID == "" {
		return bootRecord{}, false
	}
	return r, true
}

func (r bootRecord) String() string {
	data, _ := json.Marshal(r)
	return string(data)
}

// nodeState is what the controller remembers about a node between syncs. It is
// rebuilt from the Node (taint, boot record) after a start or a failover.
type nodeState struct {
	uid       types.UID
	bootID    string
	zone      string
	firstSeen time.Time

	// gated is the controller's decision that the node must carry the taint;
	// gateStart is when the controller observed the cause.
	gated     bool
	gateStart time.Time
	cause     gateCause
	// causeBeforeExpiry is the cause a startup timeout replaced, put
	// back when the gate begins again at an own-view recovery.
	causeBeforeExpiry gateCause
	// full: every extension must renew after gateStart to ungate (bootstrap,
	// reboot, re-creation, found gated at start). Otherwise the gate is
	// failed-only: only the extensions in scope must renew.
	full  bool
	scope sets.Set[string]
	// plannedExts are the extensions released for maintenance during this
	// gate; while any is not ready again, the node's other failures are
	// planned too (no eviction clock, no blast-radius count).
	plannedExts sets.Set[string]
	// readyInBoot is true once the node was ungated (or found ready) in its
	// current boot: only then is a failure a failure rather than bootstrap.
	readyInBoot bool
	// failedOpen holds extensions whose startup timeout passed with the Ungate
	// policy: they do not gate the node until they renew. failedOpenAt is
	// when each failed open (or was restored from the boot record): only a
	// renewal observed after that ends it, never a Lease still valid from
	// before, which is the one the timeout found wanting (failOpen).
	failedOpen   sets.Set[string]
	failedOpenAt map[string]time.Time
	// startupExpired holds extensions whose startup timeout passed with the
	// KeepGated policy, so that it is reported once.
	startupExpired sets.Set[string]
	// handledBoot and handledUID are the bootID and UID of the boot record
	// mismatch already acted on, so a stale record gates only once.
	handledBoot string
	handledUID  types.UID

	// The start-up of the current boot: startupCause is the cause of the
	// bootstrap or found-at-start gate (kept while the gate's reason moves
	// to StartupTimeout or ExtensionsNotReady), startupStart when it was
	// observed (an own-view recovery restarts the gate but not this),
	// foundAtStart whether it was found in the initial view. firstReady
	// holds each gating extension's first ready renewal observed after
	// gateStart: at most one entry per listed extension, dropped at the
	// ungate. startup is the timeline that ungate built, kept for the boot
	// so that a retried write carries it.
	startupCause gateCause
	startupStart time.Time
	foundAtStart bool
	firstReady   map[string]time.Time
	startup      *nodev1alpha1.StartupTimeline

	// missing holds when each extension's Lease was first seen missing, so
	// that the failure is timed from then (detection_latency_seconds).
	missing map[string]time.Time

	// failing: an unplanned failure after the node was ready in this boot.
	failing bool
	// The eviction clock: elapsed time of failure not counting suspensions.
	escElapsed      time.Duration
	escRunningSince time.Time
	escalated       bool
	// drainInterrupted: a suspension cut the drain of an escalated node;
	// it continues once the suspension ends if the node still fails.
	drainInterrupted bool
	// exts are the extensions the last evaluation resolved, so that the
	// blast radius can be brought up to date from every node's facts and
	// the current expiry of its Leases (Controller.recountFailing).
	exts []requiredExtension
	// plannedBoot is the bootID in which each planned release was first
	// seen: a planned release gates only in the boot it was made in.
	plannedBoot map[string]string
	// createdLive: the controller watched this Node being created, so a
	// release it observed before then was made for an earlier Node of the
	// same name (plannedInThisBoot).
	createdLive bool

	// recordedDead are the dead marks of the node's boot record as its last
	// evaluation read them, for the blast-radius recount (failingAt).
	recordedDead map[string]int64

	// What was last reported, so Events and condition writes happen on
	// transitions only.
	extReady     map[string]bool
	conditionSig string
	invalidList  string
	suppressed   bool
	hadGating    bool

	// steady: the last full evaluation found the node ungated, every
	// extension ready, and nothing due but the expiry of steadyLeases, the
	// Leases it read (Controller.recheckTimer).
	steady       bool
	steadyLeases []types.NamespacedName
}

func newNodeState(now time.Time) *nodeState {
	return &nodeState{firstSeen: now, failedOpen: sets.New[string](), startupExpired: sets.New[string](), extReady: map[string]bool{},
		scope: sets.New[string](), plannedExts: sets.New[string](), plannedBoot: map[string]string{}}
}

// gate starts a gate for cause at now.
func (s *nodeState) gate(cause gateCause, now time.Time) {
	s.gated = true
	s.gateStart = now
	s.cause = cause
	// Bootstrap and found-at-start gates are full; a reboot or a
	// re-creation during any gate restarts it as full.
	s.full = cause.bootstrap() || cause == causeFoundGated
	s.scope = sets.New[string]()
	if s.full {
		s.startupCause, s.startupStart, s.foundAtStart = cause, now, false
		s.firstReady = map[string]time.Time{}
		s.startup = nil
	}
	if cause.bootstrap() {
		s.plannedExts = sets.New[string]()
		s.readyInBoot = false
		s.failedOpen, s.failedOpenAt = sets.New[string](), nil
		s.startupExpired = sets.New[string]()
		s.resetEscalation()
	}
}

// failOpen stops ext from gating the node until the controller observes a
// renewal newer than lastRenewal, the last one it had observed when the
// startup timeout passed (zero: none).
func (s *nodeState) failOpen(ext string, lastRenewal time.Time) {
	s.failedOpen.Insert(ext)
	if s.failedOpenAt == nil {
		s.failedOpenAt = map[string]time.Time{}
	}
	s.failedOpenAt[ext] = lastRenewal
}

// failOpenEnds reports whether ext's fail-open ends, and ends it if so: the
// extension is ready on a renewal observed after the one it failed open on.
// A Lease still within its duration from before (the previous boot's) is
// the one the startup timeout found wanting; taking it for the extension
// coming up ungated the node and then tainted it as failing when that Lease
// expired. A fail-open restored from the boot record takes the renewal
// observed at its first evaluation as the one it failed open on.
func (s *nodeState) failOpenEnds(ext string, lastRenewal time.Time, ready bool) bool {
	if !s.failedOpen.Has(ext) {
		return false
	}
	base, known := s.failedOpenAt[ext]
	if !known {
		s.failOpen(ext, lastRenewal)
		return false
	}
	if !ready || !lastRenewal.After(base) {
		return false
	}
	s.failedOpen.Delete(ext)
	delete(s.failedOpenAt, ext)
	return true
}

// evictionClockRanOut reports whether the failure's eviction clock has
// counted timeout by now, without moving it.
func (s *nodeState) evictionClockRanOut(now time.Time, timeout time.Duration) bool {
	elapsed := s.escElapsed
	if !s.escRunningSince.IsZero() {
		elapsed += now.Sub(s.escRunningSince)
	}
	return elapsed >= timeout
}

func (s *nodeState) ungate() {
	s.startupCause, s.firstReady = causeNone, nil
	s.gated = false
	s.cause = causeNone
	s.full = false
	s.scope = sets.New[string]()
	s.plannedExts = sets.New[string]()
	s.readyInBoot = true
	s.resetEscalation()
}

func (s *nodeState) resetEscalation() {
	s.failing = false
	s.escElapsed = 0
	s.escRunningSince = time.Time{}
	s.escalated = false
	s.drainInterrupted = false
}

// escalationClock advances the eviction clock and reports how long the node
// has been failing, not counting time while escalation was suspended.
func (s *nodeState) escalationClock(now time.Time, suspended bool) time.Duration {
	running := !s.escRunningSince.IsZero()
	switch {
	case suspended && running:
		s.escElapsed += now.Sub(s.escRunningSince)
		s.escRunningSince = time.Time{}
	case !suspended && !running:
		s.escRunningSince = now
	}
	if s.escRunningSince.IsZero() {
		return s.escElapsed
	}
	return s.escElapsed + now.Sub(s.escRunningSince)
}
