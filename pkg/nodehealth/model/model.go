// Package model is a small, slow, deliberately obvious reference model of the
// node-health controller's readiness semantics (docs/controller.md "Readiness semantics
// (the controller)"). It was written from the design text and the user docs
// only, never from the controller's code, so that a deterministic simulator
// can run it beside the real controller and require the same observable
// state after every step.
//
// The model is driven by inputs at instants of the controller's clock (Start,
// Node and Lease events, own-view changes, Advance). After every input it
// evaluates every node at that instant: first the blast-radius counts are
// brought up to date over all nodes, then each node is judged by the rules in
// rules.go. It keeps two kinds of state per node: what the controller wrote
// on the Node object (taint, condition, boot record), which survives a
// restart, and the controller's memory (gate, gateStart, scope, eviction
// clock, fail-opens), which Start wipes.
//
// Every decision the design text (docs/controller.md) leaves open is marked in the code with a comment that
// starts "Choice:".
package model

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Config is the controller configuration the model runs with.
type Config struct {
	RenewalGrace         time.Duration // added to a Lease's duration before it expires
	RegistrationGrace    time.Duration // how long a creation-time taint may stay on a node listing no gating extension
	MinimumLeaseDuration time.Duration // shorter Leases count as this long
	EvictionTimeout      time.Duration // eviction clock limit; <0 never escalates
	// EvictionMode is what an escalation does (docs/controller.md,
	// "Escalation"): EvictionModeEvict ("" too) evicts the node's pods,
	// EvictionModeNoExecute adds the NoExecute variant of the readiness
	// taint, EvictionModeNone never escalates.
	EvictionMode string
	// EscalationsPerSecond spaces the escalations cluster-wide, a token
	// bucket of burst 1 (eviction.nodesPerSecond); 0 spaces them not at all.
	EscalationsPerSecond float64
	ClusterThreshold     float64 // blast radius share (0..1), 0 = off
	ZoneThreshold        float64
	MaintenanceReasons   []string      // release reasons that make a release planned (default "Updating")
	CanaryInterval       time.Duration // own view goes stale 3 intervals after the last canary renewal observed (CheckView)
	// LeavingNodeTaints are the taint keys that make a node leaving;
	// LifecycleConditionMaxAge how long a foreign lifecycle condition on a
	// schedulable node does (rules.go, leaving).
	LeavingNodeTaints        []string
	LifecycleConditionMaxAge time.Duration
}

// The eviction modes (Config.EvictionMode).
const (
	EvictionModeEvict     = "Evict"
	EvictionModeNoExecute = "NoExecute"
	EvictionModeNone      = "None"
)

// Extension is one entry of a node's resolved required list.
type Extension struct {
	Name             string
	AffectsReadiness bool
	StartupTimeout   time.Duration // 0 = none
	FailOpen         bool          // failurePolicy Ungate (false = KeepGated)
}

// Node is what the controller reads of a Node object (besides what it wrote
// itself).
type Node struct {
	Name, UID, BootID, Zone string
	// Labels are every label of the Node: a change of any of them is a
	// change of what decides the controller's writes (decidesWritesChanged).
	Labels            map[string]string
	Extensions        []Extension // the resolved list (rules + manual + self-registered)
	Excluded          bool        // label nodehealth.io/exclude=true
	TaintedAtCreation bool        // created with the readiness taint already on
	Taints            []string    // the keys of the Node's other taints
	Deleting          bool        // metadata.deletionTimestamp is set
	Unschedulable     bool        // spec.unschedulable
	// LifecycleConditions are the Node's KEP-5683 lifecycle conditions
	// (whoever wrote them).
	LifecycleConditions []LifecycleCondition
}

// LifecycleCondition is one KEP-5683 lifecycle condition of a Node.
type LifecycleCondition struct {
	Type, Status, Reason string
	LastTransitionTime   time.Time
}

// NodeView is the observable state of one node.
type NodeView struct {
	// Tainted: the readiness taint is on the Node.
	Tainted bool
	// ConditionStatus is "True", "False", "Unknown", or "" when no
	// SystemExtensionsReady condition was ever written.
	ConditionStatus string
	// ConditionReason is one of the reasons of nodev1alpha1 (vocabulary.go).
	ConditionReason string
	// Evicted: escalation issued evictions for the node's pods at an
	// evaluation where the node was failing, its pause-aware eviction clock
	// had reached EvictionTimeout and neither guard suspended it, and the
	// failure has not ended since. The failure ends, and Evicted becomes false,
	// at the first evaluation that leaves the node neither tainted nor held
	// (ungated, recovered while held, excluded), or when the node is
	// re-created (another Node object).
	// Choice: it survives reboots and controller restarts: the pods are gone
	// whatever the controller remembers.
	// Only mode Evict evicts: an escalation in the other modes leaves it
	// as it was, and a configuration change to them does not clear it.
	Evicted bool
	// NoExecute: the readiness taint's NoExecute variant is on the Node
	// (mode NoExecute). It is added when the node is escalated, stays while
	// the node is tainted, whatever guard fires or pause of the failure
	// comes meanwhile, and goes with the taint (the ungate) or when the
	// node starts leaving.
	NoExecute bool
	// BootRecord is what the nodehealth.io/boot record holds: "bootID/uid",
	// followed by ";a,b" (sorted) when extensions failed open in this boot;
	// "" when no record was written.
	BootRecord string
}

// Model is the reference model. The zero value is not usable; call New.
type Model struct {
	cfg         Config
	maintenance map[string]bool

	running bool      // between Start and Stop
	now     time.Time // the last input's instant
	epochs  int       // source of boot epochs
	// worldAt is the last instant WorldWrites marked: from it on, an
	// evaluation in that instant comes after every write the world made
	// in it (writeBootRecord).
	worldAt time.Time
	// together is set while Together runs its observations; owed, that
	// one of them asked for the evaluation Together makes after the last;
	// landed, the nodes whose writes one of them said were taken
	// (WriteLanded), which count from that evaluation on.
	together, owed bool
	landed         []string

	nodes  map[string]*node
	leases map[leaseKey]*lease

	ownViewStale bool
	// staleSince is when the own-view guard last fired; writesBackAt when
	// the API server last took the controller's writes again after
	// refusing them (RetryMetTheGuard).
	staleSince, writesBackAt time.Time
	// canaryObserved is when the running instance last observed a new
	// renewal of its canary (or started), canaryRenewal that renewal's
	// renewTime (µs; 0 when this instance has observed none): CheckView
	// judges the own view from them.
	canaryObserved time.Time
	canaryRenewal  int64
	// horizon is how far the running instance's view vouches for the
	// world: the latest renewTime of a new canary renewal it observed, or
	// its start. A Lease's expiry counts once both the clock and the
	// horizon are past it (leaseReady; docs/controller.md, "Own view").
	horizon time.Time
	// horizonLag holds, for each node whose next sync sees the horizon's
	// latest moves only together with a later observation of its own, the
	// horizon it is judged on until then (HorizonReachesLater).
	horizonLag map[string]time.Time
	// viewCheck is when the running instance's canary loop checks its
	// view next (NextViewCheck).
	viewCheck        time.Time
	writesRefused    bool // the API server refuses the controller's Node writes
	clusterSuspended bool
	zoneSuspended    map[string]bool
	// nextTurn is the earliest instant the next escalation may have
	// (EscalationsPerSecond): the controller's memory, which Start wipes.
	nextTurn time.Time
}

type leaseKey struct{ node, ext string }

// lease is one extension Lease as the controller sees it.
type lease struct {
	held     bool          // holderIdentity non-empty
	duration time.Duration // leaseDurationSeconds
	// observed is the instant the Lease counts as last observed (renewal,
	// start); expiry is measured from it, or from graceFrom when later. observedSet is
	// false while the running controller has never counted it observed.
	observed    time.Time
	observedSet bool
	// reason is the nodehealth.io/reason of a release, releaseEpoch the
	// boot of the node the release was made in: the boot it was first seen
	// in, or, when it was first seen with a reason that is not for
	// maintenance, the boot it was first seen with one that is (asked
	// says whether it has been since the last renewal).
	reason       string
	releaseEpoch int
	asked        bool
	// releasedAt is the instant the release was observed (its first
	// since the last renewal).
	releasedAt   time.Time
	readyAtStale bool // ready when the own view went stale
	// renewTime is the Lease's own renewTime, an opaque token that changes
	// with every renewal the extension makes, seen or not; a dead mark
	// names the token it was made at.
	renewTime int64
	// startGrace: observed is the grace of the last Start, not a renewal.
	startGrace bool
	// graceFrom is when an own-view recovery gave the Lease a full duration
	// of grace: it moves the expiry, never observed, so a gate that began
	// before the recovery (a failure held in the stale view, gated at the
	// lift from when it was first held) does not take the grace for a
	// renewal (seed 12668779848439133758; the controller's
	// leaseObservation.graceFrom).
	graceFrom time.Time
}

// node is one Node: its facts, what the controller wrote on it, and the
// controller's memory of it.
type node struct {
	Node
	epoch int // the node's current boot, as the model numbers boots
	// firstEpoch is the first boot of this Node object: a release of an
	// earlier epoch was made for a deleted Node of the name.
	firstEpoch int
	// seenSince is when the running controller first saw the node (its
	// start, the Node's creation, or the end of its exclusion).
	seenSince time.Time

	// Written on the Node object: survives restarts.
	tainted                bool
	condStatus, condReason string
	// condNotReady: the extensions the condition names as not ready
	// (sorted; the gating ones, while the node is gated or held).
	condNotReady []string
	// condInfo: the extensions the condition names as not ready but not
	// affecting readiness (sorted): those the node lists that do not gate
	// (affectsReadiness false, or failed open), whatever the status.
	condInfo []string
	// removalRefused: the node was ungated while the API server refused
	// the controller's writes, so its taint, off in the model, is still on
	// the Node until they are taken again: a gate decided meanwhile finds
	// it there and needs no write (placeTaint).
	removalRefused bool
	// condWritten: a SystemExtensionsReady condition of the controller's
	// is on the Node, written by an evaluation while the API server took
	// its writes (the one decided while it refuses them may not be).
	condWritten bool
	record      *bootRecord
	// writtenAt is the instant of the first evaluation after the world's
	// writes of that instant (WorldWrites), and beforeWrites what the
	// Node held until then, or until the API server last took the
	// controller's write of it in that instant (WriteLanded): NodeUpdated
	// takes back what the evaluations since wrote when the update changes
	// what decides the controller's writes, WriteRetried when the API
	// server refused the write (takeBackRefusedWrites).
	writtenAt    time.Time
	beforeWrites nodeWrites
	// evicted: escalated for the current failure (NodeView.Evicted in mode
	// Evict); noExecute: NodeView.NoExecute.
	evicted   bool
	noExecute bool

	// The controller's memory: wiped by Start.
	inService  bool            // ungated (or found in service) in its current boot
	gate       *gate           // nil: not gated
	failedOpen map[string]bool // startup timeouts with Ungate, this boot
	regSince   time.Time       // start of the registration grace
	clock      evictionClock
	held       bool // result of the last evaluation
	// heldSince is when the node was first held for its current failure:
	// the cause of the failure gate it gets when the guard lifts.
	heldSince time.Time
	// turn is the node's turn of the cluster-wide escalation rate (zero:
	// none taken): kept until its instant whatever the node does meanwhile,
	// then spent, escalating the node if it is due then.
	turn time.Time
	// tie is what SwapTiedTurns needs of the node's last turn.
	tie turnTie
	// resumedAt is when a guard's lift last gave the node's held failure
	// its gate (HoldAgainAtResume).
	resumedAt time.Time
	// endedInStale is the node as it was before the model ended, in the
	// stale view, a gate whose taint it took as written when the writes
	// came back, before the guard fired: the controller's retry of that
	// taint may have met the guard, and its gate be pending
	// (RetryMetTheGuard). Nil otherwise; gone at the recovery.
	endedInStale *node
}

// snapshot copies the node deep enough to be put back as it was.
func (n *node) snapshot() *node {
	c := *n
	c.endedInStale = nil
	c.condNotReady, c.condInfo = slices.Clone(n.condNotReady), slices.Clone(n.condInfo)
	c.failedOpen = maps.Clone(n.failedOpen)
	if n.gate != nil {
		g := *n.gate
		g.scope = maps.Clone(n.gate.scope)
		c.gate = &g
	}
	if n.record != nil {
		r := *n.record
		c.record = &r
	}
	return &c
}

// turnTie is a node's last turn of the escalation rate as SwapTiedTurns
// trades it: the instant the node came due and took it, the instant the turn
// escalated it (zero: not yet, or never), and what the node's evicted and
// noExecute were before that escalation.
type turnTie struct {
	due, escalatedAt   time.Time
	evicted, noExecute bool
}

// gate is a gate the controller keeps on a node (tainted, or pending while
// the own-view guard holds).
type gate struct {
	cause   string    // NodeRegistered, NodeRebooted, NodeRecreated, ControllerStarted or ExtensionsNotReady
	full    bool      // full scope: every gating extension must renew after start
	start   time.Time // gateStart
	scope   map[string]bool
	reason  string // the last not-ready reason, for ControllerStarted and failure gates
	pending bool   // the own-view guard kept its taint off
	// failedInStall: a gate found at start first failed (reason no longer
	// ControllerStarted) while the own view was stale; the recovery gives
	// it its ControllerStarted back (ownViewRecovers).
	failedInStall bool
	// heldFromStart: the gate began when the node's failure was first held
	// (start = that instant, openFailureGate). A guard held the failure,
	// so the failure was judged on Leases that did not show a renewal: a
	// renewal observed in that very instant came after it.
	heldFromStart bool
	// taintedAt is when the model took the gate's taint as written.
	taintedAt time.Time
}

// evictionClock is the pause-aware eviction clock of one node.
type evictionClock struct {
	running  bool
	counted  time.Duration
	last     time.Time
	counting bool // the time from last to the next evaluation counts
	// escalated: the node was escalated in this run of the clock (its
	// turn of the rate came); a drain cut by a suspension goes on without
	// another turn.
	escalated bool
}

// bootRecord is the nodehealth.io/boot annotation. pending: written while
// the node was still gated in this boot, only to keep its fail-opens; it
// does not say the boot was ready.
type bootRecord struct {
	bootID, uid, failedOpen string
	pending                 bool
	// dead: the extensions judged expired on the node in service, each as
	// "name@renewals", sorted and comma-separated (docs/controller.md, "A
	// restart does not resurrect a dead extension").
	dead string
}

func (r *bootRecord) get() bootRecord {
	if r == nil {
		return bootRecord{}
	}
	return *r
}

// String is the record as the model's tests compare it; the dead marks are
// left out (markedDead reads them).
func (r *bootRecord) String() string {
	if r == nil {
		return ""
	}
	s := r.bootID + "/" + r.uid
	if r.failedOpen != "" {
		s += ";" + r.failedOpen
	}
	if r.pending {
		s += " (pending)"
	}
	return s
}

// markedDead: the node's record of its current incarnation marks the
// extension dead at the Lease's current renewal.
func (r *bootRecord) markedDead(uid, ext string, renewTime int64) bool {
	rec := r.get()
	if rec.uid != uid || rec.dead == "" {
		return false
	}
	return slices.Contains(strings.Split(rec.dead, ","), fmt.Sprintf("%s@%d", ext, renewTime))
}

// New returns a model of a controller that has not started yet.
func New(cfg Config) *Model {
	m := &Model{
		nodes:         map[string]*node{},
		leases:        map[leaseKey]*lease{},
		zoneSuspended: map[string]bool{},
	}
	m.Configure(cfg)
	return m
}

// Configure gives a stopped model the configuration its next Start runs
// with: a valid configuration change restarts the controller's control loop
// with the new options (docs/controller.md, "Changing the configuration").
// The rules' part of it (each node's extensions, their startup timeouts and
// failure policies) comes with the Nodes the new instance lists.
//
// Choice: nothing of the old configuration outlives the restart. What
// depends on it lives in the controller's memory, which Start wipes (gates,
// startup timeouts, eviction clocks, suspensions, the rate's turn), or is
// written on the Node and judged afresh by the new rules (the taint, the
// boot record's fail-opens, Evicted).
func (m *Model) Configure(cfg Config) {
	if m.running {
		panic("model: Configure while the controller runs; a configuration change is a restart (Stop, Configure, Start)")
	}
	reasons := cfg.MaintenanceReasons
	if len(reasons) == 0 {
		// As the configuration reference says: an empty list means the default.
		reasons = []string{nodev1alpha1.ReasonUpdating}
	}
	m.cfg = cfg
	m.maintenance = map[string]bool{}
	for _, r := range reasons {
		m.maintenance[r] = true
	}
}

// step moves the model's clock to an input's instant.
func (m *Model) step(at time.Time) {
	if at.Before(m.now) {
		panic(fmt.Sprintf("model: input at %v is before the previous one at %v", at, m.now))
	}
	m.now = at
}

// Now is the instant of the last input.
func (m *Model) Now() time.Time { return m.now }

func (m *Model) newEpoch() int { m.epochs++; return m.epochs }

// Start models the controller (re)starting or a new leader taking over: its
// memory is gone; what it wrote on Nodes stays; every Lease it can list
// counts as observed at `at`; every node is found at start.
func (m *Model) Start(at time.Time) {
	m.step(at)
	m.running = true
	m.resetGuards()
	// The view starts trusted: a full set of canary intervals from now.
	// The loop checks at once.
	m.canaryObserved, m.viewCheck = at, at
	// Its list is as of its start: the view vouches for everything up to
	// then.
	m.horizon, m.horizonLag = at, nil
	// A new instance's rate limit has its token.
	m.nextTurn = time.Time{}
	for _, l := range m.leases {
		l.readyAtStale = false
		// A new instance knows the reason a release has now, not the
		// ones it had before.
		l.asked = !l.held && m.maintenance[l.reason]
		if l.held {
			// Choice: a Lease the node's record marks dead at its current
			// renewal gets the grace too, and leaseReady withholds it.
			l.observed, l.observedSet, l.startGrace = at, true, true
		}
	}
	for _, n := range m.sortedNodes() {
		m.findNode(n, at)
	}
	m.evaluate(at)
}

// Stop models the controller stopping (crash, lost leadership).
//
// Choice: Stop is an addition to the driver's interface: until the next Start, inputs change
// the world (Nodes, Leases, time) but nothing is observed or evaluated, so
// that changes made while the controller is down reach it only through what
// it finds at Start (the boot record, the Leases it lists). Before the first
// Start the model is stopped.
func (m *Model) Stop(at time.Time) {
	m.step(at)
	m.running = false
	m.resetGuards()
	// The next instance has observed no renewal of the canary yet.
	m.canaryRenewal = 0
	for _, n := range m.nodes {
		n.held = false
	}
}

// resetGuards: a controller that starts or stops remembers no suspension.
func (m *Model) resetGuards() {
	m.ownViewStale, m.clusterSuspended = false, false
	m.zoneSuspended = map[string]bool{}
}

// NodeAdded: a Node created while the controller runs (a new node), or,
// while it is stopped (before the first Start), a node that exists.
func (m *Model) NodeAdded(at time.Time, n Node) {
	m.step(at)
	m.addNode(at, n)
	m.evaluateIfRunning(at)
}

func (m *Model) addNode(at time.Time, in Node) {
	// Choice: adding a name that exists replaces that node (a new object).
	n := &node{Node: copyNode(in), epoch: m.newEpoch(), tainted: in.TaintedAtCreation}
	n.firstEpoch = n.epoch
	m.nodes[in.Name] = n
	if !m.running {
		return
	}
	n.forget(at)
	if !in.Excluded {
		m.beginBootstrapGate(n, at, nodev1alpha1.ReasonNodeRegistered)
	}
	// Choice: a release observed in the very instant a new Node of its
	// name is first seen belongs to that Node, whichever came first: the
	// controller compares instants of its clock and cannot tell (seed
	// 17933979627001458813: the updater's release for an update, made on
	// the Node replaced in that second, held the new one until the
	// updater renewed; the model, which took it for the old Node's,
	// ungated it). One observed earlier was made for an earlier Node.
	m.adoptReleasesOfTheInstant(n, at)
}

// adoptReleasesOfTheInstant gives the node's current boot every release
// observed at instant at, the instant its boot (or the Node) is first seen.
func (m *Model) adoptReleasesOfTheInstant(n *node, at time.Time) {
	for k, l := range m.leases {
		if k.node == n.Name && !l.held && l.releasedAt.Equal(at) {
			l.releaseEpoch = n.epoch
		}
	}
}

// NodeUpdated: labels, list, bootID, UID... changed. A bootID change is a
// reboot, a different UID under the same name a re-creation.
func (m *Model) NodeUpdated(at time.Time, in Node) {
	m.step(at)
	n := m.nodes[in.Name]
	if n == nil {
		// Choice: an update of a node the model never saw is an addition.
		m.addNode(at, in)
		m.evaluateIfRunning(at)
		return
	}
	old := n.Node
	n.Node = copyNode(in)
	if n.writtenAt.Equal(at) && decidesWritesChanged(old, in) {
		n.takeBackRefusedWrites()
	}
	if old.UID != "" && in.UID != old.UID {
		// Choice: another UID is another Node object, created afresh by
		// whoever replaced the machine: nothing the controller wrote on the
		// old object (taint, condition, boot record) is on it, so a
		// controller that starts later finds it as it was created (seed
		// 2542155146350896882: the model took the old object's record for
		// the new one's and expected NodeRecreated from a new instance).
		n.record = nil
		n.tainted = in.TaintedAtCreation
		// Nor is a condition of the controller's.
		n.condWritten = false
		// The pods of the old Node object are not this node's.
		n.evicted, n.noExecute = false, false
	}
	if !m.running {
		return
	}
	switch {
	case in.Excluded:
		// Left alone; the evaluation removes the taint.
	case old.Excluded:
		// Choice (docs/controller.md): removing the label makes the node a
		// node found at start again.
		m.findNode(n, at)
	case recreated(old.UID, in.UID, n.record):
		m.beginBootstrapGate(n, at, nodev1alpha1.ReasonNodeRecreated)
	case rebooted(old.BootID, in.BootID, n.record):
		m.beginBootstrapGate(n, at, nodev1alpha1.ReasonNodeRebooted)
		if old.BootID != "" && at.After(n.seenSince) {
			// Choice: a release observed in the very instant a reboot is
			// seen belongs to the new boot, as for a new Node (addNode),
			// whichever came first (seed 14456852777927726137: the
			// updater's release for an update and the reboot it made were
			// seen together after a watch outage; the controller held the
			// new boot for the release until the updater renewed). Not in
			// the instant the node is found (a start): what is found then
			// is judged by the boot record (findNode).
			m.adoptReleasesOfTheInstant(n, at)
		}
	default:
		m.noteAddedExtensions(n, old)
	}
	m.evaluate(at)
}

// ReadinessTaintRemoved: someone else took every taint of the readiness
// taint's key off the Node (kubectl taint nodes NODE KEY-). The key is the
// controller's: a gate in force puts its taint back at once, unless a guard
// holds the addition; a failure gate held so is held like a new failure
// (docs/controller.md, "Other writers").
//
// Choice: a taint someone else adds is not an input: the controller removes
// a taint it did not decide in the evaluation that sees it, so what the
// model holds (the taint the controller decided) does not change.
func (m *Model) ReadinessTaintRemoved(at time.Time, name string) {
	m.step(at)
	n := m.nodes[name]
	if n == nil {
		return
	}
	n.tainted, n.noExecute, n.removalRefused = false, false, false
	m.evaluateIfRunning(at)
}

// NodeDeleted: the Node is gone, and everything written on it.
func (m *Model) NodeDeleted(at time.Time, name string) {
	m.step(at)
	// Choice: the node's Leases are not deleted with it here; the driver
	// reports their deletion (garbage collection) as LeaseDeleted.
	delete(m.nodes, name)
	m.evaluateIfRunning(at)
}

func (m *Model) lease(node, ext string) (*lease, bool) {
	k := leaseKey{node, ext}
	l, ok := m.leases[k]
	if !ok {
		l = &lease{}
		m.leases[k] = l
	}
	return l, ok
}

// LeaseRenewed: the controller observed a renewal (holder non-empty,
// renewTime changed) at `at`; the extension renewed at that instant.
func (m *Model) LeaseRenewed(at time.Time, node, ext string, duration time.Duration) {
	m.LeaseRenewedAt(at, node, ext, duration, at)
}

// LeaseRenewedAt is LeaseRenewed with the Lease's own renewTime, which a
// dead mark of the boot record names (a driver that replays a Lease it
// lists passes the renewTime it carries).
func (m *Model) LeaseRenewedAt(at time.Time, node, ext string, duration time.Duration, renewTime time.Time) {
	m.step(at)
	l, _ := m.lease(node, ext)
	if duration <= 0 {
		// Choice: a Lease without leaseDurationSeconds lasts the default.
		duration = nodev1alpha1.DefaultLeaseDuration
	}
	l.held, l.duration, l.reason = true, duration, ""
	l.renewTime = renewTime.UnixMicro()
	if !m.running {
		return // seen at the next Start, not observed now
	}
	l.observed, l.observedSet, l.startGrace = at, true, false
	if n := m.nodes[node]; n != nil {
		// A fail-open lasts until the extension renews: a renewal observed
		// after it failed open, also while the node does not list the
		// extension, never a Lease still valid from before (the one the
		// startup timeout found wanting), nor the grace a start or an
		// own-view recovery gives every Lease.
		delete(n.failedOpen, ext)
	}
	m.evaluate(at)
}

// LeaseReleased: the controller observed a release (holder emptied) with the
// given nodehealth.io/reason.
func (m *Model) LeaseReleased(at time.Time, node, ext, reason string) {
	m.step(at)
	l, existed := m.lease(node, ext)
	n := m.nodes[node]
	switch {
	case l.held || !existed:
		l.releaseEpoch, l.asked, l.releasedAt = -1, false, at
		if n != nil {
			l.releaseEpoch = n.epoch
		}
	case !l.asked && m.maintenance[reason] && n != nil && l.releaseEpoch >= n.firstEpoch:
		// A released Lease whose reason turns to one for maintenance asks
		// for maintenance now (its renewal and new release in between went
		// unseen): the request belongs to the boot the node is in. A
		// release made for a deleted Node of the name stays that Node's.
		l.releaseEpoch = n.epoch
	}
	// Choice: a second release without a renewal in between updates the
	// reason but keeps the boot its first request for maintenance was made
	// in.
	l.held, l.reason = false, reason
	l.asked = l.asked || m.maintenance[reason]
	m.evaluateIfRunning(at)
}

// LeaseDeleted: the Lease is gone (missing: not ready).
func (m *Model) LeaseDeleted(at time.Time, node, ext string) {
	m.step(at)
	delete(m.leases, leaseKey{node, ext})
	m.evaluateIfRunning(at)
}

// canaryStaleAfter is how many canary intervals may pass without a new
// renewal of the canary observed before the own view is stale
// (docs/controller.md, "Own view").
const canaryStaleAfter = 3

// CanaryRenewed: the controller observed its canary Lease renewed by its
// own identity, with renewTime. Only a renewal this instance has not
// observed before proves its view current: a relist replays the one it has.
// Observed while no instance runs (the next one's list), it is that
// instance's first.
func (m *Model) CanaryRenewed(at, renewTime time.Time) {
	m.step(at)
	if rt := renewTime.UnixMicro(); rt != m.canaryRenewal {
		m.canaryRenewal, m.canaryObserved = rt, at
		if m.running && renewTime.After(m.horizon) {
			// Expiries up to the new horizon count from now on.
			m.horizon = renewTime
			m.evaluate(at)
		}
	}
}

// HorizonReachesLater names a node that the next move of the view's horizon
// (CanaryRenewed) reaches only with a later observation of the node's own:
// the controller queues the nodes the move concerns, and when an event of
// the node is delivered before its sync begins, that sync takes the move
// and the event together. Judged on the moved horizon at once, a node whose
// expiry came due exactly then was gated, and its renewal in the next
// delivery of the instant could not end the gate; the controller's sync
// saw both and never gated it (seed 17374736721536902828). So does another
// node's change delivered before the sync: a zone's node that starts
// leaving lowers the count the failure is judged on (seed
// 775137847053701018). Until HorizonReaches, the node is judged on the
// horizon it has now, except in the blast radius's count. The driver says
// which nodes these are; the model never guesses it.
func (m *Model) HorizonReachesLater(node string) {
	if _, ok := m.horizonLag[node]; ok {
		return // the earlier move has not reached it either
	}
	if m.horizonLag == nil {
		m.horizonLag = map[string]time.Time{}
	}
	m.horizonLag[node] = m.horizon
}

// HorizonReaches: the node's sync that takes the horizon's moves begins
// now, after what was delivered before it; from now on the node is judged
// on the horizon every other node is.
func (m *Model) HorizonReaches(at time.Time, node string) {
	m.step(at)
	delete(m.horizonLag, node)
	m.evaluateIfRunning(at)
}

// horizonOf is the horizon the node is judged on: its own until its sync
// takes the latest move. The blast radius's count judges every node on the
// latest (updateBlastRadius).
func (m *Model) horizonOf(node string) time.Time {
	if h, ok := m.horizonLag[node]; ok {
		return h
	}
	return m.horizon
}

// NextViewCheck is when the canary's loop checks the own view next (the
// zero time while no instance runs): at the instance's start, then a canary
// interval after each check, or a millisecond after the view would turn
// stale if that is sooner (docs/controller.md, "Own view"). So a stale view
// is current again at the first check after a new renewal was observed, up
// to an interval later, not at the renewal's event. A driver whose clock
// fires timers at whole ticks calls CheckView at the first tick at or after
// it.
func (m *Model) NextViewCheck() time.Time {
	if !m.running {
		return time.Time{}
	}
	return m.viewCheck
}

// ViewStale reports whether the own view is stale as the last check left it.
func (m *Model) ViewStale() bool { return m.running && m.ownViewStale }

// CheckView is the canary's check at `at`: the own view is stale once no
// new renewal of the canary was observed (nor the instance started) for
// more than canaryStaleAfter canary intervals, and current again once one
// is. A change is taken as OwnView takes it. It reports whether the view is
// stale (false while no instance runs), and sets the next check.
func (m *Model) CheckView(at time.Time) (stale bool) {
	m.step(at)
	if !m.running {
		return false
	}
	stale = at.Sub(m.canaryObserved) > canaryStaleAfter*m.cfg.CanaryInterval
	m.viewCheck = at.Add(m.cfg.CanaryInterval)
	if staleAt := m.canaryObserved.Add(canaryStaleAfter*m.cfg.CanaryInterval + time.Millisecond); !stale && staleAt.Before(m.viewCheck) {
		m.viewCheck = staleAt
	}
	if stale != m.ownViewStale {
		m.OwnView(at, stale)
	}
	return stale
}

// OwnView: the canary guard fired (stale=true) or the view recovered
// (stale=false) at `at`.
func (m *Model) OwnView(at time.Time, stale bool) {
	m.step(at)
	if !m.running {
		return // Choice: a stopped controller has no view; Start begins fresh.
	}
	switch {
	case stale && !m.ownViewStale:
		m.ownViewGoesStale(at)
	case !stale && m.ownViewStale:
		m.ownViewRecovers(at)
	}
	m.evaluate(at)
}

// Writes: from `at` the API server refuses (refused=true) or takes again
// the controller's Node writes. A refused write is not applied; a write
// applied with its answer lost is not refused.
func (m *Model) Writes(at time.Time, refused bool) {
	m.step(at)
	if m.writesRefused && !refused {
		m.writesBackAt = at
	}
	m.writesRefused = refused
	if !refused {
		// The refused removals are retried and go through.
		for _, n := range m.nodes {
			n.removalRefused = false
		}
	}
	m.evaluateIfRunning(at)
}

// WorldWrites marks the point of the instant `at` from which the world's
// writes of that instant (reboots, renewals, other writers) are at the API
// server: every write the controller makes in the instant after it meets
// them, those before it do not (a driver that writes the world at once and
// delivers it later calls it in between). Nothing is evaluated.
func (m *Model) WorldWrites(at time.Time) {
	m.step(at)
	m.worldAt = at
}

// WriteLanded: the API server took the controller's patch of the node's
// taints and annotations. What the model decided for the node up to the
// sync that wrote it is on the Node, and a refusal later in the instant
// (WriteRetried) takes back only what was decided after it. In Together,
// the write is of the sync that took the observations: it counts from the
// evaluation after the last.
func (m *Model) WriteLanded(at time.Time, name string) {
	m.step(at)
	if m.together {
		m.landed = append(m.landed, name)
		return
	}
	if n := m.nodes[name]; n != nil {
		n.writeLanded(at)
	}
}

// WriteRetried: the API server answered the controller's patch of the
// node's taints and annotations with 409 Conflict. The controller reads the
// node afresh and computes the write again, asking its guards again before
// it adds a taint (docs/controller.md, "Guards come first"), after whatever
// it observed since the decision. What the model took as written in this
// instant since the API server last took a write of the node (WriteLanded)
// is taken back, as for a write the instant's world change refused, and
// decided again now (seed 18385101855240172789: another node's failure,
// observed before the retry, suspended the zone and held the taint). Seed
// 11236189133390383420: n1's boot record, written and taken in the
// instant, went back with a later patch the API server refused, and the
// model expected no record where the retry kept one.
func (m *Model) WriteRetried(at time.Time, name string) {
	m.step(at)
	n := m.nodes[name]
	if n == nil || !n.writtenAt.Equal(at) {
		return
	}
	n.takeBackRefusedWrites()
	m.evaluateIfRunning(at)
}

// RetryMetTheGuard: the controller's retry of a taint that an outage of its
// writes refused reached the API server only after the own-view guard fired,
// and the guard held it. The model takes every decision as written the
// instant the writes are taken again (Writes); the controller retries a
// refused write on its queue's next turn, a worker's read and patch later,
// and a guard that fires meanwhile holds the addition ("a write decided
// before a guard fired is re-decided, never replayed", docs/controller.md).
// The taint the model took as written since the writes came back is taken
// back and the node decided again under the guard, as the retry decides it:
// a bootstrap, reboot or re-creation gate the guard holds is pending, so it
// cannot end while the view is stale and restarts at the recovery; a
// failure is held. It reports false, changing
// nothing, unless the guard fired after the writes came back and the taint
// was taken as written since then, with the view still stale.
//
// Seed 11577162341470377777: n3 rebooted in an outage of the writes; they
// came back at 56s and the guard fired at 57s, the outage having kept the
// canary's renewals out; the controller's retry came at 57s and was held.
// The model, its reboot gate tainted at 56s, ended it at 58s on renewals
// seen in the stale view, which a pending gate cannot do; the controller
// restarted the gate at the recovery, n3 rebooted again before it ended, and
// the boot records named different boots from then on. A driver that sees
// the controller hold such a node calls it.
//
// Seed 17271907123373396587: the model ended such a gate on renewals in the
// guard's own second, before the driver saw the controller hold the node;
// the node is put back as it was before that ungate (endedInStale), its
// gate pending, as the controller's is.
func (m *Model) RetryMetTheGuard(at time.Time, name string) bool {
	m.step(at)
	n := m.nodes[name]
	if !m.running || n == nil || !m.ownViewStale {
		return false
	}
	switch {
	case n.gate == nil && n.endedInStale != nil:
		// The controller's memory and writes go back; the Node's facts
		// are the world's, as they are now.
		restored := *n.endedInStale
		restored.Node = n.Node
		*n = restored
		n.gate.pending = true
	case !m.retryMayMeetTheGuard(n):
		return false
	}
	n.tainted = false
	m.evaluate(at)
	return true
}

// retryMayMeetTheGuard: the node's gate is one whose taint the model took as
// written when the writes came back, with the guard fired since: the
// controller's retry of it may have come after the guard.
func (m *Model) retryMayMeetTheGuard(n *node) bool {
	return m.ownViewStale && n.tainted && n.gate != nil && !m.writesBackAt.IsZero() &&
		!n.gate.taintedAt.Before(m.writesBackAt) && !m.staleSince.Before(n.gate.taintedAt)
}

// Together takes the observations observe makes as the controller takes
// them in one sync of one node: its work queue holds a node's key once, so
// the events that arrive while the key waits, or while a sync of it runs,
// all reach the next sync together. Each observation changes what the
// model knows at once; the evaluation comes once, after the last, so that
// no decision rests on a moment between them that no sync saw (seed
// 14379374699796990078: a renewal and a release that one sync took
// together never showed both extensions ready, and the reboot gate
// stayed). The driver says which observations a sync took together; the
// model never guesses it.
func (m *Model) Together(observe func()) {
	if m.together {
		observe()
		return
	}
	m.together, m.owed = true, false
	observe()
	m.together = false
	if m.owed {
		m.owed = false
		m.evaluate(m.now)
	}
	for _, name := range m.landed {
		if n := m.nodes[name]; n != nil {
			n.writeLanded(m.now)
		}
	}
	m.landed = m.landed[:0]
}

// Advance: time passes; the controller evaluates every node at `to`.
func (m *Model) Advance(to time.Time) {
	m.step(to)
	m.evaluateIfRunning(to)
}

// Nodes returns the observable state of every node.
func (m *Model) Nodes() map[string]NodeView {
	out := make(map[string]NodeView, len(m.nodes))
	for name, n := range m.nodes {
		out[name] = NodeView{
			Tainted:         n.tainted,
			ConditionStatus: n.condStatus,
			ConditionReason: n.condReason,
			Evicted:         n.evicted,
			NoExecute:       n.noExecute,
			BootRecord:      n.record.String(),
		}
	}
	return out
}

// NotReady is the extensions the node's SystemExtensionsReady condition
// names as not ready: the gating extensions whose Leases are not ready, while
// the node is gated or held (sorted; none otherwise).
func (m *Model) NotReady(name string) []string {
	n := m.nodes[name]
	if n == nil {
		return nil
	}
	return slices.Clone(n.condNotReady)
}

// Informational is the extensions the node's SystemExtensionsReady condition
// names as not ready but not affecting readiness: those the node lists that
// do not gate (affectsReadiness false, or failed open in this boot) whose
// Leases are not ready (sorted).
func (m *Model) Informational(name string) []string {
	n := m.nodes[name]
	if n == nil {
		return nil
	}
	return slices.Clone(n.condInfo)
}

// StartGrace reports whether the extension's Lease looks observed only by
// the grace of the last Start: no renewal observed since.
func (m *Model) StartGrace(node, ext string) bool {
	l := m.leases[leaseKey{node, ext}]
	return l != nil && l.observedSet && l.startGrace
}

// DeadMarks is the dead marks of the node's boot record as written: each
// extension judged expired on the node in service, as "name@renewTime"
// (µs), sorted and comma-separated ("" without a record or marks).
func (m *Model) DeadMarks(name string) string {
	n := m.nodes[name]
	if n == nil {
		return ""
	}
	return n.record.get().dead
}

// Failing reports whether the node is failing now, in the sense escalation
// acts on: in service in its current boot, a gating extension not ready, and
// no planned release of this boot among the failures. A drain goes on only
// while it holds: a planned release (the updater drains then) or a reboot
// ends the controller's part, though the node's Evicted stays true.
func (m *Model) Failing(name string) bool {
	n := m.nodes[name]
	return n != nil && isFailing(n, m.factsOf(n, m.now))
}

// Escalated reports whether the node's drain is in force (mode Evict): its
// pods were evicted for this failure and its eviction clock has not started
// afresh since, or it has and the node's new escalation came (its turn of
// the cluster-wide rate included). A node that was leaving gets a new clock
// when it stops leaving: its drain waits for the new one and for its turn,
// though its Evicted stays true.
func (m *Model) Escalated(name string) bool {
	n := m.nodes[name]
	return n != nil && n.evicted && n.clock.running && n.clock.escalated && m.evicts()
}

// evicts reports whether escalations evict pods (mode Evict).
func (m *Model) evicts() bool {
	return m.cfg.EvictionMode == "" || m.cfg.EvictionMode == EvictionModeEvict
}

// Held lists (sorted) the nodes in the held state: a guard keeps them from
// being tainted.
func (m *Model) Held() []string {
	var out []string
	for _, n := range m.sortedNodes() {
		if n.held {
			out = append(out, n.Name)
		}
	}
	return out
}

// Suspended reports whether failure taints and evictions are suspended for
// nodes of a zone ("" = the cluster scope only): by the cluster's or that
// zone's blast radius, or because the own view is stale.
func (m *Model) Suspended(zone string) bool {
	return m.ownViewStale || m.clusterSuspended || (zone != "" && m.zoneSuspended[zone])
}

func (m *Model) evaluateIfRunning(at time.Time) {
	if m.running {
		m.evaluate(at)
	}
}

func (m *Model) sortedNodes() []*node {
	out := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func copyNode(n Node) Node {
	n.Extensions = append([]Extension(nil), n.Extensions...)
	n.Labels = maps.Clone(n.Labels)
	return n
}

// nodeWrites is what the controller writes on a Node and a refused write
// leaves as it was, and whether the node's pods stood evicted: an ungate
// ends the failure, and the pods' eviction with it, only by its write.
type nodeWrites struct {
	tainted, noExecute, evicted, condWritten bool
	record                                   *bootRecord
}

// decidesWritesChanged: the update from old to in changes what a write of
// the controller must find unchanged on a fresh read of the Node: the
// object, its boot, its labels and its deletion (docs/controller.md,
// "Writes").
func decidesWritesChanged(old, in Node) bool {
	return old.UID != in.UID || old.BootID != in.BootID || old.Deleting != in.Deleting ||
		old.Zone != in.Zone || old.Excluded != in.Excluded || !maps.Equal(old.Labels, in.Labels)
}

// takeBackRefusedWrites: an update that changes what decides the
// controller's writes came in the instant of writtenAt, after the world's
// writes (WorldWrites). The evaluations between those writes and this
// update were decided on a view without it; the controller's writes of
// them read the Node afresh, find it changed in what decides them and are
// refused (docs/controller.md, "Writes"). Their taint and NoExecute
// additions, their boot record and the condition they wrote first are
// taken back, and the evaluation that follows decides them again on the new
// Node (seed 7312980953682531094: a node re-created and excluded in one
// instant; the model kept the condition decided on the unlabelled object,
// which the exclusion then expected to read NodeExcluded).
//
// Choice: a removal stays: the controller, which took the node as ungated,
// removes the taint again in the retry that follows at once. The failure
// that ungate ended does not end without its write: an escalated node's
// pods stay evicted, and the retry's decision on the new Node says whether
// the failure goes on (seed 16230366954742338781: n12, escalated, renewed
// in the instant it came back from a reboot; the model ungated it on the
// old boot and ended its eviction, the controller's ungate was refused by
// the new boot and the reboot's gate followed the failure's).
//
// Seeds 17376734396083563727 (a reboot: the model kept boot-1's record,
// and a new instance told a reboot where the controller, finding none,
// told its own gate) and 583410693624293234 (a zone label change: the
// model kept a failure taint decided on the old zone, and the new zone's
// suspension did not hold it; the controller's write was refused and the
// suspension held it).
func (n *node) takeBackRefusedWrites() {
	before := n.beforeWrites
	n.tainted = n.tainted && before.tainted
	n.noExecute = n.noExecute && before.noExecute
	n.evicted = n.evicted || before.evicted
	n.record = before.record
	n.condWritten = before.condWritten
	n.writtenAt = time.Time{}
}

// writeLanded: the API server took the controller's write of the node in
// the instant at: what the evaluations since the world's writes decided
// for its taints and annotations is no longer the instant's to take back.
// The condition is written apart (the status subresource) and keeps its
// own.
func (n *node) writeLanded(at time.Time) {
	if !n.writtenAt.Equal(at) {
		// No evaluation since the world's writes: the next one takes the
		// Node as it is.
		return
	}
	n.beforeWrites = nodeWrites{tainted: n.tainted, noExecute: n.noExecute, evicted: n.evicted,
		condWritten: n.beforeWrites.condWritten, record: n.record}
}

// forget wipes the controller's memory of a node.
func (n *node) forget(at time.Time) {
	n.seenSince = at
	n.endedInStale = nil
	n.inService = false
	n.gate = nil
	n.failedOpen = map[string]bool{}
	n.regSince = at
	n.clock = evictionClock{last: at}
	n.held = false
	n.turn = time.Time{}
	n.tie = turnTie{}
}

func parseFailedOpen(s string) map[string]bool {
	out := map[string]bool{}
	if s == "" {
		return out
	}
	for _, e := range strings.Split(s, ",") {
		out[e] = true
	}
	return out
}
