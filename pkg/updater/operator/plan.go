package operator

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/shadow"
)

// snapshot is everything the start decision reads, taken at one instant:
// the shadows, the nodes they describe and the policies. planStarts and
// policyStatus are pure functions of it, so the decision is tested as a
// table without a client.
type snapshot struct {
	now     time.Time
	ownNode string
	// lifecycleMaxAge is how long a foreign lifecycle condition counts a
	// schedulable node as leaving.
	lifecycleMaxAge time.Duration
	// shadows by name.
	shadows map[string]*updatesv1alpha1.BottlerocketShadow
	// nodes are the Nodes the shadows describe (same name and UID), by
	// name; a shadow without an entry lost its Node.
	nodes map[string]nodeView
	// policies by name.
	policies map[string]*policy
	// gates are the policies' gates as this pass read them, by policy; a
	// gated policy without an entry has not been read yet.
	gates map[string]*podGate
	// alertSources are the alert sources the operator's configuration
	// defines, by name.
	alertSources map[string]AlertSource
	// hooksConfigured: the operator's configuration says where hooks run.
	hooksConfigured bool
}

// nodeView is what the start decision needs of a Node.
type nodeView struct {
	zone string
	// managed: the operator's managedNodeSelector selects it and it is not
	// being deleted.
	managed bool
	// selectedBy are the policies whose nodeSelector selects the node, by
	// name; exactly one governs it.
	selectedBy []string
	// blocked says why the node must not start ("" when it may): not
	// healthy, excluded, no updater extension.
	blocked string
	// inScope: the managedNodeSelector selects it, deleted or not; a
	// node being deleted is no longer managed, but takes a slot of the
	// policies that select it until it is gone.
	inScope bool
	// leaving are its leaving signals, judged at the snapshot's instant.
	leaving nodeutil.LeavingFacts
	// notReady says why it takes a slot of a policy with countNotReady
	// ("" when it does not).
	notReady string
}

// governor is the policy that governs a managed node ("" when none or
// several select it).
func (s *snapshot) governor(name string) string {
	n, ok := s.nodes[name]
	if !ok || !n.managed || len(n.selectedBy) != 1 {
		return ""
	}
	return n.selectedBy[0]
}

// owners are the policies a shadow's update belongs to: the policy that
// started it (PolicyAnnotation) while that policy exists, even if the
// node's labels changed since; else the policies that select its node.
// A failure no policy can be found for (its node is gone, or no policy
// selects it, and it names none) halts every policy: a failure nobody can
// place must not let the fleet go on.
func (s *snapshot) owners(sh *updatesv1alpha1.BottlerocketShadow) []string {
	if p := sh.Annotations[updatesv1alpha1.PolicyAnnotation]; p != "" {
		if _, ok := s.policies[p]; ok {
			return []string{p}
		}
	}
	if n, ok := s.nodes[sh.Name]; ok && len(n.selectedBy) > 0 {
		return n.selectedBy
	}
	if updatesv1alpha1.Halting(sh.Annotations) {
		all := make([]string, 0, len(s.policies))
		for p := range s.policies {
			all = append(all, p)
		}
		return all
	}
	return nil
}

func (s *snapshot) owned(sh *updatesv1alpha1.BottlerocketShadow, pol string) bool {
	for _, o := range s.owners(sh) {
		if o == pol {
			return true
		}
	}
	return false
}

// scaledDown reports whether the shadow's Node was deleted (or replaced by
// a Node of the same name) before its update got past the drain: it was
// scaled down, not broken by the release, and its slot is free at once. A
// node deleted past the drain counts until it is marked failed.
func (s *snapshot) scaledDown(sh *updatesv1alpha1.BottlerocketShadow) bool {
	_, ok := s.nodes[sh.Name]
	return !ok && !shadow.PastDrain(sh)
}

// note is an Event about one node the start pass sends once per distinct
// message; a zero note forgets what was told, so the next block is told
// again.
type note struct {
	reason, message string
}

// plan is the start decision for one policy.
type plan struct {
	// starts are the nodes to start now, in order, with their version.
	starts []startDecision
	// halt is why the policy starts no node ("" when it may): the first
	// of InvalidSpec, Paused, UpdateFailed, OutsideWindow. active holds
	// every reason that holds, for the halt metric.
	halt   string
	active map[string]bool
	// haltedBy are the nodes whose failure halts the policy.
	haltedBy []string
	// windowOpen and windowChange: whether a window is open and when that
	// changes (zero: never).
	windowOpen   bool
	windowChange time.Time
	// wake is when the pass must run again although no object changes: a
	// back-off ending, a window opening or closing (zero: never).
	wake time.Time
	// notes are Events about the policy's nodes, by node.
	notes map[string]note
	// others are the nodes the policy selects that take its slots besides
	// its own updates (leaving, under someone else's maintenance or, with
	// countNotReady, not ready), in name order, with the signal that counts
	// each.
	others []updatesv1alpha1.CountedNode

	// offered are the versions the policy's nodes report offered, by
	// versionKey, with when each was first seen offered: the policy's
	// record, or now for a version it has not recorded yet.
	offered map[string]offer
	// releaseWait are the versions minReleaseAge holds back, by
	// versionKey; delayUntil is when delayBetweenNodes lets the next start
	// go (zero when it holds nothing back).
	releaseWait map[string]offer
	delayUntil  time.Time

	// gate is the policy's gates as this pass read them (nil: not read);
	// blocked is what they hold back (nil: nothing); gatesUnread: a start
	// was planned without reading them, which must be read, and the
	// policy planned again, before it is made.
	gate        *podGate
	blocked     *blocked
	gatesUnread bool
}

// offer is a version as offered, and since when (zero: not offered to any
// node of the policy).
type offer struct {
	version string
	since   time.Time
}

type startDecision struct {
	node, version string
}

// HaltInvalidSpec is the halt reason of a policy the operator rejects.
const HaltInvalidSpec = "InvalidSpec"

// planStarts decides which Idle nodes the policy starts now. A node starts
// only when the policy governs it alone, its version differs from the
// target (and is older: never a downgrade), it is not in back-off, the
// policy is valid, not paused, not halted and inside a window, the node is
// healthy, lists the updater extension and is not excluded, and fewer than
// maxConcurrentUpdates of the policy's nodes (a percentage is of the nodes
// it governs) — and maxConcurrentUpdatesPerZone in its zone — count as
// updating. Candidates go in name order; the operator's own node goes last:
// only when no other node of the policy is updating or could start.
func planStarts(snap *snapshot, pol *policy) plan {
	p := plan{notes: map[string]note{}, active: map[string]bool{}, releaseWait: map[string]offer{}}
	// Offers are recorded even while the policy starts nothing: the
	// release's age does not wait for a pause to end.
	p.recordOffers(snap, pol)
	p.decideHalt(snap, pol)
	b := ownUpdates(snap, pol)
	// The others are counted even when the policy is halted: its status
	// lists them.
	p.countOthers(snap, pol, &b)
	if p.halt != "" {
		return p
	}
	if u := unknownSources(pol, snap.alertSources); len(u) > 0 {
		p.blocked = &blocked{reason: UnknownAlertSource, message: fmt.Sprintf("No node starts: spec.gates.alerts names alert sources the operator's configuration does not define (alertSources): %s",
			strings.Join(u, ", "))}
		return p
	}
	if p.blocked = hooksHeld(snap, pol); p.blocked != nil {
		return p
	}
	p.gate = snap.gates[pol.name]
	p.admit(snap.now, pol, &b, p.candidates(snap, pol, b.isOther))
	return p
}

// recordOffers collects the versions the policy has recorded and, while it
// sets minReleaseAge, those its nodes report offered now, each with when it
// was first seen offered. A policy without minReleaseAge records nothing
// new: it pays no status write for a clock nobody reads. A recorded version
// no node reports any longer is kept: a pin moved back to it keeps its age.
func (p *plan) recordOffers(snap *snapshot, pol *policy) {
	p.offered = maps.Clone(pol.firstOffered)
	if p.offered == nil {
		p.offered = map[string]offer{}
	}
	if pol.minReleaseAge <= 0 {
		return
	}
	for _, sh := range sortedShadows(snap) {
		v := sh.Status.TargetVersion
		if v == "" || snap.governor(sh.Name) != pol.name {
			continue
		}
		k := versionKey(v)
		if _, ok := p.offered[k]; ok {
			continue
		}
		// Seconds, as the API stores the record: the clock a new leader
		// reads back is the one this pass decided on.
		p.offered[k] = offer{version: v, since: snap.now.Truncate(time.Second)}
	}
}

// releaseHeld reports whether minReleaseAge holds the version back; it
// notes why, and wakes the pass when the wait ends.
func (p *plan) releaseHeld(now time.Time, pol *policy, version string) bool {
	if pol.minReleaseAge <= 0 {
		return false
	}
	k := versionKey(version)
	o, ok := p.offered[k]
	if !ok {
		// A pin no node of the policy is offered yet: its clock has not
		// started. The offer's report brings the pass back.
		p.releaseWait[k] = offer{version: version}
		return true
	}
	ready := o.since.Add(pol.minReleaseAge)
	if !now.Before(ready) {
		return false
	}
	p.releaseWait[k] = o
	wake(&p.wake, ready)
	return true
}

// decideHalt fills in why the policy starts no node, and when its window
// opens or closes.
func (p *plan) decideHalt(snap *snapshot, pol *policy) {
	for _, sh := range sortedShadows(snap) {
		if updatesv1alpha1.Halting(sh.Annotations) && snap.owned(sh, pol.name) {
			p.haltedBy = append(p.haltedBy, sh.Name)
		}
	}
	p.windowOpen, p.windowChange = pol.windows.State(snap.now)
	if pol.invalid != "" {
		p.windowOpen, p.windowChange = false, time.Time{}
	}
	wake(&p.wake, p.windowChange)
	p.active[HaltInvalidSpec] = pol.invalid != ""
	p.active[HaltPaused] = pol.paused
	p.active[HaltUpdateFailed] = len(p.haltedBy) > 0
	p.active[HaltOutsideWindow] = pol.invalid == "" && !p.windowOpen
	for _, r := range append([]string{HaltInvalidSpec}, haltReasons...) {
		if p.active[r] {
			p.halt = r
			break
		}
	}
}

// budget is what the policy's limits are measured against: the nodes it
// counts (a percentage is of them) and those that take its slots, overall
// and by zone.
type budget struct {
	total, updating         int
	zoneTotal, zoneUpdating map[string]int
	// othersBusy: a node other than the operator's own takes a slot.
	othersBusy bool
	// isOther are the nodes out of service that are not the policy's
	// updates, with the signal that counts each; zoneOthers the same by
	// zone, in name order.
	isOther    map[string]string
	zoneOthers map[string][]string
}

// ownUpdates counts the nodes the policy governs and its updates in flight.
func ownUpdates(snap *snapshot, pol *policy) budget {
	b := budget{zoneTotal: map[string]int{}, zoneUpdating: map[string]int{}}
	for _, sh := range sortedShadows(snap) {
		n := snap.nodes[sh.Name]
		if snap.governor(sh.Name) == pol.name {
			b.total++
			b.zoneTotal[n.zone]++
		}
		if counts(sh) && !snap.scaledDown(sh) && snap.owned(sh, pol.name) {
			b.updating++
			b.zoneUpdating[n.zone]++
			if sh.Name != snap.ownNode {
				b.othersBusy = true
			}
		}
	}
	return b
}

// countOthers adds to the budget the selected nodes other tools take out of
// service, and lists them in the plan.
func (p *plan) countOthers(snap *snapshot, pol *policy, b *budget) {
	// One disruption budget across tools: the nodes the policy selects
	// that another tool (or, with countNotReady, a failure) takes out of
	// service count toward the same limits, each once, whatever its
	// signals. A node with our update in flight is ours, never also
	// another's: our own drain and reboot make it look leaving and not
	// ready.
	b.isOther = map[string]string{}
	b.zoneOthers = map[string][]string{}
	for _, sh := range sortedShadows(snap) {
		n, ok := snap.nodes[sh.Name]
		if !ok || !n.inScope || !slices.Contains(n.selectedBy, pol.name) || counts(sh) {
			continue
		}
		why, changes := n.leaving.Signal(snap.now, snap.lifecycleMaxAge)
		wake(&p.wake, changes)
		if why == "" && pol.countNotReady {
			why = n.notReady
		}
		if why == "" {
			continue
		}
		p.others = append(p.others, updatesv1alpha1.CountedNode{Name: sh.Name, Reason: why})
		b.isOther[sh.Name] = why
		b.zoneOthers[n.zone] = append(b.zoneOthers[n.zone], sh.Name)
		b.updating++
		b.zoneUpdating[n.zone]++
		// A percentage is of the selected nodes: a node being deleted is
		// governed no longer, but is still one of them.
		if snap.governor(sh.Name) != pol.name {
			b.total++
			b.zoneTotal[n.zone]++
		}
	}
}

// candidates are the Idle nodes the policy governs that would start but for
// the limits, the operator's own node last; the plan notes why each other
// one does not.
func (p *plan) candidates(snap *snapshot, pol *policy, isOther map[string]string) []candidate {
	var cands []candidate
	for _, sh := range sortedShadows(snap) {
		if snap.governor(sh.Name) != pol.name {
			continue
		}
		if sh.Spec.State != updatesv1alpha1.StateIdle || sh.Status.CurrentState != updatesv1alpha1.StateIdle || counts(sh) {
			continue
		}
		target := pol.targetVersion
		if target == "" {
			target = sh.Status.TargetVersion
		}
		if target == "" || sh.Status.CurrentVersion == "" {
			continue
		}
		if !p.olderThan(sh, target, pol.name) {
			continue
		}
		if rb := sh.Annotations[updatesv1alpha1.RollbackAnnotation]; rb != "" && brapi.SameVersion(rb, target) {
			// Never a second reboot into a version that failed its
			// health gate here: a resume does not lift this, a person
			// removing the annotation does.
			p.notes[sh.Name] = note{"UpdateBlocked", fmt.Sprintf("Not starting the update to %s: it failed its health gate on this node and was rolled back; `kubectl annotate brs %s %s-` allows it again",
				target, sh.Name, updatesv1alpha1.RollbackAnnotation)}
			continue
		}
		if until := backoffUntil(sh); until.After(snap.now) {
			wake(&p.wake, until)
			continue
		}
		if p.releaseHeld(snap.now, pol, target) {
			continue
		}
		n := snap.nodes[sh.Name]
		if why, ok := isOther[sh.Name]; ok {
			p.notes[sh.Name] = note{"UpdateBlocked", fmt.Sprintf("Not starting the update to %s: the node is out of service (%s) and takes a slot of UpdatePolicy %s",
				target, why, pol.name)}
			continue
		}
		if n.blocked != "" {
			p.notes[sh.Name] = note{"UpdateBlocked", fmt.Sprintf("Not starting the update to %s: %s", target, n.blocked)}
			continue
		}
		p.notes[sh.Name] = note{}
		cands = append(cands, candidate{name: sh.Name, zone: n.zone, version: target, own: sh.Name == snap.ownNode})
	}
	sort.SliceStable(cands, func(i, j int) bool { return !cands[i].own && cands[j].own })
	return cands
}

// olderThan reports whether the node runs a version older than target; when
// it does not, the plan notes why it is not updated (or forgets an earlier
// note once it runs the target).
func (p *plan) olderThan(sh *updatesv1alpha1.BottlerocketShadow, target, policyName string) bool {
	cmp, err := brapi.CompareVersions(sh.Status.CurrentVersion, target)
	if err != nil {
		p.notes[sh.Name] = note{"InvalidVersion", fmt.Sprintf("Cannot compare versions %q and %q: %v", sh.Status.CurrentVersion, target, err)}
		return false
	}
	if cmp == 0 {
		p.notes[sh.Name] = note{}
		return false
	}
	if cmp > 0 {
		p.notes[sh.Name] = note{"DowngradeRefused", fmt.Sprintf("Node runs %s, newer than the target %s of UpdatePolicy %s; it is never downgraded",
			sh.Status.CurrentVersion, target, policyName)}
		return false
	}
	return true
}

// admit starts the candidates, in order, while the budget has slots left
// and delayBetweenNodes has passed since the policy's last update passed
// its health gate.
func (p *plan) admit(now time.Time, pol *policy, b *budget, cands []candidate) {
	if until := pol.lastSucceeded.Add(pol.delayBetweenNodes); len(cands) > 0 && pol.delayBetweenNodes > 0 &&
		!pol.lastSucceeded.IsZero() && now.Before(until) {
		p.delayUntil = until
		wake(&p.wake, until)
		return
	}
	limit, _ := scaledLimit(pol.maxConcurrent, b.total)
	// waitTold: the first node that waits because others take slots is told
	// why, one Event per policy (per zone for the zone's limit), not one per
	// waiting node.
	waitTold := map[string]bool{}
	for i, cand := range cands {
		if cand.own && (b.othersBusy || i < len(cands)-1) {
			continue // the operator's own node waits until every other node is done
		}
		if b.updating >= limit {
			if len(p.others) > 0 {
				o := p.others[0]
				p.notes[cand.name] = note{"UpdateWaiting", fmt.Sprintf("Waiting for a slot: %d of the %d of UpdatePolicy %s (maxConcurrentUpdates) are taken by nodes out of service, such as %s (%s)",
					len(p.others), limit, pol.name, o.Name, o.Reason)}
			}
			break
		}
		if pol.maxConcurrentPerZone != nil && !p.zoneHasSlot(pol, b, cand.zone, cand.name, waitTold) {
			continue
		}
		// Last: a gate is read only for a start that would be made.
		if p.gateHolds(now, pol, cand.name, cand.version) {
			if p.blocked.message != "" {
				break // every start waits
			}
			continue // this node waits; the next may take the slot
		}
		p.starts = append(p.starts, startDecision{node: cand.name, version: cand.version})
		b.updating++
		b.zoneUpdating[cand.zone]++
		if !cand.own {
			b.othersBusy = true
		}
	}
}

// zoneHasSlot reports whether the zone's limit lets one more node start;
// when it does not, the first node of the zone that waits is told why.
func (p *plan) zoneHasSlot(pol *policy, b *budget, zone, name string, waitTold map[string]bool) bool {
	zl, _ := scaledLimit(*pol.maxConcurrentPerZone, b.zoneTotal[zone])
	if b.zoneUpdating[zone] < zl {
		return true
	}
	if zo := b.zoneOthers[zone]; len(zo) > 0 && !waitTold[zone] {
		waitTold[zone] = true
		p.notes[name] = note{"UpdateWaiting", fmt.Sprintf("Waiting for a slot in zone %q: %d of the %d of UpdatePolicy %s (maxConcurrentUpdatesPerZone) are taken by nodes out of service, such as %s (%s)",
			zone, len(zo), zl, pol.name, zo[0], b.isOther[zo[0]])}
	}
	return false
}

// conflictNotes are the Events about nodes that several policies select:
// they are never started. A node no policy selects is not started either,
// but gets no Event: that is the state of a fresh install (no policy until
// someone writes one), and thousands of Events would say nothing that
// "kubectl get upol" does not.
func conflictNotes(snap *snapshot) map[string]note {
	out := map[string]note{}
	for name, n := range snap.nodes {
		if n.managed && len(n.selectedBy) > 1 {
			out[name] = note{"UpdatePolicyConflict", fmt.Sprintf("UpdatePolicies %s all select this node; it is never started until exactly one does",
				strings.Join(n.selectedBy, ", "))}
		}
	}
	return out
}

func wake(at *time.Time, t time.Time) {
	if !t.IsZero() && (at.IsZero() || t.Before(*at)) {
		*at = t
	}
}

func sortedShadows(snap *snapshot) []*updatesv1alpha1.BottlerocketShadow {
	out := make([]*updatesv1alpha1.BottlerocketShadow, 0, len(snap.shadows))
	for _, s := range snap.shadows {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// conflictBeforeRename is the type SelectorConflict had until issue 36.
const conflictBeforeRename = "Conflict"

// policyStatus is the status the policy's nodes show: the counts, the nodes
// whose failure halts it and the conditions. Conditions keep their
// lastTransitionTime while their status holds, so a status computed again
// from an unchanged cluster equals the stored one and is not written.
func policyStatus(snap *snapshot, pol *policy, p plan, old *updatesv1alpha1.UpdatePolicyStatus) updatesv1alpha1.UpdatePolicyStatus {
	st := updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: pol.generation, HaltedBy: p.haltedBy, Others: int32(len(p.others))}
	if len(p.others) > 0 {
		st.OtherNodes = slices.Clone(p.others[:min(len(p.others), updatesv1alpha1.MaxOtherNodes)])
	}
	st.OfferedVersions = offeredVersions(p.offered)
	if !pol.lastSucceeded.IsZero() {
		st.LastUpdateSucceeded = &metav1.Time{Time: pol.lastSucceeded}
	}
	conflicts, others := countNodes(snap, pol, &st)
	conds := []metav1.Condition{}
	if old != nil {
		conds = append(conds, old.Conditions...)
	}
	for _, c := range []metav1.Condition{
		haltedCondition(pol.invalid, p.haltedBy, snap.shadows),
		pausedCondition(pol.paused),
		windowCondition(pol, p.windowOpen, p.windowChange),
		pacedCondition(pol, p),
		blockedCondition(p),
		completeCondition(&st),
		selectorConflictCondition(conflicts, others),
	} {
		c.ObservedGeneration = pol.generation
		setCondition(&conds, c, snap.now)
	}
	// An operator built from main before the rename wrote the same
	// condition as Conflict: no policy shows both.
	meta.RemoveStatusCondition(&conds, conflictBeforeRename)
	st.Conditions = conds
	return st
}

// countNodes fills st's node counts and returns the nodes other policies
// select too, with those policies' names.
func countNodes(snap *snapshot, pol *policy, st *updatesv1alpha1.UpdatePolicyStatus) (conflicts []string, others map[string]bool) {
	others = map[string]bool{} // the policies that select this one's nodes too
	for _, sh := range sortedShadows(snap) {
		n, ok := snap.nodes[sh.Name]
		if ok && n.managed && len(n.selectedBy) > 1 && slices.Contains(n.selectedBy, pol.name) {
			conflicts = append(conflicts, sh.Name)
			for _, s := range n.selectedBy {
				if s != pol.name {
					others[s] = true
				}
			}
		}
		governed := snap.governor(sh.Name) == pol.name
		owned := snap.owned(sh, pol.name)
		if !governed && !(owned && (counts(sh) || updatesv1alpha1.Halting(sh.Annotations))) {
			continue
		}
		st.Nodes++
		switch {
		case updatesv1alpha1.Halting(sh.Annotations):
			st.Failed++
		case counts(sh) && !snap.scaledDown(sh):
			st.InFlight++
		case upToDate(sh, pol):
			st.UpToDate++
		default:
			st.Waiting++
		}
	}
	return conflicts, others
}

// condition is a True or False condition without its generation and time,
// which policyStatus sets on every one.
func condition(t string, status bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

func haltedCondition(invalid string, haltedBy []string, shadows map[string]*updatesv1alpha1.BottlerocketShadow) metav1.Condition {
	switch {
	case invalid != "":
		return condition(updatesv1alpha1.PolicyHalted, true, HaltInvalidSpec, invalid)
	case len(haltedBy) > 0:
		var why []string
		for _, n := range haltedBy {
			why = append(why, fmt.Sprintf("%s (%s)", n, shadows[n].Annotations[updatesv1alpha1.FailureReasonAnnotation]))
		}
		return condition(updatesv1alpha1.PolicyHalted, true, HaltUpdateFailed, fmt.Sprintf("Failed updates halt the policy: %s; resume with `kubectl nodehealth update resume NODE`",
			strings.Join(why, "; ")))
	default:
		return condition(updatesv1alpha1.PolicyHalted, false, "NoFailure", "No failure halts the policy")
	}
}

func pausedCondition(paused bool) metav1.Condition {
	if paused {
		return condition(updatesv1alpha1.PolicyPaused, true, "Paused", "spec.paused is true: no node starts; nodes in flight finish")
	}
	return condition(updatesv1alpha1.PolicyPaused, false, "NotPaused", "spec.paused is false")
}

// windowCondition is Unknown while the spec cannot say whether a window is
// open, so neither value misleads.
func windowCondition(pol *policy, open bool, change time.Time) metav1.Condition {
	switch {
	case pol.badTimeZone:
		return metav1.Condition{Type: updatesv1alpha1.PolicyWindowOpen, Status: metav1.ConditionUnknown, Reason: "UnknownTimeZone", Message: pol.invalid}
	case pol.invalid != "":
		return metav1.Condition{Type: updatesv1alpha1.PolicyWindowOpen, Status: metav1.ConditionUnknown, Reason: HaltInvalidSpec, Message: pol.invalid}
	case len(pol.windows) == 0:
		return condition(updatesv1alpha1.PolicyWindowOpen, true, "NoWindows", "No update windows: always open")
	case open:
		return condition(updatesv1alpha1.PolicyWindowOpen, true, "InWindow", "An update window is open until "+change.UTC().Format(time.RFC3339))
	default:
		return condition(updatesv1alpha1.PolicyWindowOpen, false, "OutsideWindow", "The next update window opens at "+change.UTC().Format(time.RFC3339))
	}
}

// offeredVersions is the status's record of the offers, in version order;
// past MaxOfferedVersions the ones first offered longest ago are dropped.
func offeredVersions(offered map[string]offer) []updatesv1alpha1.OfferedVersion {
	if len(offered) == 0 {
		return nil
	}
	out := make([]updatesv1alpha1.OfferedVersion, 0, len(offered))
	for _, o := range offered {
		out = append(out, updatesv1alpha1.OfferedVersion{Version: o.version, FirstOffered: metav1.NewTime(o.since)})
	}
	if len(out) > updatesv1alpha1.MaxOfferedVersions {
		sort.Slice(out, func(i, j int) bool { return out[i].FirstOffered.After(out[j].FirstOffered.Time) })
		out = out[:updatesv1alpha1.MaxOfferedVersions]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// pacedCondition says what pacing holds back, in absolute times: the
// message changes only when a record does, so a waiting policy's status is
// not written again every pass.
func pacedCondition(pol *policy, p plan) metav1.Condition {
	if !p.delayUntil.IsZero() {
		return condition(updatesv1alpha1.PolicyPaced, true, "DelayBetweenNodes", fmt.Sprintf("Waiting between nodes: the last update of this policy passed its health gate at %s; the next start waits until %s (delayBetweenNodes %s)",
			pol.lastSucceeded.UTC().Format(time.RFC3339), p.delayUntil.UTC().Format(time.RFC3339), pol.delayBetweenNodes))
	}
	if len(p.releaseWait) == 0 {
		return condition(updatesv1alpha1.PolicyPaced, false, "NotPaced", "Neither minReleaseAge nor delayBetweenNodes holds back a start")
	}
	var why []string
	for _, k := range slices.Sorted(maps.Keys(p.releaseWait)) {
		o := p.releaseWait[k]
		if o.since.IsZero() {
			why = append(why, fmt.Sprintf("%s is not offered to any node of this policy yet", o.version))
			continue
		}
		why = append(why, fmt.Sprintf("%s first offered at %s, rolls out from %s", o.version,
			o.since.UTC().Format(time.RFC3339), o.since.Add(pol.minReleaseAge).UTC().Format(time.RFC3339)))
	}
	return condition(updatesv1alpha1.PolicyPaced, true, "ReleaseAge", fmt.Sprintf("Waiting for release age (minReleaseAge %s): %s",
		pol.minReleaseAge, strings.Join(why, "; ")))
}

func completeCondition(st *updatesv1alpha1.UpdatePolicyStatus) metav1.Condition {
	if st.Nodes > 0 && st.UpToDate == st.Nodes {
		return condition(updatesv1alpha1.PolicyComplete, true, "AllUpToDate", fmt.Sprintf("All %d nodes run the target version", st.Nodes))
	}
	return condition(updatesv1alpha1.PolicyComplete, false, "Progressing",
		fmt.Sprintf("%d of %d nodes run the target version (%d in flight, %d failed, %d waiting)", st.UpToDate, st.Nodes, st.InFlight, st.Failed, st.Waiting))
}

func selectorConflictCondition(conflicts []string, others map[string]bool) metav1.Condition {
	if len(conflicts) == 0 {
		return condition(updatesv1alpha1.PolicySelectorConflict, false, "NoConflict", "No other policy selects this policy's nodes")
	}
	// Naming the other policies tells, from either side, what to edit.
	names := slices.Sorted(maps.Keys(others))
	what := "UpdatePolicy " + names[0] + " selects"
	if len(names) > 1 {
		what = "UpdatePolicies " + strings.Join(names, ", ") + " select"
	}
	return condition(updatesv1alpha1.PolicySelectorConflict, true, "NodesSelectedTwice", fmt.Sprintf("%s these nodes too; they are never started until exactly one policy selects each: %s",
		what, strings.Join(conflicts, ", ")))
}

// upToDate reports whether an Idle node runs the policy's target: the pin,
// or the version it is offered. A node newer than the pin counts as up to
// date (it is never downgraded); one with nothing offered too.
func upToDate(sh *updatesv1alpha1.BottlerocketShadow, pol *policy) bool {
	if sh.Status.CurrentVersion == "" {
		return false
	}
	target := pol.targetVersion
	if target == "" {
		target = sh.Status.TargetVersion
	}
	if target == "" {
		return true
	}
	cmp, err := brapi.CompareVersions(sh.Status.CurrentVersion, target)
	return err == nil && cmp >= 0
}

// setCondition is meta.SetStatusCondition with the operator's clock: the
// transition time moves only when the status does.
func setCondition(conds *[]metav1.Condition, c metav1.Condition, now time.Time) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status == c.Status {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.NewTime(now)
			}
			(*conds)[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.NewTime(now)
	*conds = append(*conds, c)
}
