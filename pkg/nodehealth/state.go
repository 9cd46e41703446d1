package nodehealth

import (
	"encoding/json"
	"maps"
	"slices"
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
// Each fact has one field: whether the node fails and its zone are the blast
// radius's (blastRadius.members), whether the own view is stale the
// controller's (Controller.viewStale). An evaluation never changes a
// nodeState: it returns the next one (evaluate).
type nodeState struct {
	// escalationTurn is the node's turn of the cluster-wide eviction rate
	// (escalationTurns; zero: none taken). Once taken it is kept until its
	// instant whatever the node does meanwhile, so an ungate does not give
	// the token back: at its instant the node is escalated if it is still
	// due, and the turn is spent either way.
	escalationTurn time.Time
	// noExecuteOwed: the node was ungated, so a NoExecute variant still on
	// it belongs to a gate that ended (its removal was refused, by an
	// outage or a change of the Node) and is owed its removal, also when a
	// new gate begins before it is written: only an escalation of that new
	// gate adds it again. A restarted controller owes nothing: the variant
	// it finds on a gated node is the gate's.
	noExecuteOwed bool
	// noExecuteWrittenRV: a Node write of this controller added the
	// NoExecute variant, at this resourceVersion, and the Node cache has not
	// reached it yet: until it does, the variant is on the node whatever
	// the cache shows ("" once it does, or once a write took it off).
	noExecuteWrittenRV string
	// known is the node as this controller last knew the API server to
	// hold it (knownNode): a write decided on a Node cache that does not
	// show it yet starts from a fresh read.
	known knownNode
	// leaving is what the node's last evaluation read of its leaving
	// signals (leavingFacts), judged again by the blast-radius recount and
	// the escalation at their own instant.
	leaving   leavingFacts
	uid       types.UID
	bootID    string
	firstSeen time.Time
	// createdLive: the controller watched this Node being created, so a
	// release it observed before then was made for an earlier Node of the
	// same name (plannedInThisBoot).
	createdLive bool
	// handled is the boot and the incarnation whose boot record mismatch
	// was already acted on, so a stale record gates only once.
	handled handledChange

	// gated is the controller's decision that the node must carry the
	// taint; gate says since when, why, and what must renew to end it.
	gated bool
	gate  gateSpan
	// readyInBoot is true once the node was ungated (or found ready) in its
	// current boot: only then is a failure a failure rather than bootstrap.
	readyInBoot bool
	// failedOpen holds the extensions whose startup timeout passed with the
	// Ungate policy, each with the renewal it failed open on: they do not
	// gate the node until a later renewal (failOpenEnds).
	failedOpen map[string]failOpenBaseline
	// startupExpired holds extensions whose startup timeout passed with the
	// KeepGated policy and keep the node gated for it. An own-view lift
	// clears it, since the timeout restarts with the gate.
	startupExpired sets.Set[string]
	// startupReported holds the extensions whose missed startup timeout was
	// logged, counted and announced in this boot. The lift does not clear
	// it: a timeout judged again after the gate restarted is the same
	// extension missing the same startup.
	startupReported sets.Set[string]
	// startup is the start-up of the current boot.
	startup startupProgress

	// missing holds when each extension's Lease was first seen missing, so
	// that the failure is timed from then (detection_latency_seconds).
	missing map[string]time.Time
	// escalation is the failure's eviction clock and what the escalation
	// did with it.
	escalation escalationState
	// lifecycleDone is the lifecycle want last brought to the node, written
	// or, in a dry run, counted (nil: none yet): until the want changes the
	// node is not written again, though the informer may not show the write
	// yet (or, in a dry run, ever); and what it wrote counts over the
	// informer's copy of a condition of ours, which may lag (lastWritten).
	lifecycleDone *lifecycleWant
	// exts are the extensions the last evaluation resolved, so that the
	// blast radius can be brought up to date from every node's facts and
	// the current expiry of its Leases (Controller.recountFailing).
	exts []requiredExtension
	// plannedBoot is the bootID in which each planned release was first
	// seen: a planned release gates only in the boot it was made in.
	plannedBoot map[string]string
	// rebootSeen is the instant the controller saw the node's current boot
	// replace another (zero: no reboot seen live): a release observed in
	// that instant belongs to the new boot (plannedInThisBoot).
	rebootSeen time.Time
	// recordedDead are the dead marks of the node's boot record as its last
	// evaluation read them, for the blast-radius recount (failingAt).
	recordedDead map[string]int64

	// last is what the node's last evaluation reported and decided.
	last lastOutcome

	// steadyLeases: the last full evaluation found the node steady
	// (ungated, every extension ready, nothing due but the expiry of these
	// Leases, the ones it read; Controller.recheckTimer). Nil otherwise.
	steadyLeases []types.NamespacedName
}

// escalationState is a failure's way to eviction: its clock, whether the
// rate-limited escalation marked the node, whether a suspension or a pause of
// the failure interrupted its drain (which goes on when the node fails again
// with nothing holding it), and whether the drain found nothing left on the
// node that it may evict (its DrainInProgress becomes Drained).
type escalationState struct {
	clock       evictionClock
	marked      bool
	interrupted bool
	drained     bool
}

// lastOutcome is what a node's last evaluation reported and decided, so that
// Events and condition writes happen on transitions only: each extension's
// readiness, the condition's signature, the invalid list reported (its
// key), whether the node's taint was suppressed (held by a guard), and
// whether the node had gating extensions.
type lastOutcome struct {
	extReady     map[string]bool
	conditionSig string
	// graceNamed are the extensions a condition adopted after a start
	// names expired, which only the start's grace makes look ready: the
	// grace hides an expiry, so the condition stays until one of them
	// renews or changes (conditionOf), and is rewritten then.
	graceNamed []string
	// conditionWritten is this controller's last write of the condition
	// while the Node cache may not show it yet (nil once it does): until
	// then the cache's condition is not what the node holds.
	conditionWritten *writtenCondition
	// conditionUnsure is the last write of the condition when the API
	// server answered it with an error: it may have been applied all the
	// same (a timeout, a lost answer). Until the cache shows what it
	// wrote, or a write succeeds, neither the signature nor the cache says
	// what the node holds, so every evaluation writes the condition (nil
	// once it is known).
	conditionUnsure *unsureCondition
	invalidList     string
	suppressed      bool
	hadGating       bool
}

// unsureCondition is a condition write answered with an error (no
// resourceVersion), and the signature of the evaluation that made it.
type unsureCondition struct {
	sig string
	writtenCondition
}

// noteConditionWrite remembers the condition write (want) of an evaluation
// with signature sig: what it wrote (written; nil in a dry run), or, when
// the API server answered err, that it may have been applied. Callers hold
// the controller's lock.
func (o *lastOutcome) noteConditionWrite(sig string, want writtenCondition, written *writtenCondition, err error) {
	o.conditionUnsure = nil
	if err != nil {
		o.conditionUnsure = &unsureCondition{sig: sig, writtenCondition: want}
		return
	}
	o.conditionSig, o.conditionWritten, o.graceNamed = sig, written, nil
}

// handledChange names a boot of an incarnation of a node.
type handledChange struct {
	boot string
	uid  types.UID
}

// gateSpan is a gate: when the controller observed its cause, the cause,
// and what must renew after start to end it.
type gateSpan struct {
	start time.Time
	cause gateCause
	// causeBeforeExpiry is the cause a startup timeout replaced, put back
	// when the gate begins again at an own-view recovery.
	causeBeforeExpiry gateCause
	// foundGatedInStall: a gate found at start took a failure's cause
	// while the own view was stale. The failure may be the view's fault
	// (a Lease renewing all along, unseen), so the gate is found-gated
	// again when it begins again at the recovery, and takes a failure's
	// cause only from a failure judged on the current view.
	foundGatedInStall bool
	// full: every extension must renew after start to ungate (bootstrap,
	// reboot, re-creation, found gated at start). Otherwise the gate is
	// failed-only: only the extensions in scope must renew.
	full  bool
	scope sets.Set[string]
	// taintWritten: a Node write added this gate's taint, at resourceVersion
	// taintWrittenRV, and the Node cache has not reached that version yet.
	// Until it does, the gate is in force whatever the cache shows: an
	// evaluation on that cache must neither take it for one a guard holds
	// nor, once the taint shows, remove it as a held gate's leftover (seed
	// 1221797598538672297). Past it, the cache speaks: a taint another
	// writer removed is missing like any other (a guard then withholds it).
	taintWritten   bool
	taintWrittenRV string
	// heldFromStart: a guard held the gate's taint from the evaluation that
	// began it (a failure held), so start is when the failure was first
	// held, judged on Leases that showed no renewal: a real renewal
	// observed in that very instant came after it and counts.
	heldFromStart bool
	// judgedAfreshAt is the last instant a held failure's scope was judged
	// afresh (widenFailedOnlyScope): the lift's, once the gate is tainted.
	judgedAfreshAt time.Time
	// planned are the extensions released for maintenance during this
	// gate; while any is not ready again, the node's other failures are
	// planned too (no eviction clock, no blast-radius count).
	planned sets.Set[string]
}

// failOpenBaseline is the last renewal observed when an extension failed
// open; known is false for a fail-open restored from the boot record, whose
// baseline its first evaluation takes. startGrace: that renewal is only the
// instant this controller first saw the Lease (leaseObservation.startGrace).
type failOpenBaseline struct {
	renewal    time.Time
	known      bool
	startGrace bool
	// lease is the Lease the node's list last named for the extension
	// (zero: not listed since the fail-open was restored from the boot
	// record), which a renewal ends the fail-open on while the list does
	// not hold the extension (unlistedFailedOpen).
	lease nodev1alpha1.LeaseReference
}

// renewedSince reports whether a Lease last observed renewed at lastRenewal
// (startGrace: only first seen then) renewed after the baseline. The end of
// the start grace is a renewal even in the very instant the Lease was first
// seen: on a coarse clock, or in the simulation's second, the renewal a
// restarted controller observes right after its list carries the list's
// instant (simulation seed 10772932245992471847).
func (b failOpenBaseline) renewedSince(lastRenewal time.Time, startGrace bool) bool {
	return lastRenewal.After(b.renewal) || (b.startGrace && !startGrace && lastRenewal.Equal(b.renewal))
}

// startupProgress is the start-up of the current boot: cause is the cause of
// the bootstrap or found-at-start gate (kept while the gate's reason moves
// to StartupTimeout or ExtensionsNotReady), start when it was observed (an
// own-view recovery restarts the gate but not this), foundAtStart whether it
// was found in the initial view. firstReady holds each gating extension's
// first ready renewal observed after the gate's start: at most one entry per
// listed extension, dropped at the ungate. timeline is what that ungate
// built, kept for the boot so that a retried write carries it.
type startupProgress struct {
	cause        gateCause
	start        time.Time
	foundAtStart bool
	firstReady   map[string]time.Time
	timeline     *nodev1alpha1.StartupTimeline
}

// evictionClock is the elapsed time of a failure, not counting suspensions.
type evictionClock struct {
	elapsed      time.Duration
	runningSince time.Time
}

func newNodeState(now time.Time) *nodeState {
	return &nodeState{firstSeen: now, last: lastOutcome{extReady: map[string]bool{}}}
}

// A state keeps no empty set or map but the start-up's firstReady (where nil
// says no start-up is being timed): sets and maps are made on first use
// (insert), so that cloning a state for an evaluation allocates only what
// the node uses.

// insert adds v to *set, making the set on first use.
func insert(set *sets.Set[string], v string) {
	if *set == nil {
		*set = sets.New[string]()
	}
	set.Insert(v)
}

// cloneSet copies a set an evaluation may change; nil when empty.
func cloneSet(s sets.Set[string]) sets.Set[string] {
	if len(s) == 0 {
		return nil
	}
	return s.Clone()
}

// cloneMap copies a map an evaluation may change; nil when empty.
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// clone returns a copy of the state that shares nothing an evaluation
// changes in place: the evaluation works on the copy (evaluate).
func (s *nodeState) clone() *nodeState {
	n := *s
	n.gate.scope = cloneSet(s.gate.scope)
	n.gate.planned = cloneSet(s.gate.planned)
	n.failedOpen = cloneMap(s.failedOpen)
	n.startupExpired = cloneSet(s.startupExpired)
	n.startupReported = cloneSet(s.startupReported)
	n.startup.firstReady = maps.Clone(s.startup.firstReady)
	n.plannedBoot = cloneMap(s.plannedBoot)
	return &n
}

// beginGate starts a gate for cause at now.
func (s *nodeState) beginGate(cause gateCause, now time.Time) {
	s.gated = true
	// Bootstrap and found-at-start gates are full; a reboot or a
	// re-creation during any gate restarts it as full.
	full := cause.bootstrap() || cause == causeFoundGated
	s.gate = gateSpan{start: now, cause: cause, full: full, planned: s.gate.planned, causeBeforeExpiry: s.gate.causeBeforeExpiry}
	if full {
		s.startup = startupProgress{cause: cause, start: now, firstReady: map[string]time.Time{}}
	}
	if cause.bootstrap() {
		s.gate.planned = nil
		s.readyInBoot = false
		s.failedOpen = nil
		s.startupExpired = nil
		s.startupReported = nil
		s.resetEscalation()
	}
}

// failOpen stops ext from gating the node until the controller observes a
// renewal newer than lastRenewal, the last one it had observed when the
// startup timeout passed (zero: none; startGrace: only its start grace).
func (s *nodeState) failOpen(ext string, lastRenewal time.Time, startGrace bool) {
	if s.failedOpen == nil {
		s.failedOpen = map[string]failOpenBaseline{}
	}
	s.failedOpen[ext] = failOpenBaseline{renewal: lastRenewal, known: true, startGrace: startGrace, lease: s.failedOpen[ext].lease}
}

// failOpenEnds reports whether ext's fail-open ends, and ends it if so: the
// extension is ready on a renewal observed after the one it failed open on.
// A Lease still within its duration from before (the previous boot's) is
// the one the startup timeout found wanting; taking it for the extension
// coming up ungated the node and then tainted it as failing when that Lease
// expired. A fail-open restored from the boot record takes the renewal
// observed at its first evaluation as the one it failed open on.
func (s *nodeState) failOpenEnds(ext string, lastRenewal time.Time, startGrace, ready bool) bool {
	base, failed := s.failedOpen[ext]
	if !failed {
		return false
	}
	if !base.known {
		s.failOpen(ext, lastRenewal, startGrace)
		return false
	}
	if !ready || !base.renewedSince(lastRenewal, startGrace) {
		return false
	}
	delete(s.failedOpen, ext)
	return true
}

// unlistedFailedOpen returns the extensions that failed open in the node's
// boot, kept or named in its boot record of this boot, that the list exts
// does not hold (a label or a rule took them off the node), each with the
// Lease the list last named for it, or the Lease its name gives it on the
// node. Their renewals end their fail-opens all the same
// (evaluation.endUnlistedFailOpens).
func (s *nodeState) unlistedFailedOpen(f nodeFacts, exts []requiredExtension, namespace string) []requiredExtension {
	recorded := f.hasRecord && f.record.sameBoot(f.uid, f.bootID) && len(f.record.FailedOpen) <= maxFailedOpen
	if len(s.failedOpen) == 0 && (!recorded || len(f.record.FailedOpen) == 0) {
		// Every evaluation asks, and almost no node has failed open:
		// no set to build.
		return nil
	}
	names := sets.KeySet(s.failedOpen)
	if recorded {
		names.Insert(f.record.FailedOpen...)
	}
	for _, ext := range exts {
		names.Delete(ext.name)
	}
	if names.Len() == 0 {
		return nil
	}
	out := make([]requiredExtension, 0, names.Len())
	for _, name := range sets.List(names) {
		lease := s.failedOpen[name].lease
		if lease.Name == "" {
			lease = (&nodev1alpha1.SystemExtension{Name: name}).LeaseFor(f.name, namespace)
		}
		out = append(out, requiredExtension{name: name, lease: lease, affects: true})
	}
	return out
}

// hasFailedOpen reports whether ext failed open and has not renewed since.
func (s *nodeState) hasFailedOpen(ext string) bool {
	_, ok := s.failedOpen[ext]
	return ok
}

// failedOpenNames lists the extensions that failed open, in name order.
func (s *nodeState) failedOpenNames() []string {
	return slices.Sorted(maps.Keys(s.failedOpen))
}

// ranOut reports whether the clock has counted timeout by now, without
// moving it.
func (c evictionClock) ranOut(now time.Time, timeout time.Duration) bool {
	elapsed := c.elapsed
	if !c.runningSince.IsZero() {
		elapsed += now.Sub(c.runningSince)
	}
	return elapsed >= timeout
}

// started reports whether the clock counted anything since its last reset.
// A node's own clock, not its blast-radius count, says whether it was
// failing: another node's recount may already count it as not failing
// before its own evaluation (seed 15839658414113777250).
func (c evictionClock) started() bool {
	return c.elapsed > 0 || !c.runningSince.IsZero()
}

// advance moves the clock to now, paused or running, and reports how long
// the node has been failing, not counting time while escalation was
// suspended.
func (c *evictionClock) advance(now time.Time, suspended bool) time.Duration {
	running := !c.runningSince.IsZero()
	switch {
	case suspended && running:
		c.elapsed += now.Sub(c.runningSince)
		c.runningSince = time.Time{}
	case !suspended && !running:
		c.runningSince = now
	}
	if c.runningSince.IsZero() {
		return c.elapsed
	}
	return c.elapsed + now.Sub(c.runningSince)
}

func (s *nodeState) ungate() {
	s.startup.cause, s.startup.firstReady = causeNone, nil
	s.gated = false
	// The start and the cause a startup timeout replaced stay: nothing
	// reads them before the next gate sets them again.
	s.gate = gateSpan{start: s.gate.start, causeBeforeExpiry: s.gate.causeBeforeExpiry}
	s.readyInBoot = true
	s.resetEscalation()
	s.noExecuteOwed = true
}

func (s *nodeState) resetEscalation() {
	s.escalation = escalationState{}
}
