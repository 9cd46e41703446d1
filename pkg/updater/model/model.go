// Package model is a small, slow, deliberately obvious reference model of the
// update operator's rules (docs/updater.md): the state machine of a
// BottlerocketShadow's spec, the counting table, who may start, the deadlines,
// the failures that halt the rollout and the health gate. It was written from
// the documentation only, never from pkg/updater's code, so that the
// deterministic simulation (pkg/updater/simulation_test.go) can run it beside
// the real operator and agents and require that they agree.
//
// The model is a judge, not a second operator: it keeps no state of its own
// between calls. Given what the operator could see at an instant (a World:
// every shadow, every Node, the clock), it says
//
//   - which writes the operator still owes (Due): a spec to move one step, an
//     abort to answer, a failure to record, a node to start. A settled
//     simulation — every event delivered, every worker idle — must owe none;
//   - whether one spec write the operator made was allowed (Allowed), judged
//     on the object the write replaced (the operator's writes are guarded by
//     its resourceVersion, so that object is exactly what it decided on);
//   - the invariants of a rollout (InFlight and its limits).
//
// Every decision the documentation leaves open is marked "Choice:".
package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// State is a shadow state (spec.state or status.currentState).
type State string

// The states of docs/updater.md. ErrorReset is only ever reported by an agent.
const (
	Idle       State = "Idle"
	Staged     State = "StagedAndPerformedUpdate"
	Rebooted   State = "RebootedIntoUpdate"
	Monitoring State = "MonitoringUpdate"
	ErrorReset State = "ErrorReset"
)

// Config is the operator's configuration as the model needs it.
type Config struct {
	// MaxConcurrent and MaxConcurrentPerZone are counts (0 per zone: no
	// zone limit); percentages are resolved by the caller.
	MaxConcurrent, MaxConcurrentPerZone int
	// TargetVersion pins the version; "" means each node's offered one.
	TargetVersion string
	Paused        bool
	// Windows are the update windows; none means always open.
	Windows []Window
	// The state deadlines and the soak.
	Staged, Rebooted, Monitoring, ReturnToIdle time.Duration
	Soak                                       time.Duration
	// NotOfferedRetry is how long after its agent found a pin not offered a
	// node waits (its agent's next refresh).
	NotOfferedRetry time.Duration
	// MinReleaseAge: a version starts only once it has been offered this
	// long (0: at once). DelayBetweenNodes: after an update passed its
	// health gate, the next start waits this long (0: none).
	MinReleaseAge, DelayBetweenNodes time.Duration
	// GateAnywhere and GateOnNode: spec.gates.blockingPods sets its
	// anywhere and its onNode selector.
	GateAnywhere, GateOnNode bool
	// Rollback: onHealthGateFailure Rollback (false: Halt).
	Rollback bool
	// Alerts: spec.gates.alerts asks an alert source (World.Alerts,
	// World.AlertsDown).
	Alerts bool
	// BeforeDrain and AfterReboot: spec.hooks sets that hook (World.Hooks
	// are their runs).
	BeforeDrain, AfterReboot bool
	// Drain: the drain's options (spec.drain over the configuration's).
	Drain DrainOptions
}

// Window is an update window of the simple form the simulation draws: it
// opens at every multiple of Every (counted from midnight UTC; Every divides
// an hour, as a cron "*/N * * * *" does) and stays open for Open.
type Window struct {
	Every, Open time.Duration
}

// OpenAt says whether any window is open at t (true when there are none).
// A window is open from the instant it opens and closed from the instant
// it ends.
func (c Config) OpenAt(t time.Time) bool {
	if len(c.Windows) == 0 {
		return true
	}
	for _, w := range c.Windows {
		if w.Every <= 0 {
			continue
		}
		since := t.Sub(t.Truncate(24 * time.Hour)) // midnight UTC
		if since%w.Every < w.Open {
			return true
		}
	}
	return false
}

// Shadow is what the operator reads of one BottlerocketShadow.
type Shadow struct {
	Name    string
	NodeUID string // the node-uid annotation

	Spec        State
	SpecVersion string
	SpecSince   time.Time // spec.stateTransitionTimestamp; zero when unset

	Status          State // status.currentState; "" before the agent's first report
	CurrentVersion  string
	TargetVersion   string
	CrashCount      int
	FailureAt       time.Time // status.stateTransitionFailureTimestamp
	NotOffered      bool      // UpdateFailed True with reason VersionNotOffered
	RebootRequested bool      // status.rebootRequestedAt is set
	// Pinned: status.previousVersionLock is set, the lock the agent pinned
	// over and has still to restore.
	Pinned bool

	Failed, Resume string    // the failed and resume annotations
	HealthySince   time.Time // the healthy-since annotation; zero when absent
	Started        string    // the started annotation
	Drained        string    // the drained annotation: the bootID drained
	// FromVersion is the from-version annotation (the version the update
	// leaves); Rollback the rollback annotation (a version that failed its
	// health gate on this node).
	FromVersion, Rollback string
	// SoakPausedSince is the soak-paused-since annotation (zero when
	// absent): the soak and its deadline are paused while the alerts
	// gate cannot be read. SoakPaused is the soak-paused annotation: how
	// long its earlier pauses lasted.
	SoakPausedSince time.Time
	SoakPaused      time.Duration
}

// Node is what the operator reads of one Node.
type Node struct {
	Name, UID, Zone string
	Managed         bool // matches the managed-node selector and is not being deleted
	Excluded        bool
	// ExtensionsReady: SystemExtensionsReady is True (any reason);
	// Healthy: True with reason ExtensionsReady or NoRequiredExtensions,
	// and the Node's Ready condition True.
	ExtensionsReady, Healthy bool
	ListsUpdater             bool // its system-extensions list names bottlerocket-updater
	BootID                   string
	Tainted                  bool // it carries the readiness taint
}

// World is everything the operator could see at Now.
type World struct {
	Now     time.Time
	Shadows map[string]Shadow
	Nodes   map[string]Node // existing Nodes only

	// FirstOffered is, by version (without a leading "v"), when a node
	// first reported it offered; LastSucceeded is when an update last
	// passed its health gate (zero: never). The pacing rules are measured
	// from them.
	FirstOffered  map[string]time.Time
	LastSucceeded time.Time

	// AnywherePods are the unfinished pods (phase neither Succeeded nor
	// Failed) the anywhere selector of spec.gates.blockingPods matches;
	// OnNodePods those its onNode selector matches, by the node they are
	// bound to.
	AnywherePods []string
	OnNodePods   map[string][]string

	// Alerts are the alerts of spec.gates.alerts that fire, as the source
	// answers; AlertsDown: the source cannot answer.
	Alerts     []Alert
	AlertsDown bool

	// Hooks are the runs of spec.hooks the operator started.
	Hooks []HookRun
}

// Alert is a firing alert the alerts gate matches; Node is its node label
// ("" when it names none).
type Alert struct {
	Name, Node string
}

// AlertNaming is the firing alert that names node, if one does.
func (w World) AlertNaming(node string) (Alert, bool) {
	for _, a := range w.Alerts {
		if a.Node == node {
			return a, true
		}
	}
	return Alert{}, false
}

// SoakPausedNow: the node's soak and its MonitoringUpdate deadline are
// paused.
func SoakPausedNow(s Shadow) bool { return s.Spec == Monitoring && !s.SoakPausedSince.IsZero() }

// soaking: the node is in the soak the alerts gate watches — the agent
// reports MonitoringUpdate and the node is healthy with its soak started.
func soaking(w World, s Shadow) bool {
	node, ok := w.NodeOf(s)
	return ok && node.Healthy && s.Spec == Monitoring && s.Status == Monitoring && !s.HealthySince.IsZero()
}

// GateHolds says why spec.gates hold back the node's start at Now ("" when
// they do not): an unfinished anywhere pod holds every start, an onNode pod
// the start of its node only. Choice: the gates are read before a start, so
// they never stop an update in flight.
func (c Config) GateHolds(w World, node string) string {
	// Choice: a source that cannot answer holds every start (fail closed).
	if c.Alerts && w.AlertsDown {
		return "the alert source cannot answer"
	}
	if c.Alerts && len(w.Alerts) > 0 {
		return fmt.Sprintf("%d alerts of spec.gates.alerts fire, %s first", len(w.Alerts), w.Alerts[0].Name)
	}
	if c.GateAnywhere && len(w.AnywherePods) > 0 {
		return "a blockingPods anywhere pod exists: " + strings.Join(w.AnywherePods, ", ")
	}
	if c.GateOnNode && len(w.OnNodePods[node]) > 0 {
		return "a blockingPods onNode pod runs on the node: " + strings.Join(w.OnNodePods[node], ", ")
	}
	return ""
}

// ReleaseTooYoung says whether MinReleaseAge holds version back at Now.
// Choice: a version no node has reported offered (a pin ahead of every
// wave) has no age yet, so it waits.
func (c Config) ReleaseTooYoung(w World, version string) bool {
	if c.MinReleaseAge <= 0 {
		return false
	}
	first, ok := w.FirstOffered[strings.TrimPrefix(version, "v")]
	return !ok || w.Now.Before(first.Add(c.MinReleaseAge))
}

// BetweenNodes says whether DelayBetweenNodes holds every start back at Now.
func (c Config) BetweenNodes(w World) bool {
	return c.DelayBetweenNodes > 0 && !w.LastSucceeded.IsZero() && w.Now.Before(w.LastSucceeded.Add(c.DelayBetweenNodes))
}

// NodeOf is the Node the shadow describes, if it exists: a Node of the same
// name with another UID is another machine.
func (w World) NodeOf(s Shadow) (Node, bool) {
	n, ok := w.Nodes[s.Name]
	if !ok || (s.NodeUID != "" && s.NodeUID != n.UID) {
		return Node{}, false
	}
	return n, true
}

// MarkedFailed: the operator failed this attempt (the failure is not older
// than the last spec transition: both are written together, and a later
// start moves the transition on).
func MarkedFailed(s Shadow) bool {
	t, err := time.Parse(time.RFC3339, s.Failed)
	if s.Failed == "" || err != nil || s.SpecSince.IsZero() {
		return false
	}
	return !t.Before(s.SpecSince.Truncate(time.Second))
}

// Halting: the shadow carries a failed value its resume does not repeat.
func Halting(s Shadow) bool { return s.Failed != "" && s.Resume != s.Failed }

func inFlight(st State) bool { return st == Staged || st == Rebooted || st == Monitoring }

// Returning: spec is Idle but the agent still reports an update state or the
// failure it aborts.
func Returning(s Shadow) bool {
	return (s.Spec == Idle || s.Spec == "") && (inFlight(s.Status) || s.Status == ErrorReset)
}

// Counts is the counting table of docs/updater.md. A node marked failed
// counts only while its rollback is still to start: the rollback takes the
// slot its failed update had, so nothing may take it in between.
func Counts(s Shadow) bool {
	if MarkedFailed(s) {
		return RollbackPending(s)
	}
	if s.Spec != Idle && s.Spec != "" {
		return true
	}
	return Returning(s)
}

// AtRest: the operator wants nothing of the node, its agent does nothing
// (ErrorReset: it still aborts) and has no lock of its own to restore, and
// no failure halts the policy. Only such a shadow may go with its node's
// leaving the managed set: deleted earlier it would take the user's lock
// with it, or let the rollout go on past a bad release.
func AtRest(s Shadow) bool {
	return (s.Spec == Idle || s.Spec == "") && (s.Status == Idle || s.Status == "") && !s.Pinned && !Halting(s)
}

// ShadowDue says what the operator owes the existing Node name's shadow:
// "CreateShadow" for a managed node that has none, "DeleteShadow" for a
// node outside the managed set whose shadow describes it and is at rest. An
// update in flight is never orphaned: its shadow stays until it ends. The
// shadow of a Node deleted, or re-created under its name, is the orphans'
// rule (ScaledDown, Halting), not this one.
func ShadowDue(w World, name string) string {
	node, ok := w.Nodes[name]
	if !ok {
		return ""
	}
	s, has := w.Shadows[name]
	switch {
	case !has && node.Managed:
		return "CreateShadow"
	case has && !node.Managed && AtRest(s):
		if _, describes := w.NodeOf(s); describes {
			return "DeleteShadow"
		}
	}
	return ""
}

// ShadowDeletionAllowed says why the operator may not delete a shadow it
// judged on prev ("" when it may): the shadow of a node that exists is
// deleted only once the node left the managed set and the shadow is at
// rest.
func ShadowDeletionAllowed(w World, prev Shadow) string {
	node, ok := w.NodeOf(prev)
	switch {
	case !ok:
		return ""
	case node.Managed:
		return "the node is managed"
	case !AtRest(prev):
		return "the node left the managed set before its update was at rest (in flight, a lock to restore, or a failure that halts the policy): never orphaned"
	}
	return ""
}

// PastDrain: losing the node now is the update's failure — the agent asked
// for the reboot, or the node is in MonitoringUpdate.
func PastDrain(s Shadow) bool {
	return s.Spec == Monitoring || (s.Spec == Rebooted && s.RebootRequested)
}

// ScaledDown: the Node is gone before the update got past the drain; its slot
// is free at once.
func (w World) ScaledDown(s Shadow) bool {
	_, ok := w.NodeOf(s)
	return !ok && !PastDrain(s)
}

// Occupies: the shadow takes a slot of the limits now.
func (w World) Occupies(s Shadow) bool { return Counts(s) && !w.ScaledDown(s) }

func (c Config) deadline(st State) time.Duration {
	switch st {
	case Staged:
		return c.Staged
	case Rebooted:
		return c.Rebooted
	case Monitoring:
		return c.Monitoring
	}
	return c.ReturnToIdle
}

// Deadline is when the shadow's current spec state times out (zero: none).
func (c Config) Deadline(s Shadow) time.Time {
	if s.SpecSince.IsZero() {
		return time.Time{}
	}
	if s.Spec == Idle || s.Spec == "" {
		if !Returning(s) || MarkedFailed(s) {
			return time.Time{}
		}
	}
	return s.SpecSince.Add(c.deadline(s.Spec))
}

// Failure reasons (the first word of the failure-reason annotation).
const (
	DeadlineExceeded = "DeadlineExceeded"
	WrongVersion     = "WrongVersion"
	NodeDeleted      = "NodeDeleted"
	// RollbackFailed: the agent failed a rollback before its reboot.
	RollbackFailed = "RollbackFailed"
	// FiringAlert: an alert of spec.gates.alerts naming the node fired in
	// its soak.
	FiringAlert = "FiringAlert"
)

// FailureDue is the halting failure the operator must record for s now, ""
// when none.
func (c Config) FailureDue(w World, s Shadow) string {
	if MarkedFailed(s) {
		return ""
	}
	if s.Spec == Idle || s.Spec == "" {
		if d := c.Deadline(s); !d.IsZero() && !w.Now.Before(d) {
			return DeadlineExceeded
		}
		return ""
	}
	if _, ok := w.NodeOf(s); !ok {
		if PastDrain(s) {
			return NodeDeleted
		}
		return "" // a scale-down: no deadline either
	}
	if s.Status == ErrorReset {
		if IsRollback(s) {
			return RollbackFailed // a failed rollback halts, whatever failed
		}
		return "" // the agent failed before the reboot: an abort, no halt
	}
	// An alert naming the node that fires in its soak fails it.
	if c.Alerts && !w.AlertsDown && soaking(w, s) {
		if _, ok := w.AlertNaming(s.Name); ok {
			return FiringAlert
		}
	}
	if c.hookDue(w, s) == "Fail "+HookFailed {
		return HookFailed
	}
	if !w.Now.Before(c.pausedDeadline(w, s)) && !c.soakEndedInTime(w, s) {
		return DeadlineExceeded
	}
	if s.Spec == Rebooted && s.Status == Rebooted && !SameVersion(s.CurrentVersion, s.SpecVersion) {
		return WrongVersion
	}
	return ""
}

// soakEndedInTime: the node soaks (ready now, its soak recorded) and its soak
// ended before its MonitoringUpdate deadline. An operator passes such a
// node at the soak's end; one absent then and at the deadline passes it once
// back, never fails it for the deadline (docs/updater.md, "Deadlines").
func (c Config) soakEndedInTime(w World, s Shadow) bool {
	return soaking(w, s) && s.HealthySince.Add(c.Soak+s.SoakPaused).Before(c.pausedDeadline(w, s))
}

// pausedDeadline is the shadow's deadline moved by its soak's pauses: the
// MonitoringUpdate deadline does not run while the soak is paused, so
// never while a pause lasts.
func (c Config) pausedDeadline(w World, s Shadow) time.Time {
	d := c.Deadline(s)
	if s.Spec != Monitoring {
		return d
	}
	d = d.Add(s.SoakPaused)
	if SoakPausedNow(s) {
		d = d.Add(max(w.Now.Sub(s.SoakPausedSince), 0))
	}
	return d
}

// IsRollback: the update goes to an older version than the one it leaves —
// only a rollback does.
func IsRollback(s Shadow) bool {
	if s.SpecVersion == "" || s.FromVersion == "" {
		return false
	}
	c, err := CompareVersions(s.SpecVersion, s.FromVersion)
	return err == nil && c < 0
}

// RollbackNamed is the rollback annotation a failure of s records: the
// failed version for the health gate's failure (the MonitoringUpdate
// deadline) of an update that is no rollback, left an older version, and
// whose policy asks for it; otherwise the annotation as it was.
func (c Config) RollbackNamed(s Shadow, failure string) string {
	if !c.Rollback || (failure != DeadlineExceeded && failure != FiringAlert) || s.Spec != Monitoring || IsRollback(s) {
		return s.Rollback
	}
	if cmp, err := CompareVersions(s.FromVersion, s.SpecVersion); err != nil || cmp >= 0 {
		return s.Rollback
	}
	return s.SpecVersion
}

// RollbackPending: the failure of s named a version to roll back from and
// the rollback has not started — spec is back at Idle keeping the failed
// version, the attempt is still the failed one, and the agent either still
// reports the update (or its abort) or reports Idle on the failed version,
// which makes the rollback due (RollbackDue). Choice: the failed update
// holds its slot until then, a resume notwithstanding; once the agent
// reports Idle on another version, or the annotation is gone, no rollback
// will start and the slot is free.
func RollbackPending(s Shadow) bool {
	if s.Rollback == "" || s.Spec != Idle || !MarkedFailed(s) || !SameVersion(s.SpecVersion, s.Rollback) {
		return false
	}
	if cmp, err := CompareVersions(s.FromVersion, s.Rollback); err != nil || cmp >= 0 {
		return false
	}
	return Returning(s) || (s.Status == Idle && SameVersion(s.CurrentVersion, s.Rollback))
}

// RollbackDue is the version the operator must roll s back to now, "" when
// none: the failure named the version that failed, spec is back at Idle
// keeping it, the agent reports Idle on it, the attempt is still the
// failed one (at most one rollback per failure) and a second has passed
// since the failure. Choice: the second, because the API stores seconds and
// a transition in the failure's second would leave the attempt marked failed.
func RollbackDue(w World, s Shadow) string {
	if !RollbackPending(s) || s.Status != Idle {
		return ""
	}
	if _, ok := w.NodeOf(s); !ok {
		return ""
	}
	failed, _ := time.Parse(time.RFC3339, s.Failed)
	if w.Now.Before(failed.Add(time.Second)) {
		return ""
	}
	return s.FromVersion
}

// Action is a write the operator owes.
type Action struct {
	Node string
	What string // Advance, Abort, Fail <reason>, SoakStart, SoakEnd, Succeed, Start <version>, Hook <name>
}

func (a Action) String() string { return a.Node + ": " + a.What }

// Due lists the writes the operator owes in w, in node-name order, starts
// last. A settled operator owes none.
func (c Config) Due(w World) []Action {
	var out []Action
	for _, name := range names(w.Shadows) {
		if a := c.due(w, w.Shadows[name]); a != "" {
			out = append(out, Action{Node: name, What: a})
		}
	}
	for _, name := range names(w.Nodes) {
		if a := ShadowDue(w, name); a != "" {
			out = append(out, Action{Node: name, What: a})
		}
	}
	if len(out) > 0 {
		return out // failures and transitions before starts
	}
	for _, st := range c.Starts(w) {
		out = append(out, Action{Node: st, What: "Start " + c.target(w.Shadows[st])})
	}
	return out
}

func (c Config) due(w World, s Shadow) string {
	if f := c.FailureDue(w, s); f != "" {
		return "Fail " + f
	}
	if s.Spec == Idle || s.Spec == "" {
		if to := RollbackDue(w, s); to != "" {
			return "Rollback " + to
		}
		return ""
	}
	node, ok := w.NodeOf(s)
	if !ok {
		return ""
	}
	if s.Status == ErrorReset {
		return "Abort"
	}
	if h := c.hookDue(w, s); h != "" {
		return h
	}
	switch s.Spec {
	case Staged, Rebooted:
		if s.Status == s.Spec {
			return "Advance"
		}
	case Monitoring:
		paused := SoakPausedNow(s)
		switch {
		// The pause ends once the source answers again, or with the soak
		// (the node is no longer healthy).
		case paused && (!node.Healthy || !c.Alerts || !w.AlertsDown):
			return "SoakResume"
		case !node.Healthy && !s.HealthySince.IsZero():
			return "SoakEnd"
		case node.Healthy && s.HealthySince.IsZero():
			return "SoakStart"
		case c.Alerts && w.AlertsDown && soaking(w, s) && !paused:
			return "SoakPause"
		case paused:
			return ""
		case node.Healthy && s.Status == Monitoring && !w.Now.Before(s.HealthySince.Add(c.Soak+s.SoakPaused)) &&
			c.hookSucceeded(w, s, AfterReboot):
			return "Succeed"
		}
	}
	return ""
}

// Halted says why no node may start ("" when they may).
func (c Config) Halted(w World) string {
	if c.Paused {
		return "Paused"
	}
	for _, s := range w.Shadows {
		if Halting(s) {
			return "UpdateFailed"
		}
	}
	if !c.OpenAt(w.Now) {
		return "OutsideWindow"
	}
	return ""
}

func (c Config) target(s Shadow) string {
	if c.TargetVersion != "" {
		return c.TargetVersion
	}
	return s.TargetVersion
}

// BackoffUntil is when a node that failed before its reboot may retry:
// 2^crashCount minutes after the failure, at most a day; a pin not offered
// yet waits NotOfferedRetry, without a crash.
func (c Config) BackoffUntil(s Shadow) time.Time {
	if s.FailureAt.IsZero() {
		return time.Time{}
	}
	if s.NotOffered {
		return s.FailureAt.Add(c.NotOfferedRetry)
	}
	if s.CrashCount <= 0 {
		return time.Time{}
	}
	d := 24 * time.Hour
	if s.CrashCount < 11 {
		d = min(time.Duration(1<<s.CrashCount)*time.Minute, d)
	}
	return s.FailureAt.Add(d)
}

// Candidate says why the node may not start on its own merits ("" when it
// may, limits aside).
func (c Config) Candidate(w World, s Shadow) string {
	node, ok := w.NodeOf(s)
	switch {
	case !ok || !node.Managed:
		return "not a managed node"
	case s.Spec != Idle || s.Status != Idle || Counts(s):
		return "not idle"
	}
	target := c.target(s)
	if target == "" || s.CurrentVersion == "" {
		return "nothing to go to"
	}
	cmp, err := CompareVersions(s.CurrentVersion, target)
	switch {
	case err != nil:
		return "versions not comparable"
	case cmp >= 0:
		return "up to date (or newer: never downgraded)"
	case SameVersion(s.Rollback, target):
		return "its target failed its health gate here and was rolled back"
	case w.Now.Before(c.BackoffUntil(s)):
		return "in back-off"
	case c.ReleaseTooYoung(w, target):
		return "its version has not been offered for minReleaseAge"
	case node.Excluded:
		return "excluded"
	case !node.ExtensionsReady:
		return "SystemExtensionsReady not True"
	case !node.ListsUpdater:
		return "the updater extension is not listed"
	}
	return ""
}

// InFlight counts the slots taken, cluster-wide and per zone. A shadow of a
// deleted node counts in the zone "" (its zone is no longer known).
func (w World) InFlight() (int, map[string]int) {
	n, zones := 0, map[string]int{}
	for _, s := range w.Shadows {
		if !w.Occupies(s) {
			continue
		}
		n++
		node, _ := w.NodeOf(s)
		zones[node.Zone]++
	}
	return n, zones
}

// Starts are the nodes the operator must start now, in its order (by name;
// the simulation has no operator node): every candidate the limits allow,
// each start counted before the next.
func (c Config) Starts(w World) []string {
	if c.Halted(w) != "" || c.BetweenNodes(w) {
		return nil
	}
	n, zones := w.InFlight()
	var out []string
	for _, name := range names(w.Shadows) {
		s := w.Shadows[name]
		if c.Candidate(w, s) != "" || c.GateHolds(w, name) != "" {
			continue
		}
		if n >= c.MaxConcurrent {
			break
		}
		zone := w.Nodes[name].Zone
		if c.MaxConcurrentPerZone > 0 && zones[zone] >= c.MaxConcurrentPerZone {
			continue
		}
		out = append(out, name)
		n++
		zones[zone]++
	}
	return out
}

// Allowed judges one spec or annotation write of the operator: prev is the
// shadow it replaced, next what was written, w the world at that instant
// (prev among its shadows). It returns why the write breaks the rules, or "".
func (c Config) Allowed(w World, prev, next Shadow) string {
	if prev.Spec == next.Spec && prev.SpecVersion == next.SpecVersion && prev.Failed == next.Failed &&
		prev.SpecSince.Equal(next.SpecSince) {
		if why := c.pauseRecordViolation(w, prev, next); why != "" {
			return why
		}
		return soakRecordViolation(w, prev, next)
	}
	if next.Failed != prev.Failed {
		return c.failureViolation(w, prev, next)
	}
	if f := c.FailureDue(w, prev); f != "" {
		return fmt.Sprintf("a failure (%s) is due, but spec went %s → %s without it", f, prev.Spec, next.Spec)
	}
	switch {
	case prev.Spec == Idle && next.Spec == Staged && RollbackDue(w, prev) != "":
		return rollbackViolation(w, prev, next)
	case prev.Spec == Idle && next.Spec == Staged:
		return c.startViolation(w, prev, next)
	case prev.Spec == Staged && next.Spec == Rebooted, prev.Spec == Rebooted && next.Spec == Monitoring:
		return stepViolation(prev, next)
	case prev.Spec == Monitoring && next.Spec == Idle:
		return c.healthGateViolation(w, prev)
	case (prev.Spec == Staged || prev.Spec == Rebooted) && next.Spec == Idle:
		return abortViolation(prev, next)
	}
	return fmt.Sprintf("spec went %s → %s: no such transition", prev.Spec, next.Spec)
}

// pauseRecordViolation judges a write of the soak's pause: it begins only
// in the soak while the source cannot answer, and its end adds the time it
// lasted (to the second) to the earlier pauses.
func (c Config) pauseRecordViolation(w World, prev, next Shadow) string {
	switch {
	case prev.SoakPausedSince.Equal(next.SoakPausedSince) && prev.SoakPaused == next.SoakPaused:
		return ""
	case prev.SoakPausedSince.IsZero() && !next.SoakPausedSince.IsZero():
		if !c.Alerts || !w.AlertsDown || !soaking(w, prev) {
			return "the soak was paused while its alerts could be read (or outside the soak)"
		}
		return ""
	case !prev.SoakPausedSince.IsZero() && next.SoakPausedSince.IsZero():
		lasted := w.Now.Sub(prev.SoakPausedSince).Truncate(time.Second)
		if got := next.SoakPaused - prev.SoakPaused; got < lasted-time.Second || got > lasted+time.Second {
			return fmt.Sprintf("the pause that began at %s ended adding %s to the soak's paused time, it lasted %s",
				prev.SoakPausedSince.Format(time.RFC3339), got, lasted)
		}
		return ""
	}
	return "the soak's paused time changed without a pause ending"
}

// soakRecordViolation judges a write that is no transition: only the soak's
// record may change then.
func soakRecordViolation(w World, prev, next Shadow) string {
	switch {
	case prev.HealthySince.Equal(next.HealthySince):
		return ""
	case next.Spec != Monitoring:
		return "healthy-since written outside MonitoringUpdate"
	}
	node, ok := w.NodeOf(prev)
	if next.HealthySince.IsZero() {
		if ok && node.Healthy {
			return "the soak ended while the node is healthy"
		}
		return ""
	}
	if !ok || !node.Healthy {
		return "the soak started while the node is not healthy"
	}
	return ""
}

func (c Config) failureViolation(w World, prev, next Shadow) string {
	f := c.FailureDue(w, prev)
	switch {
	case f == "":
		return "marked failed, but no failure is due"
	case next.Spec != Idle:
		return "marked failed without returning spec to Idle"
	case next.SpecVersion != prev.SpecVersion:
		return "a failure changed spec.version"
	case next.Rollback != c.RollbackNamed(prev, f):
		return fmt.Sprintf("the failure wrote the rollback annotation %q, want %q", next.Rollback, c.RollbackNamed(prev, f))
	}
	return ""
}

// rollbackViolation judges the start of a rollback: towards the version the
// failed update left, recording the failed version as the one it leaves.
func rollbackViolation(w World, prev, next Shadow) string {
	switch to := RollbackDue(w, prev); {
	case !SameVersion(next.SpecVersion, to):
		return fmt.Sprintf("rolled back towards %q, the version left was %q", next.SpecVersion, to)
	case !SameVersion(next.FromVersion, prev.SpecVersion):
		return fmt.Sprintf("a rollback records from-version %q, it leaves %q", next.FromVersion, prev.SpecVersion)
	case next.Rollback != prev.Rollback:
		return "a rollback changed the rollback annotation"
	}
	return ""
}

// startViolation judges Idle → StagedAndPerformedUpdate against the limits
// as they stood before this start.
func (c Config) startViolation(w World, prev, next Shadow) string {
	if why := c.Candidate(w, prev); why != "" {
		return "started a node that may not start: " + why
	}
	if h := c.Halted(w); h != "" {
		return "started a node while the rollout is halted: " + h
	}
	if c.BetweenNodes(w) {
		return fmt.Sprintf("started a node %s after an update passed its health gate, delayBetweenNodes %s",
			w.Now.Sub(w.LastSucceeded), c.DelayBetweenNodes)
	}
	if why := c.GateHolds(w, prev.Name); why != "" {
		return "started a node the gates hold back: " + why
	}
	n, zones := w.InFlight()
	zone := w.Nodes[prev.Name].Zone
	if n >= c.MaxConcurrent {
		return fmt.Sprintf("started a node with %d in flight, limit %d", n, c.MaxConcurrent)
	}
	if c.MaxConcurrentPerZone > 0 && zones[zone] >= c.MaxConcurrentPerZone {
		return fmt.Sprintf("started a node with %d in flight in zone %q, limit %d", zones[zone], zone, c.MaxConcurrentPerZone)
	}
	if !SameVersion(next.SpecVersion, c.target(prev)) {
		return fmt.Sprintf("started towards %q, the target is %q", next.SpecVersion, c.target(prev))
	}
	return ""
}

// stepViolation judges a step forward mid-update (to RebootedIntoUpdate or
// MonitoringUpdate).
func stepViolation(prev, next Shadow) string {
	if prev.Status != prev.Spec {
		return fmt.Sprintf("moved on from %s before the agent reported it (it reports %q)", prev.Spec, prev.Status)
	}
	if next.SpecVersion != prev.SpecVersion {
		return "spec.version changed mid-update"
	}
	return ""
}

// healthGateViolation judges MonitoringUpdate → Idle: the update counted as
// done.
func (c Config) healthGateViolation(w World, prev Shadow) string {
	node, ok := w.NodeOf(prev)
	switch {
	case prev.Status != Monitoring:
		return "passed the health gate before the agent reported MonitoringUpdate"
	case !ok || !node.Healthy:
		return "passed the health gate while the node is not healthy"
	case SoakPausedNow(prev):
		return "passed the health gate while its soak is paused (its alerts cannot be read)"
	case c.Alerts && w.AlertsDown:
		return "passed the health gate while its alerts cannot be read"
	case prev.HealthySince.IsZero() || w.Now.Before(prev.HealthySince.Add(c.Soak+prev.SoakPaused)):
		return "passed the health gate before the soak ended"
	case !c.hookSucceeded(w, prev, AfterReboot):
		if r, ok := w.HookRun(prev, AfterReboot); ok && r.Failed {
			return "passed the health gate although its afterReboot hook failed"
		}
		return "passed the health gate before its afterReboot hook succeeded"
	}
	return ""
}

// abortViolation judges an update called off before MonitoringUpdate.
func abortViolation(prev, next Shadow) string {
	if prev.Status != ErrorReset {
		return fmt.Sprintf("called the update off in %s without a failure (the agent reports %q)", prev.Spec, prev.Status)
	}
	if PastDrain(prev) {
		return "a failure after the drain was called off without halting the rollout"
	}
	if next.SpecVersion != prev.SpecVersion {
		return "an abort changed spec.version (the agent compares its pin with it)"
	}
	return ""
}

// names are m's keys in order: the model decides in name order.
func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SameVersion compares versions with or without a leading "v".
func SameVersion(a, b string) bool {
	return a != "" && strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v")
}

// CompareVersions compares two MAJOR.MINOR.PATCH versions (a leading "v"
// allowed): -1, 0 or 1.
func CompareVersions(a, b string) (int, error) {
	pa, err := parse(a)
	if err != nil {
		return 0, err
	}
	pb, err := parse(b)
	if err != nil {
		return 0, err
	}
	for i := range pa {
		switch {
		case pa[i] < pb[i]:
			return -1, nil
		case pa[i] > pb[i]:
			return 1, nil
		}
	}
	return 0, nil
}

func parse(v string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", v)
		}
		out[i] = n
	}
	return out, nil
}
