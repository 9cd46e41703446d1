package model

import (
	"fmt"
	"slices"
	"testing"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

const (
	registered        = nodev1alpha1.ReasonNodeRegistered
	rebootedReason    = nodev1alpha1.ReasonNodeRebooted
	recreatedReason   = nodev1alpha1.ReasonNodeRecreated
	controllerStarted = nodev1alpha1.ReasonControllerStarted
	notReady          = nodev1alpha1.ReasonExtensionsNotReady
	plannedReason     = nodev1alpha1.ReasonPlannedMaintenance
	startupTimeout    = nodev1alpha1.ReasonStartupTimeout
)

// --- Bootstrap, expiry, scope ------------------------------------------------

func TestANewNodeIsGatedUntilEveryExtensionRenewsAfterItAppeared(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	st.renew(1*sec, "n1/a") // a Lease from before the node: it must not count
	st.add(2*sec, worker("n1", gating("a"), gating("b")))
	st.expect("new node", gated(registered, ""), "n1")
	st.renew(3*sec, "n1/b")
	st.expect("only b renewed since the node appeared", gated(registered, ""), "n1")
	st.renew(4*sec, "n1/a")
	st.expect("both renewed", ready(boot1), "n1")
}

func TestAnExpiredLeaseReTaintsTheNodeAndOnlyTheFailedExtensionMustRenew(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a"), gating("b")))
	st.renew(30*sec, "n1/b") // b stays ready until 80 s
	st.advance(49 * sec)
	st.expect("a silent for 49 s", ready(boot1), "n1")
	st.advance(50 * sec)
	st.expect("a silent for 50 s (40 s + 10 s grace)", gated(notReady, boot1), "n1")
	st.renew(55*sec, "n1/a")
	st.expect("a renewed; b never stopped renewing and need not renew again", ready(boot1), "n1")
}

// A Lease's expiry counts once the view's horizon is past it too: the
// renewTime of the last new canary renewal observed. Up to then the Lease's
// renewal may be on its way unseen, however recently the canary was
// observed; a renewal written at or after the expiry vouches for it. A view
// that goes stale judges by the clock, and holds.
func TestALeaseExpiryCountsOnceTheViewsHorizonIsPastIt(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")))
	st.vouch = false
	st.m.CanaryRenewed(st.to(45*sec), at(45*sec))
	st.advance(52 * sec)
	st.expect("a silent for 52 s, the horizon at 45 s", ready(boot1), "n1", "n2")
	st.m.CanaryRenewed(st.to(53*sec), at(49*sec))
	st.expect("a canary renewal written at 49 s does not vouch for 50 s", ready(boot1), "n1", "n2")
	st.m.CanaryRenewed(st.to(54*sec), at(54*sec))
	st.expect("a canary renewal written at 54 s does", gated(notReady, boot1), "n1", "n2")

	st = newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.vouch = false
	st.m.CanaryRenewed(st.to(45*sec), at(45*sec))
	st.advance(55 * sec)
	st.expect("silent for 55 s, horizon at 45 s", ready(boot1), "n1")
	st.stale(60 * sec)
	st.expect("the view stale: judged by the clock, and held", held(boot1), "n1")
	st.recover(64 * sec)
	st.expect("ready as of the horizon when the view went stale: the recovery's grace", ready(boot1), "n1")
}

// The controller queues the nodes a move of the view's horizon concerns, and
// a node's sync takes together the move and what of its own was delivered
// before the sync began (the driver says which nodes: HorizonReachesLater).
// A renewal the sync took with the move is no renewal in a gate's instant:
// no gate began (seed 17374736721536902828).
func TestANodeWhoseSyncTakesTheHorizonsMoveWithItsOwnRenewalIsNotGated(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")))
	st.vouch = false
	st.m.CanaryRenewed(st.to(45*sec), at(45*sec))
	st.advance(54 * sec)
	st.m.HorizonReachesLater("n1")
	st.m.CanaryRenewed(st.to(54*sec), at(54*sec))
	st.expect("the move reached n2 at once", gated(notReady, boot1), "n2")
	st.expect("n1 is judged on the horizon at 45 s until its sync", ready(boot1), "n1")
	st.renew(54*sec, "n1/a", "n2/a")
	st.m.HorizonReaches(st.to(54*sec), "n1")
	st.expect("n1's sync took the move after its renewal", ready(boot1), "n1")
	st.expect("n2's renewal in its gate's instant does not end the gate", gated(notReady, boot1), "n2")
	st.renew(55*sec, "n2/a")
	st.expect("n2's next renewal does", ready(boot1), "n2")

	st = newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.vouch = false
	st.m.CanaryRenewed(st.to(45*sec), at(45*sec))
	st.advance(54 * sec)
	st.m.HorizonReachesLater("n1")
	st.m.CanaryRenewed(st.to(54*sec), at(54*sec))
	st.m.HorizonReachesLater("n1")
	st.m.CanaryRenewed(st.to(54*sec), at(54*sec).Add(time.Millisecond))
	st.expect("two moves before n1's sync: still the horizon at 45 s", ready(boot1), "n1")
	st.m.HorizonReaches(st.to(54*sec), "n1")
	st.expect("its sync takes both moves", gated(notReady, boot1), "n1")
}

// The blast radius counts every node's Leases at the latest horizon,
// also those of a node whose sync has not taken the move yet: the
// controller recounts them so before it taints a node for a failure (seeds
// 3152080200983510809 and 11558201572992610440).
func TestTheBlastRadiusCountsTheHorizonsMoveForNodesWhoseSyncHasNotTakenIt(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.vouch = false
	st.keep(leasesOf("kube-proxy", "n4", "n5", "n6")...)
	st.run(40 * sec)
	st.m.CanaryRenewed(st.to(45*sec), at(45*sec))
	st.run(54 * sec)
	st.expect("n1–n3 silent for 54 s, the horizon at 45 s", ready(boot1), "n1", "n2", "n3")
	st.m.HorizonReachesLater("n1")
	st.m.HorizonReachesLater("n2")
	st.m.CanaryRenewed(st.to(54*sec), at(54*sec))
	st.expectSuspended("three of six fail at the new horizon", "", true)
	st.expect("n3's failure is held", held(boot1), "n3")
	st.expect("n1 and n2 wait for their syncs", ready(boot1), "n1", "n2")
	st.m.HorizonReaches(st.to(55*sec), "n1")
	st.m.HorizonReaches(st.to(55*sec), "n2")
	st.advance(55 * sec)
	st.expectHeld("their syncs hold them too", "n1", "n2", "n3")
}

func TestAShortLeaseCountsAsTheMinimumDuration(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.m.LeaseRenewed(at(1*sec), "n1", "a", 2*sec) // counts as 10 s + 10 s grace
	st.advance(20 * sec)
	st.expect("19 s after a 2 s Lease's renewal", ready(boot1), "n1")
	st.advance(21 * sec)
	st.expect("20 s after", gated(notReady, boot1), "n1")
}

func TestAFullGateNeedsEveryExtensionToRenewAfterARebootDuringAFailureGate(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a"), gating("b")))
	st.release(10*sec, "n1/a", "Crashed")
	st.expect("a released", gated(notReady, boot1), "n1")
	st.renew(12*sec, "n1/b")
	rebooted := worker("n1", gating("a"), gating("b"))
	rebooted.BootID = "boot2"
	st.update(15*sec, rebooted)
	st.expect("rebooted during the failure gate", gated(rebootedReason, boot1), "n1")
	st.renew(20*sec, "n1/a")
	st.expect("b renewed only before the reboot", gated(rebootedReason, boot1), "n1")
	st.renew(25*sec, "n1/b")
	st.expect("both renewed after the reboot", ready(boot2), "n1")
}

func TestAKubeletRestartIsNotAReboot(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	same := worker("n1", gating("a"))
	same.Zone = "z1"
	st.update(5*sec, same)
	st.expect("same bootID", ready(boot1), "n1")
	unknown := same
	unknown.BootID = ""
	st.update(6*sec, unknown)
	st.update(7*sec, same)
	st.expect("bootID unknown for a while, then the recorded one", ready(boot1), "n1")
}

func TestAReCreatedNodeIsGatedWithFullScope(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	again := worker("n1", gating("a"))
	again.UID = "uid-n1-again"
	st.update(10*sec, again)
	// The new object carries no boot record: it was created afresh.
	st.expect("new UID", gated(recreatedReason, ""), "n1")
	st.renew(11*sec, "n1/a")
	st.expect("renewed", ready("boot1/uid-n1-again"), "n1")
}

// The condition names the extensions that do not gate in a list of their
// own, whatever its status: an unplanned release of a tracking extension is
// named there and never in the gating list, and a planned one gates.
func TestAnExtensionThatDoesNotGateIsNamedNotReadyInTheInformationalList(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(5*sec, "n1/updater", "Crashed")
	st.expect("an unplanned release of a tracking extension never gates", ready(boot1), "n1")
	if got := st.m.Informational("n1"); !slices.Equal(got, []string{"updater"}) {
		t.Errorf("informational list %v, want [updater]", got)
	}
	if got := st.m.NotReady("n1"); len(got) > 0 {
		t.Errorf("gating list %v of a True condition, want none", got)
	}
	st.renew(6*sec, "n1/updater")
	st.release(10*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("planned release", gated(plannedReason, boot1), "n1")
	if got, gating := st.m.Informational("n1"), st.m.NotReady("n1"); len(got) > 0 || !slices.Equal(gating, []string{"updater"}) {
		t.Errorf("informational list %v and gating list %v of a planned release, want the updater in the gating list only", got, gating)
	}
}

// --- Planned releases -----------------------------------------------------

func TestAPlannedReleaseGatesEvenForAnExtensionThatDoesNotAffectReadiness(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(5*sec, "n1/updater", "Crashed")
	st.expect("an unplanned release of a tracking extension never gates", ready(boot1), "n1")
	st.renew(6*sec, "n1/updater")
	st.release(10*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("planned release", gated(plannedReason, boot1), "n1")
	st.renewEvery(10*sec, 10*minute, 10*sec, "n1/kube-proxy")
	st.expect("planned for 10 minutes: never escalated", gated(plannedReason, boot1), "n1")
	st.renew(10*minute+1*sec, "n1/updater")
	st.expect("the updater renewed", ready(boot1), "n1")
}

func TestAPlannedReleaseMakesTheOtherFailuresPlannedAndGatesOnlyInTheBootItWasMadeIn(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(10*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.advance(50 * sec) // kube-proxy expires while the node is drained
	st.expect("kube-proxy expired during the update", gated(plannedReason, boot1), "n1")
	st.advance(10 * minute)
	st.expect("its failure is planned too: no eviction", gated(plannedReason, boot1), "n1")
	rebooted := worker("n1", gating("kube-proxy"), tracking("updater"))
	rebooted.BootID = "boot2"
	st.update(10*minute+5*sec, rebooted)
	st.expect("rebooted", gated(rebootedReason, boot1), "n1")
	st.renew(10*minute+30*sec, "n1/kube-proxy")
	st.expect("the release of the previous boot no longer gates", ready(boot2), "n1")
}

func TestAReleasedLeaseWhoseReasonTurnsToUpdatingAfterARebootIsPlannedInTheNewBoot(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(5*sec, "n1/updater", "Crashed")
	rebooted := worker("n1", gating("kube-proxy"), tracking("updater"))
	rebooted.BootID = "boot2"
	st.update(10*sec, rebooted)
	st.renew(20*sec, "n1/kube-proxy")
	st.expect("the unplanned release never gated", ready(boot2), "n1")
	// The updater renewed and released again for an update, unseen: the
	// controller reads only the new reason on a Lease still released.
	st.release(30*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("a request for maintenance made in the new boot", gated(plannedReason, boot2), "n1")
	st.release(40*sec, "n1/updater", "Crashed")
	st.release(50*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("still the request of this boot", gated(plannedReason, boot2), "n1")
	again := worker("n1", gating("kube-proxy"), tracking("updater"))
	again.BootID = "boot3"
	st.update(60*sec, again)
	st.renew(70*sec, "n1/kube-proxy")
	st.release(80*sec, "n1/updater", "Crashed")
	st.release(90*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("the Lease was not renewed since its request of the previous boot", ready("boot3/uid-%s"), "n1")
}

func TestAReasonTurningToUpdatingOnALeaseReleasedForADeletedNodeDoesNotGateItsSuccessor(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(5*sec, "n1/updater", "Crashed")
	st.m.NodeDeleted(st.to(10*sec), "n1")
	st.add(20*sec, worker("n1", gating("kube-proxy"), tracking("updater")))
	st.renew(30*sec, "n1/kube-proxy")
	st.expect("the new Node is registered", ready(boot1), "n1")
	st.release(40*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("the release was made for the deleted Node", ready(boot1), "n1")
}

// A release for an update observed in the very instant a new Node of its
// name is first seen belongs to that Node, whichever came first: the
// controller compares instants of its clock and cannot tell. The new Node
// waits for the updater's renewal as well. One observed a second earlier
// was made for the deleted Node, and gates nothing of its successor.
func TestAReleaseForAnUpdateInTheInstantANodeIsReplacedBelongsToTheNewNode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		releaseAt time.Duration
		want      NodeView
	}{
		{"released in the replacement's instant", 10 * sec, gated(registered, "")},
		{"released a second before", 9 * sec, ready(boot1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStory(t, defaultConfig())
			st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
			st.release(tc.releaseAt, "n1/updater", nodev1alpha1.ReasonUpdating)
			st.m.NodeDeleted(st.to(10*sec), "n1")
			st.add(10*sec, worker("n1", gating("kube-proxy"), tracking("updater")))
			st.renew(15*sec, "n1/kube-proxy")
			st.expect("kube-proxy renewed on the new Node", tc.want, "n1")
		})
	}
}

// A release for an update observed in the very instant a reboot is first
// seen belongs to the new boot, as one seen with a new Node does (seed
// 14456852777927726137: a watch outage hid both). One observed a second
// earlier was made in the boot before, and gates nothing of the new one.
func TestAReleaseForAnUpdateInTheInstantOfARebootBelongsToTheNewBoot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		releaseAt time.Duration
		want      NodeView
	}{
		{"released in the reboot's instant", 10 * sec, gated(rebootedReason, boot1)},
		{"released a second before", 9 * sec, ready(boot2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStory(t, defaultConfig())
			st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
			st.release(tc.releaseAt, "n1/updater", nodev1alpha1.ReasonUpdating)
			rebooted := worker("n1", gating("kube-proxy"), tracking("updater"))
			rebooted.BootID = "boot2"
			st.update(10*sec, rebooted)
			st.renew(15*sec, "n1/kube-proxy")
			st.expect("kube-proxy renewed in the new boot", tc.want, "n1")
		})
	}
}

func TestPlannedFailuresDoNotCountTowardTheBlastRadius(t *testing.T) {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	st := newStory(t, cfg)
	var nodes []Node
	for _, n := range names(4) {
		nodes = append(nodes, worker(n, gating("kube-proxy"), tracking("updater")))
	}
	st.inService(nodes...)
	for _, n := range names(3) {
		st.release(1*sec, n+"/updater", nodev1alpha1.ReasonUpdating)
	}
	st.expect("three planned releases", gated(plannedReason, boot1), "n1", "n2", "n3")
	st.expectSuspended("planned", "", false)
}

// --- Blast radius -----------------------------------------------------------

func sixNodes(st *story) {
	var nodes []Node
	for _, n := range names(6) {
		nodes = append(nodes, worker(n, gating("kube-proxy")))
	}
	st.inService(nodes...)
}

// sixNodesAtHalf is sixNodes under a cluster threshold of 50 %.
func sixNodesAtHalf(t *testing.T) *story {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	st := newStory(t, cfg)
	sixNodes(st)
	return st
}

func TestBlastRadiusAtHalfOfSixNodesTaintsTwoHoldsTwoAndACanaryBlipChangesNothing(t *testing.T) {
	st := sixNodesAtHalf(t)
	// n1, n2 go silent at once, n3, n4 20 s later; n5, n6 keep renewing.
	st.keep(leasesOf("kube-proxy", "n3", "n4", "n5", "n6")...)
	st.run(20 * sec)
	st.drop(leasesOf("kube-proxy", "n3", "n4")...)
	st.run(50 * sec)
	st.expect("two fail: at most 2, tainted", gated(notReady, boot1), "n1", "n2")
	st.expectSuspended("two fail", "", false)
	st.run(70 * sec)
	st.expect("four fail (67 %): suspended", held(boot1), "n3", "n4")
	st.expect("those tainted before stay tainted", gated(notReady, boot1), "n1", "n2")
	st.expect("healthy", ready(boot1), "n5", "n6")
	st.expectHeld("four fail", "n3", "n4")
	st.expectSuspended("four fail", "", true)

	st.run(75 * sec)
	st.stale(75 * sec) // a 20 s canary blip; n5, n6's renewals are not seen
	st.recover(95 * sec)
	st.expect("after the blip", held(boot1), "n3", "n4")
	st.expect("after the blip", gated(notReady, boot1), "n1", "n2")
	st.run(140 * sec)
	st.expect("well after the blip", held(boot1), "n3", "n4")
	st.expectHeld("well after the blip", "n3", "n4")

	st.renew(141*sec, "n3/kube-proxy")
	st.expect("three fail (50 % ≥ 45 %): still suspended", held(boot1), "n4")
	st.renew(142*sec, "n1/kube-proxy")
	st.expect("n1 recovered", ready(boot1), "n1", "n3")
	st.expect("two fail: resumed, the held node is judged afresh", gated(notReady, boot1), "n2", "n4")
	st.expectHeld("resumed")
	st.expectSuspended("resumed", "", false)
}

// A hold is judged on Leases that show no renewal, so a renewal observed in
// the very instant a node's hold began came after it: it ends the gate the
// lift opens, whether the lift came before or after it in that instant.
// A gate begun by a taint in that instant keeps the strict rule.
func TestARenewalInTheInstantAHoldBeganEndsTheGateTheLiftOpens(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n6")...)
	st.run(20 * sec)
	for _, n := range names(5) {
		st.release(21*sec, n+"/kube-proxy", "Crash")
	}
	st.expect("two fail: tainted", gated(notReady, boot1), "n1", "n2")
	st.expectHeld("five fail", "n3", "n4", "n5")
	st.renew(21*sec, "n5/kube-proxy")
	st.expectSuspended("four fail", "", true)
	st.expect("n5's renewal before the lift, in its hold's instant", ready(boot1), "n5")
	st.renew(21*sec, "n1/kube-proxy", "n2/kube-proxy")
	st.expectSuspended("two fail", "", false)
	st.expect("judged at the lift: still failing", gated(notReady, boot1), "n3", "n4")
	st.renew(21*sec, "n3/kube-proxy", "n4/kube-proxy")
	st.expect("renewed after the lift, in their holds' instant", ready(boot1), "n3", "n4")
	st.expect("tainted in this instant: a renewal in it does not count", gated(notReady, boot1), "n1", "n2")
	st.renew(22*sec, "n1/kube-proxy", "n2/kube-proxy")
	st.expect("renewed after the gate began", ready(boot1), "n1", "n2")
}

// The own view's recovery restarts a gate at the recovery: that is no hold,
// and the grace the recovery gives a Lease is no renewal in its instant,
// whatever began the gate (simulation seed 16796596741113341386: a gate
// begun held kept counting a renewal in its start's instant after the
// recovery moved the start, and the grace ended it).
func TestARecoveryRestartsAGateBegunHeldWithTheStrictRule(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.renew(20*sec, "n3/b") // b's Lease, not yet listed
	for _, n := range names(3) {
		st.release(21*sec, n+"/kube-proxy", "Crash")
	}
	st.expectHeld("three fail", "n3")
	st.renew(25*sec, "n1/kube-proxy")
	st.expect("two fail: lifted, n3 judged", gated(notReady, boot1), "n3")
	// b is listed during the gate: in its scope, not renewed since it began.
	st.update(26*sec, worker("n3", gating("kube-proxy"), gating("b")))
	st.renew(27*sec, "n3/kube-proxy")
	st.expect("b has not renewed since the gate began", gated(notReady, boot1), "n3")
	st.stale(30 * sec)
	st.recover(40 * sec)
	st.expect("the recovery restarts the gate: the grace renews nothing", gated(notReady, boot1), "n3")
	st.renew(41*sec, "n3/kube-proxy", "n3/b")
	st.expect("renewed after the restart", ready(boot1), "n3")
}

// What a held node's gate waits for is judged at the lift: an extension
// that renews in the lift's instant is not in the gate's scope, whether its
// renewal came before the lift (n4) or after it (n3). The scope shows once
// an own-view recovery restarts the gate keeping it (simulation seed
// 15330235846551453348: the model opened n6's gate at the lift and kept
// kube-proxy, renewed after it, in its scope; the controller, whose sync
// came after the renewal, did not).
func TestAHeldNodesGateWaitsForWhatFailsAtTheLiftWhicheverOrderItsInstantTook(t *testing.T) {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	st := newStory(t, cfg)
	var nodes []Node
	for _, n := range names(6) {
		nodes = append(nodes, worker(n, gating("cni"), gating("kube-proxy")))
	}
	st.inService(nodes...)
	for _, n := range names(4) {
		st.release(21*sec, n+"/kube-proxy", "Crash")
	}
	st.release(21*sec, "n3/cni", "Crash")
	st.release(21*sec, "n4/cni", "Crash")
	st.expect("two fail: tainted", gated(notReady, boot1), "n1", "n2")
	st.expectHeld("four fail", "n3", "n4")
	st.renew(22*sec, "n4/kube-proxy")
	st.renew(22*sec, "n1/kube-proxy", "n2/kube-proxy")
	st.expectSuspended("two fail", "", false)
	st.renew(22*sec, "n3/kube-proxy")
	st.expect("cni still fails", gated(notReady, boot1), "n3", "n4")
	st.stale(30 * sec)
	st.recover(40 * sec)
	st.expect("the recovery restarts the gates", gated(notReady, boot1), "n3", "n4")
	st.renew(41*sec, "n3/cni", "n4/cni")
	st.expect("cni, all that failed at the lift, renewed after the restart", ready(boot1), "n3", "n4")
}

func TestFailuresThatComeDueTogetherAreAllCountedBeforeAnyIsTainted(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n5", "n6")...)
	st.run(60 * sec) // n1..n4 all expired at 50 s
	st.expect("four expired together", held(boot1), "n1", "n2", "n3", "n4")
	st.expectHeld("four expired together", "n1", "n2", "n3", "n4")
}

func TestAZoneThresholdSuspendsOnlyThatZone(t *testing.T) {
	cfg := defaultConfig()
	cfg.ZoneThreshold = 0.5
	st := newStory(t, cfg)
	var nodes []Node
	for i, n := range names(8) {
		w := worker(n, gating("kube-proxy"))
		w.Zone = []string{"a", "b"}[i/4]
		nodes = append(nodes, w)
	}
	st.inService(nodes...)
	st.keep(leasesOf("kube-proxy", "n4", "n6", "n7", "n8")...)
	st.run(50 * sec) // n1..n3 (zone a) and n5 (zone b) expire
	st.expect("three of four in zone a", held(boot1), "n1", "n2", "n3")
	st.expect("one in zone b", gated(notReady, boot1), "n5")
	st.expectSuspended("zone a", "a", true)
	st.expectSuspended("zone b", "b", false)
	st.expectSuspended("cluster", "", false)
}

// --- Own view ---------------------------------------------------------------

func TestAnOwnViewStallLongerThanALeaseDurationPlusGraceEndsWithNoTaint(t *testing.T) {
	cfg := defaultConfig()
	cfg.EvictionTimeout = 1 * minute
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	st.release(5*sec, "n3/a", "Crashed") // failing before the stall
	st.renew(10*sec, "n1/a", "n2/a")
	st.stale(20 * sec)
	st.advance(2*minute + 20*sec) // no renewal seen for 2m10s
	st.expect("during the stall", held(boot1), "n1", "n2")
	st.expect("during the stall", gated(notReady, boot1), "n3")
	st.expectSuspended("during the stall", "", true)
	st.recover(2*minute + 20*sec)
	st.expect("recovered: the Leases ready when the view went stale get a full grace", ready(boot1), "n1", "n2")
	st.expect("recovered: a Lease released before stays released", gated(notReady, boot1), "n3")
	st.renew(3*minute, "n1/a", "n2/a") // within 50 s of the recovery
	st.advance(3*minute + 4*sec)
	st.expect("n3's clock: 15 s before the stall + 44 s after", gated(notReady, boot1), "n3")
	st.advance(3*minute + 5*sec)
	st.expect("n3's clock reaches 1 m", evicted(gated(notReady, boot1)), "n3")
	st.keep("n1/a", "n2/a")
	st.run(5 * minute)
	st.expect("no taint, no eviction", ready(boot1), "n1", "n2")
}

func TestABootstrapSeenWhileTheOwnViewIsStaleGatesWhenTheGuardLifts(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.stale(10 * sec)
	rebooted := worker("n1", gating("a"))
	rebooted.BootID = "boot2"
	st.update(15*sec, rebooted)
	st.add(16*sec, worker("n2", gating("a")))
	st.expect("reboot and new node while stale", held(boot1), "n1")
	st.expect("reboot and new node while stale", held(""), "n2")
	st.expectHeld("stale", "n1", "n2")
	st.renew(20*sec, "n1/a", "n2/a") // seen during the stale view
	st.recover(30 * sec)
	st.expect("guard lifted: pending reboot gates", gated(rebootedReason, boot1), "n1")
	st.expect("guard lifted: pending registration gates", gated(registered, ""), "n2")
	st.renew(35*sec, "n1/a", "n2/a")
	st.expect("renewed after the lift", ready(boot2), "n1")
	st.expect("renewed after the lift", ready(boot1), "n2")
}

func TestOwnViewRecoveryGivesTaintedNodesANewGateStart(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	st.add(0, worker("n1", gating("a"), gating("b")))
	st.renew(2*sec, "n1/a")
	st.stale(5 * sec)
	st.recover(10 * sec)
	st.renew(12*sec, "n1/b")
	st.expect("a renewed only before the recovery", gated(registered, ""), "n1")
	st.renew(14*sec, "n1/a")
	st.expect("both renewed after the recovery", ready(boot1), "n1")
}

// A failure taint decided while the API server refuses the controller's
// writes is not on the node; decided again when the writes are taken, under
// the own-view guard that fired meanwhile, the node is held, never tainted,
// and judged afresh at the lift.
// An ungate whose removal the API server refuses leaves the taint on the
// Node: a failure judged before the writes are taken again, with no guard
// holding, is gated with that taint and needs no write, so a guard that
// fires afterwards does not hold it (seed 18207859432137299208).
func TestAGateDecidedOnATaintWhoseRemovalWasRefusedKeepsIt(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	st.release(5*sec, "n1/a", "Crashed")
	st.expect("failed", gated(notReady, boot1), "n1")
	st.writes(6*sec, true)
	st.renew(7*sec, "n1/a")
	st.release(8*sec, "n1/a", "Crashed")
	st.expect("failed again: the taint is still there", gated(notReady, boot1), "n1")
	st.stale(9 * sec)
	st.writes(10*sec, false)
	st.expect("a guard that fired since does not hold it", gated(notReady, boot1), "n1")
	st.expectHeld("a guard that fired since")
}

func TestAFailureTaintARefusedWriteLostIsHeldByAGuardThatFiredMeanwhile(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	st.writes(5*sec, true)
	st.release(6*sec, "n1/a", "Crashed")
	st.stale(8 * sec)
	st.writes(9*sec, false)
	st.expect("writes taken under the guard", held(boot1), "n1")
	st.expectHeld("writes taken under the guard", "n1")
	st.recover(20 * sec)
	st.expect("guard lifted, still released", gated(notReady, boot1), "n1")
	st.renew(25*sec, "n1/a")
	st.expect("renewed", ready(boot1), "n1")
}

func TestUntaintsContinueWhileTheOwnViewIsStale(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	st.add(0, worker("n1", gating("a")))
	st.stale(5 * sec)
	st.renew(6*sec, "n1/a")
	st.expect("ungated while stale", ready(boot1), "n1")
}

// --- Escalation -------------------------------------------------------------

func TestTheEvictionClockPausesAcrossTwoBlipsAndEvictsAtTheRightInstant(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", "Crashed") // the clock starts at 10 s
	st.stale(1 * minute)
	st.recover(1*minute + 20*sec)
	st.stale(3 * minute)
	st.recover(3*minute + 20*sec)
	st.advance(5*minute + 49*sec)
	st.expect("5 m counted at 5m50s, not before", gated(notReady, boot1), "n1")
	st.advance(5*minute + 50*sec)
	st.expect("5 m counted", evicted(gated(notReady, boot1)), "n1")
	st.advance(7 * minute)
	st.expect("stays evicted while failing", evicted(gated(notReady, boot1)), "n1")
	st.renew(7*minute+1*sec, "n1/a")
	st.expect("ungated: the failure is over", ready(boot1), "n1")
}

func TestAHeldNodeCountsNoTimeAndAPausedClockContinuesWhenTheSuspensionEnds(t *testing.T) {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	cfg.EvictionTimeout = 2 * minute
	st := newStory(t, cfg)
	sixNodes(st)
	st.keep(leasesOf("kube-proxy", names(6)[1:]...)...) // n1 silent from 0
	st.run(50 * sec)
	st.expect("n1 fails alone; its clock starts", gated(notReady, boot1), "n1")
	st.drop(leasesOf("kube-proxy", "n2", "n3", "n4")...) // last renewed at 50 s
	st.run(100 * sec)
	st.expect("four fail: suspended", held(boot1), "n2", "n3", "n4")
	st.run(3 * minute)
	st.expect("n1's clock paused at 50 s counted", gated(notReady, boot1), "n1")
	st.renew(3*minute, "n2/kube-proxy")
	st.renew(3*minute+1*sec, "n3/kube-proxy")
	st.keep("n2/kube-proxy", "n3/kube-proxy")
	st.expect("two fail: resumed; the held node is tainted now", gated(notReady, boot1), "n4")
	st.run(4*minute + 10*sec)
	st.expect("n1: 50 s + 69 s", gated(notReady, boot1), "n1")
	st.run(4*minute + 11*sec)
	st.expect("n1: 50 s + 70 s", evicted(gated(notReady, boot1)), "n1")
	st.run(5 * minute)
	st.expect("n4 counted nothing while held: 1m59s", gated(notReady, boot1), "n4")
	st.run(5*minute + 1*sec)
	st.expect("n4: 2 m since the suspension ended", evicted(gated(notReady, boot1)), "n4")
}

func TestAnEscalationDueWhenASuspensionBeginsHappensWhenItEnds(t *testing.T) {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	cfg.EvictionTimeout = 2 * minute
	st := newStory(t, cfg)
	sixNodes(st)
	st.keep(leasesOf("kube-proxy", names(6)[1:]...)...)
	st.run(2 * minute) // n1 failed at 50 s
	st.drop(leasesOf("kube-proxy", "n2", "n3", "n4")...)
	st.run(2*minute + 50*sec) // n2..n4 expire as n1's clock reaches 2 m
	st.expect("suspended at the instant the clock is due", gated(notReady, boot1), "n1")
	st.expectHeld("suspended", "n2", "n3", "n4")
	st.renew(3*minute, "n2/kube-proxy", "n3/kube-proxy")
	st.expect("resumed: the drain happens now", evicted(gated(notReady, boot1)), "n1")
}

func TestNoEscalationWhenTheTimeoutIsNegative(t *testing.T) {
	cfg := defaultConfig()
	cfg.EvictionTimeout = -1
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")))
	st.run(time.Hour)
	st.expect("an hour failing", gated(notReady, boot1), "n1")
}

func TestABootstrapGateNeverStartsTheEvictionClock(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	st.add(0, worker("n1", gating("a")))
	st.run(time.Hour)
	st.expect("an hour waiting", gated(registered, ""), "n1")
}

// --- Restarts -----------------------------------------------------------

func TestARestartWhileFourOfSixLeasesAreSilentTaintsNoOne(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n5", "n6")...) // n1..n4 silent from 0
	st.run(40 * sec)
	st.start(40 * sec) // every Lease counts as observed now
	st.run(89 * sec)
	st.expect("within the start grace", ready(boot1), names(6)...)
	st.run(90 * sec)
	st.expect("the grace ran out for four at once", held(boot1), "n1", "n2", "n3", "n4")
	st.run(10 * minute)
	st.expect("nobody tainted, nobody evicted", held(boot1), "n1", "n2", "n3", "n4")
	st.expect("healthy", ready(boot1), "n5", "n6")
}

func TestARestartDuringASuspensionKeepsTheHeldNodesHeld(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n3", "n4", "n5", "n6")...)
	st.run(50 * sec)
	st.drop(leasesOf("kube-proxy", "n3", "n4")...)
	st.run(100 * sec)
	st.expect("before the restart", gated(notReady, boot1), "n1", "n2")
	st.expectHeld("before the restart", "n3", "n4")
	st.start(2 * minute)
	// The boot records mark the expired Leases dead: the start grace does
	// not revive them (issue 33), so no held node reads ExtensionsReady.
	st.expect("found gated: full gate; its dead Lease gets no start grace", gated(notReady, boot1), "n1", "n2")
	st.expectHeld("found untainted and still failing: still held", "n3", "n4")
	for at := 2*minute + sec; at <= 2*minute+50*sec; at += 10 * sec {
		st.run(at)
		st.expectHeld("through the start grace", "n3", "n4")
	}
	st.expect("grace over: gated nodes found in service count", gated(notReady, boot1), "n1", "n2")
	st.expect("grace over: four fail", held(boot1), "n3", "n4")
	st.renew(3*minute, "n3/kube-proxy")
	st.expect("a renewal ends the dead mark", ready(boot1), "n3")
}

// A node found gated at a start that was in service in its boot fails like
// any other: a taint someone else removes from it while the blast radius
// suspends is a new failure taint, held like the others, and the lift puts
// it back with the found gate, which waits for a renewal since the start
// (seeds 10644956011548756368 and 15660107569789160911).
func TestAFailingNodeFoundGatedWhoseTaintAnotherWriterRemovesDuringASuspensionIsHeldUntilItEnds(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n3", "n4", "n5", "n6")...)
	st.run(50 * sec)
	st.expect("two of six fail: tainted", gated(notReady, boot1), "n1", "n2")
	st.start(60 * sec)
	st.expect("found gated, failing", gated(notReady, boot1), "n1", "n2")
	st.run(70 * sec)
	st.drop("n3/kube-proxy")
	st.run(120 * sec)
	st.expectSuspended("n3 makes three of six", "", true)
	st.expectHeld("n3's failure taint is held", "n3")
	st.m.ReadinessTaintRemoved(st.to(125*sec), "n1")
	st.expect("the found gate's taint, put back, would be a failure taint: held", held(boot1), "n1")
	st.expectHeld("held like the others", "n1", "n3")
	st.expect("untouched", gated(notReady, boot1), "n2")
	st.renew(130*sec, "n3/kube-proxy")
	st.expectSuspended("n3 back: two of six", "", false)
	st.expect("tainted again at the lift", gated(notReady, boot1), "n1")
	st.renew(140*sec, "n1/kube-proxy")
	st.expect("its renewal since the start ends the gate", ready(boot1), "n1")
}

// waitingGateAfterARecovery makes n1's failure gate one the own view's
// recovery at 53 s restarted, nothing failing and nothing renewed since: a
// released at 10 s, b out by the clock in the view stale from 15 s, a
// renewed in it. The Leases the story keeps renew meanwhile.
func waitingGateAfterARecovery(st *story) {
	st.t.Helper()
	st.release(10*sec, "n1/a", "Crashed")
	st.expect("a released: failed-only gate", gated(notReady, boot1), "n1")
	st.stale(15 * sec)
	st.run(51 * sec)
	st.renew(52*sec, "n1/a")
	st.expect("b out by the clock in the stale view", gated(notReady, boot1), "n1")
	st.recover(53 * sec)
	st.expect("restarted at the recovery: nothing fails, nothing renewed since", gated(notReady, boot1), "n1")
}

// A failure gate an own-view recovery restarted waits for its extensions to
// renew after the recovery, nothing failing. Another writer removes its
// taint while the view is stale again: the guard holds it off, a held failure
// is judged afresh, and nothing fails: the node is ready at once, not held
// until a later evaluation (seed 17122793937090481195).
func TestAWaitingGateWhoseTaintAnotherWriterRemovesInAStaleViewEndsAtOnce(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a"), gating("b")))
	waitingGateAfterARecovery(st)
	st.stale(60 * sec)
	st.m.ReadinessTaintRemoved(st.to(65*sec), "n1")
	st.expect("its taint removed in the stale view", ready(boot1), "n1")
	st.expectHeld("nothing fails")
}

// A failure gate an own-view recovery restarted, nothing failing and
// waiting for renewals after the recovery, is no failure: the blast radius
// does not count it, and its taint, which another writer removes while
// other nodes' failures suspend gating, is put back, not held (the
// controller's placeTaint; simulation seed 4348327652707732555, where the
// model held it and the controller tainted it). Its extension failing
// afterwards keeps the taint: a suspension removes none.
func TestAWaitingGateWhoseTaintAnotherWriterRemovesDuringASuspensionIsPutBack(t *testing.T) {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.5
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a"), gating("b")))
	others := []string{"n2", "n3", "n4", "n5", "n6"}
	for _, n := range others {
		st.inService(worker(n, gating("a")))
		st.keep(n + "/a")
	}
	waitingGateAfterARecovery(st)
	for _, n := range others[:3] {
		st.drop(n + "/a")
		st.release(54*sec, n+"/a", "Crash")
	}
	st.expectSuspended("three of six fail, n1 not among them", "", true)
	st.expect("the first two are tainted", gated(notReady, boot1), "n2", "n3")
	st.expectHeld("the third's failure taint is held", "n4")
	st.m.ReadinessTaintRemoved(st.to(55*sec), "n1")
	st.expect("not failing: its taint is put back", gated(notReady, boot1), "n1")
	st.run(104 * sec)
	st.expect("its Leases run out under the suspension: the taint stays", gated(notReady, boot1), "n1")
}

// The grace an own-view recovery gives a Lease is no renewal. A failure held
// in the stale view is gated at the lift from when it was first held, and
// an extension added to the node's list during that gate, ready by the
// recovery's grace, must renew after the gate began before it ends (the
// controller's leaseObservation.graceFrom; simulation seed
// 12668779848439133758, where the model took the grace, later than the
// gate's start, for a renewal and ungated n0 on kube-proxy's renewal alone).
func TestARecoverysGraceIsNoRenewalForAGateThatBeganWhileHeld(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.renew(0, "n1/b")
	st.stale(15 * sec)
	st.release(20*sec, "n1/a", "Crash")
	st.expectHeld("a fails in the stale view: held", "n1")
	st.recover(25 * sec)
	st.expect("still failing at the lift: tainted", gated(notReady, boot1), "n1")
	st.update(30*sec, worker("n1", gating("a"), gating("b")))
	st.expect("b listed during the gate, ready by the recovery's grace", gated(notReady, boot1), "n1")
	st.renew(35*sec, "n1/a")
	st.expect("a renewed, b not since the gate began", gated(notReady, boot1), "n1")
	st.renew(40*sec, "n1/b")
	st.expect("b renewed: the gate ends", ready(boot1), "n1")
}

func TestARestartFindsGatedNodesWithFullScope(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a"), gating("b")))
	st.release(10*sec, "n1/a", "Crashed")
	st.expect("failed-only gate", gated(notReady, boot1), "n1")
	st.renew(15*sec, "n1/b")
	st.start(20 * sec)
	st.expect("found gated while a is released", gated(notReady, boot1), "n1")
	st.renew(25*sec, "n1/a")
	st.expect("full scope: b must renew after the start too", gated(notReady, boot1), "n1")
	st.renew(30*sec, "n1/b")
	st.expect("both renewed", ready(boot1), "n1")
}

// A gate found at start whose Lease runs out of its start grace only in a
// stale own view is the restart's again at the recovery, which judges every
// Lease as it was when the guard fired: ControllerStarted, not a failure,
// whether its taint stayed on or another writer removed it meanwhile and the
// guard held it off (seed 3916660364228779899). A failure seen on a current
// view stays the gate's reason across a stall.
func TestAGateFoundAtStartIsControllerStartedAgainAfterAFailureOnlyTheStaleViewSaw(t *testing.T) {
	for _, removed := range []bool{false, true} {
		st := newStory(t, defaultConfig())
		n := worker("n1", gating("a"))
		n.TaintedAtCreation = true
		st.add(0, n)
		st.renew(0, "n1/a")
		st.start(1 * sec)
		st.expect("found gated", gated(controllerStarted, ""), "n1")
		st.stale(10 * sec)
		inStall := gated(notReady, "")
		if removed {
			st.m.ReadinessTaintRemoved(st.to(20*sec), "n1")
			st.expect("taint removed while stale", held(""), "n1")
			inStall = held("")
		}
		st.advance(55 * sec)
		st.expect("start grace over in the stale view", inStall, "n1")
		st.recover(60 * sec)
		st.expect(fmt.Sprintf("recovered (taint removed: %v)", removed), gated(controllerStarted, ""), "n1")
		st.renew(61*sec, "n1/a")
		st.expect("renewed after the recovery", ready(boot1), "n1")
	}

	st := newStory(t, defaultConfig())
	n := worker("n1", gating("a"), gating("b"))
	n.TaintedAtCreation = true
	st.add(0, n)
	st.renew(0, "n1/a", "n1/b")
	st.start(1 * sec)
	st.release(5*sec, "n1/a", "Crashed")
	st.renew(8*sec, "n1/a")
	st.expect("a failed on a current view and came back", gated(notReady, ""), "n1")
	st.stale(10 * sec)
	st.recover(20 * sec)
	st.expect("recovered: the failure's reason stays", gated(notReady, ""), "n1")
}

func TestANodeTaintedAtCreationFoundAtTheFirstStartWaitsForFreshRenewals(t *testing.T) {
	st := newStory(t, defaultConfig())
	n := worker("n1", gating("a"))
	n.TaintedAtCreation = true
	st.add(0, n)
	st.renew(0, "n1/a")
	st.start(1 * sec)
	st.expect("found gated", gated(controllerStarted, ""), "n1")
	st.renew(2*sec, "n1/a")
	st.expect("renewed after the start", ready(boot1), "n1")
}

func TestTheBootRecordCatchesARebootWhileTheControllerWasDownAndAReCreatedObjectIsFoundAsCreated(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	st.stop(10 * sec)
	rebooted := worker("n1", gating("a"))
	rebooted.BootID = "boot2"
	st.update(12*sec, rebooted)
	// Re-created while no controller ran: a new object, which carries
	// nothing the controller wrote on the old one (seed
	// 2542155146350896882), untainted or tainted at creation.
	again := worker("n2", gating("a"))
	again.UID = "uid-n2-again"
	st.update(13*sec, again)
	tainted := worker("n3", gating("a"))
	tainted.UID, tainted.TaintedAtCreation = "uid-n3-again", true
	st.update(13*sec, tainted)
	st.renew(14*sec, "n1/a", "n2/a", "n3/a") // not observed: the controller is down
	st.start(20 * sec)
	st.expect("reboot while down", gated(rebootedReason, boot1), "n1")
	st.expect("re-created untainted while down: found in service", ready("boot1/uid-n2-again"), "n2")
	st.expect("re-created tainted while down: found gated", gated(nodev1alpha1.ReasonControllerStarted, ""), "n3")
	st.renew(25*sec, "n1/a", "n2/a", "n3/a")
	st.expect("renewed after the start", ready(boot2), "n1")
	st.expect("renewed after the start", ready("boot1/uid-n3-again"), "n3")
}

// --- Startup timeouts and fail-open --------------------------------------

func TestStartupTimeoutsKeepTheNodeGatedOrFailOpen(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	keep := Extension{Name: "a", AffectsReadiness: true, StartupTimeout: time.Minute}
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", keep, open))
	st.add(0, worker("n2", open))
	st.run(59 * sec)
	st.expect("before the timeout", gated(registered, ""), "n1", "n2")
	st.run(1 * minute)
	st.expect("KeepGated; b's fail-open in a pending record", gated(startupTimeout, boot1+";b (pending)"), "n1")
	st.expect("Ungate: nothing else to wait for", failedOpen(boot1+";b"), "n2")
	st.renew(70*sec, "n1/a")
	st.expect("a came up; b failed open", failedOpen(boot1+";b"), "n1")
	st.renew(80*sec, "n1/b", "n2/b")
	st.expect("b came up: its fail-open ends", ready(boot1), "n1", "n2")
	st.run(130 * sec)
	st.expect("b gates again once it came up", gated(notReady, boot1), "n2")
}

// The Lease of the previous boot, still valid when the startup timeout
// passes, is the one the timeout found wanting: only a renewal ends the
// fail-open, and that old Lease's expiry is not a failure (simulation seed
// 11173182051072828070).
func TestAFailOpenLastsUntilARenewalNotWhileTheLeaseOfThePreviousBootIsValid(t *testing.T) {
	st := newStory(t, defaultConfig())
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: 10 * sec, FailOpen: true}
	st.inService(worker("n1", gating("a"), open))
	st.keep("n1/a")
	rebooted := worker("n1", gating("a"), open)
	rebooted.BootID = "boot2"
	st.update(5*sec, rebooted)
	st.expect("rebooted", gated(rebootedReason, boot1), "n1")
	st.run(15 * sec)
	st.expect("b's timeout passed with its old Lease valid until 50 s", failedOpen("boot2/uid-%s;b"), "n1")
	st.run(90 * sec)
	st.expect("the old Lease expired: still failed open, not a failure", failedOpen("boot2/uid-%s;b"), "n1")
	st.renew(95*sec, "n1/b")
	st.expect("b came up: its fail-open ends", ready("boot2/uid-%s"), "n1")
}

func TestAFailOpenInTheBootRecordSurvivesARestartWhileAnotherExtensionGates(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", gating("a"), open))
	st.renew(10*sec, "n1/a")
	st.keep("n1/a")
	st.run(1 * minute)
	st.expect("b failed open", failedOpen(boot1+";b"), "n1")
	st.drop("n1/a")
	st.release(2*minute, "n1/a", "Crashed")
	st.expect("a failed", gated(notReady, boot1+";b"), "n1")
	st.start(3 * minute)
	st.expect("found gated", gated(notReady, boot1+";b"), "n1")
	st.renew(3*minute+10*sec, "n1/a")
	st.expect("b's missing Lease does not gate after the restart", failedOpen(boot1+";b"), "n1")
}

// A fail-open that ended while another extension kept the node gated is
// over in the pending record too: after a restart the extension gates again
// (simulation seed 16997267047011645210).
func TestAFailOpenThatEndedWhileGatedIsNotRestoredByARestart(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", gating("a"), open))
	st.run(1 * minute)
	st.expect("b failed open, a still gates", gated(registered, boot1+";b (pending)"), "n1")
	st.renew(70*sec, "n1/b")
	st.expect("b came up", gated(registered, boot1+" (pending)"), "n1")
	st.release(75*sec, "n1/b", "Crashed")
	st.stop(80 * sec)
	st.start(90 * sec)
	st.expect("found gated, b down", gated(notReady, boot1+" (pending)"), "n1")
	st.renew(95*sec, "n1/a")
	st.expect("a came up; b is down and gates again", gated(notReady, boot1+" (pending)"), "n1")
}

// A renewal ends a fail-open also while the node does not list the
// extension (a label took its rule off the node): the boot record loses it,
// so that neither a restart nor the extension's return to the list restores
// it (simulation seed 11458548706464037492).
func TestAFailOpenEndsWhenItsExtensionRenewsOffTheNodesList(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", gating("a"), open))
	st.renew(10*sec, "n1/a")
	st.keep("n1/a")
	st.run(1 * minute)
	st.expect("b failed open", failedOpen(boot1+";b"), "n1")
	st.update(65*sec, worker("n1", gating("a")))
	st.expect("b off the list has not renewed: the record keeps it", ready(boot1+";b"), "n1")
	st.renew(70*sec, "n1/b")
	st.expect("b renewed off the list: its fail-open ends", ready(boot1), "n1")
	st.stop(75 * sec)
	st.start(80 * sec)
	st.update(85*sec, worker("n1", gating("a"), open))
	st.expect("b back on the list after a restart, within its Lease", ready(boot1), "n1")
}

// --- Nodes without gating extensions, exclusion ----------------------------

func TestACreationTaintIsRemovedAfterTheRegistrationGraceWhenNoExtensionIsListed(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	bare := worker("n1")
	bare.TaintedAtCreation = true
	st.add(0, bare)
	late := worker("n2")
	late.TaintedAtCreation = true
	st.add(0, late)
	st.expect("nothing listed yet", NodeView{Tainted: true, ConditionStatus: "True", ConditionReason: nodev1alpha1.ReasonNoRequiredExtensions}, "n1", "n2")
	st.update(10*sec, worker("n2", gating("a")))
	st.expect("a rule added an extension within the grace", gated(registered, ""), "n2")
	st.run(29 * sec)
	st.expect("within the grace", NodeView{Tainted: true, ConditionStatus: "True", ConditionReason: nodev1alpha1.ReasonNoRequiredExtensions}, "n1")
	st.run(30 * sec)
	st.expect("grace over", nothingRequired(boot1), "n1")
	st.expect("grace over, waiting for a", gated(registered, ""), "n2")
	st.renew(35*sec, "n2/a")
	st.expect("a renewed", ready(boot1), "n2")
}

func TestANodeListingNoGatingExtensionReportsNoRequiredExtensions(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", tracking("gpu")), worker("n2", gating("a"), tracking("gpu")))
	st.expect("only a tracking extension", nothingRequired(boot1), "n1")
	st.release(5*sec, "n2/a", "Crashed")
	st.expect("a failed", gated(notReady, boot1), "n2")
	st.update(10*sec, worker("n2", tracking("gpu")))
	st.expect("its last gating extension went away", nothingRequired(boot1), "n2")
}

func TestAnExcludedNodeLosesItsTaintAndReportsUnknown(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.release(5*sec, "n1/a", "Crashed")
	excluded := worker("n1", gating("a"))
	excluded.Excluded = true
	st.update(10*sec, excluded)
	st.expect("excluded", NodeView{ConditionStatus: "Unknown", ConditionReason: nodev1alpha1.ReasonNodeExcluded, BootRecord: "boot1/uid-n1"}, "n1")
	st.run(10 * minute)
	st.expect("left alone", NodeView{ConditionStatus: "Unknown", ConditionReason: nodev1alpha1.ReasonNodeExcluded, BootRecord: "boot1/uid-n1"}, "n1")
	st.renew(10*minute+1*sec, "n1/a")
	st.update(10*minute+2*sec, worker("n1", gating("a")))
	st.expect("label removed: found again, in service", ready(boot1), "n1")
}

// A condition decided while the API server refuses the controller's writes
// is not on the Node: a node excluded before the writes are taken again has
// no condition to turn Unknown, and keeps none.
func TestANodeExcludedBeforeItsFirstConditionWasWrittenKeepsNone(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	st.writes(sec, true)
	st.add(2*sec, worker("n1", gating("a")))
	st.renew(3*sec, "n1/a")
	excluded := worker("n1", gating("a"))
	excluded.Excluded = true
	noCondition := func(when string) {
		t.Helper()
		if v := st.m.Nodes()["n1"]; v.Tainted || v.ConditionStatus != "" || v.ConditionReason != "" {
			t.Errorf("%s: tainted %v, condition %q/%q; want no taint and no condition", when, v.Tainted, v.ConditionStatus, v.ConditionReason)
		}
	}
	st.update(4*sec, excluded)
	noCondition("excluded, no write taken yet")
	st.writes(5*sec, false)
	st.advance(6 * sec)
	noCondition("the writes are taken again: nothing to write")
}

// The boot record an ungate decides while the API server refuses the
// controller's writes is not on the Node either: a node excluded before the
// writes are taken again keeps the previous boot's record, so when the label
// goes the controller finds it rebooted (seed 2869923648807023944).
func TestABootRecordDecidedWhileWritesAreRefusedIsNotOnTheNode(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	rebooted := worker("n1", gating("a"))
	rebooted.BootID = "boot2"
	st.update(10*sec, rebooted)
	st.expect("rebooted", gated(nodev1alpha1.ReasonNodeRebooted, boot1), "n1")
	st.writes(11*sec, true)
	st.renew(12*sec, "n1/a")
	if rec := st.m.Nodes()["n1"].BootRecord; rec != "boot1/uid-n1" {
		t.Errorf("ungated while the writes are refused: boot record %q, want the previous boot's, boot1/uid-n1", rec)
	}
	excluded := rebooted
	excluded.Excluded = true
	st.update(13*sec, excluded)
	st.writes(14*sec, false)
	st.advance(15 * sec)
	st.update(20*sec, rebooted)
	st.expect("let back in: the record names the previous boot", gated(nodev1alpha1.ReasonNodeRebooted, boot1), "n1")
	st.renew(21*sec, "n1/a")
	st.expect("renewed since", ready(boot2), "n1")
}

func TestANodeLetBackInAfterAnExclusionTakesAReleaseItFindsForItsCurrentBoot(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("kube-proxy"), tracking("updater")))
	st.release(10*sec, "n1/updater", nodev1alpha1.ReasonUpdating)
	st.expect("planned release", gated(plannedReason, boot1), "n1")
	rebooted := worker("n1", gating("kube-proxy"), tracking("updater"))
	rebooted.BootID = "boot2"
	st.update(30*sec, rebooted)
	st.renew(35*sec, "n1/kube-proxy")
	st.expect("the release of the previous boot no longer gates", ready(boot2), "n1")
	excluded := rebooted
	excluded.Excluded = true
	st.update(40*sec, excluded)
	st.renew(41*sec, "n1/kube-proxy")
	st.update(42*sec, rebooted)
	// The controller let the node go and cannot tell which boot the
	// release it finds was made in; the record names this one.
	st.expect("let back in: the release found is this boot's", gated(plannedReason, boot2), "n1")
	st.renew(43*sec, "n1/updater")
	st.expect("the updater renewed", ready(boot2), "n1")
}

func TestTheBlastRadiusResumesOnlyBelowThresholdMinusFivePoints(t *testing.T) {
	for _, c := range []struct {
		was            bool
		failing, total int
		threshold      float64
		wantSuspended  bool
	}{
		{false, 2, 4, 0.5, false},  // 2 or fewer never suspend
		{false, 3, 6, 0.5, true},   // 50 % reaches 50 %
		{false, 3, 7, 0.5, false},  // 43 %
		{true, 3, 7, 0.5, false},   // 43 % < 45 %
		{true, 9, 20, 0.5, true},   // 45 % is not below 45 %
		{true, 3, 20, 0.2, true},   // 15 % is not below 15 %
		{true, 5, 40, 0.2, false},  // 12.5 %
		{true, 3, 100, 0.05, true}, // 3 % ≥ 2.5 %
		{true, 3, 121, 0.05, false},
		{true, 2, 3, 0.5, false}, // 2 or fewer resume
		{false, 50, 50, 0, false},
	} {
		if got := nextSuspended(c.was, c.failing, c.total, c.threshold); got != c.wantSuspended {
			t.Errorf("was %v, %d of %d at %v: suspended %v, want %v", c.was, c.failing, c.total, c.threshold, got, c.wantSuspended)
		}
	}
}

func TestNothingFailsOpenWhileTheOwnViewIsStale(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", open))
	st.stale(50 * sec)
	st.run(2 * minute)
	st.expect("timeout passed while stale", gated(registered, ""), "n1")
	st.recover(2 * minute)
	st.run(2*minute + 59*sec)
	st.expect("the lift restarted the timeout", gated(registered, ""), "n1")
	st.run(3 * minute)
	st.expect("a minute after the lift", failedOpen(boot1+";b"), "n1")
}

func TestARenewalObservedAtTheSameInstantAsARebootDoesNotCount(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	rebooted := worker("n1", gating("a"))
	rebooted.BootID = "boot2"
	st.renew(10*sec, "n1/a")
	st.update(10*sec, rebooted)
	st.expect("renewed just before the reboot was seen", gated(rebootedReason, boot1), "n1")
	st.renew(10*sec, "n1/a")
	st.expect("renewed at the same instant", gated(rebootedReason, boot1), "n1")
	st.renew(11*sec, "n1/a")
	st.expect("renewed a second later", ready(boot2), "n1")
}

// TestARecordWrittenInTheInstantANewBootReplacedItsBootIsTakenBack: the
// world's writes of an instant are at the API server before the writes the
// controller makes after them (WorldWrites). An ungate decided on the
// renewal of an instant in which the node also came back from a reboot
// names the old boot, and the controller's write of it, finding the boot
// changed, is refused: no record is written, so a new instance finds the
// node's gate as its own. A record written before the instant stays, and
// so does one written in the instant before the world's writes (the
// timers' evaluation).
func TestARecordWrittenInTheInstantANewBootReplacedItsBootIsTakenBack(t *testing.T) {
	for _, tc := range []struct {
		name       string
		renewAt    time.Duration
		worldAt    time.Duration // WorldWrites before the renewal, or never
		wantRecord string
		wantFound  string
	}{
		{"renewed and rebooted in one instant after the world's writes", 10 * sec, 10 * sec, "", controllerStarted},
		{"renewed an instant before the reboot", 9 * sec, 9 * sec, boot1, rebootedReason},
		{"renewed in the reboot's instant before the world's writes", 10 * sec, 0, boot1, rebootedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStory(t, defaultConfig())
			st.start(0)
			n := worker("n1", gating("a"))
			n.TaintedAtCreation = true
			st.add(5*sec, n)
			st.expect("registered", gated(registered, ""), "n1")
			if tc.worldAt != 0 {
				st.m.WorldWrites(st.to(tc.worldAt))
			}
			st.renew(tc.renewAt, "n1/a")
			st.expect("its gate ended", ready(boot1), "n1")
			again := n
			again.BootID = "boot2"
			st.update(10*sec, again)
			want := tc.wantRecord
			if want != "" {
				want = fmt.Sprintf(want, "n1")
			}
			st.expect("rebooted", gated(rebootedReason, want), "n1")
			st.stop(12 * sec)
			st.start(13 * sec)
			st.expect("found by a new instance", gated(tc.wantFound, want), "n1")
		})
	}
}

// A renewal and a release that one sync of the node takes together never
// show both extensions ready: the reboot gate stays. Taken one at a time,
// the renewal ends the gate (an ungate, which a stale view does not hold)
// and the release is a new failure the stale view holds.
func TestObservationsOneSyncTakesTogetherAreJudgedTogether(t *testing.T) {
	for _, tc := range []struct {
		name     string
		together bool
		want     NodeView
	}{
		{"one at a time", false, held(boot2)},
		{"together", true, gated(rebootedReason, boot1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStory(t, defaultConfig())
			st.inService(worker("n1", gating("a"), gating("b")))
			rebooted := worker("n1", gating("a"), gating("b"))
			rebooted.BootID = "boot2"
			st.update(10*sec, rebooted)
			st.renew(12*sec, "n1/a")
			st.stale(13 * sec)
			st.expect("rebooted, a renewed, the view stale", gated(rebootedReason, boot1), "n1")
			observe := func() {
				st.renew(14*sec, "n1/b")
				st.release(14*sec, "n1/a", "Crashed")
			}
			if tc.together {
				st.m.Together(observe)
			} else {
				observe()
			}
			st.expect("b renewed and a released", tc.want, "n1")
		})
	}
}

// The model judges the own view from the canary renewals it observed: stale
// more than three canary intervals (5 s) after the last new one or the
// start, current again at the next new one; a relist that replays a renewal
// already observed proves nothing.
func TestTheOwnViewIsStaleThreeCanaryIntervalsAfterTheLastNewRenewalObserved(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.vouch = false
	renewed := func(d time.Duration) time.Time { return t0.Add(d).Truncate(time.Microsecond) }
	check := func(d time.Duration, want bool) {
		t.Helper()
		if got := st.m.CheckView(st.to(d)); got != want {
			t.Errorf("at %s: stale %v, want %v", d, got, want)
		}
	}
	check(15*sec, false) // the start counts as a renewal: exactly 3 intervals
	check(16*sec, true)
	st.m.CanaryRenewed(st.to(17*sec), renewed(17*sec))
	check(17*sec, false)
	// A relist replays the renewal of 17 s at 30 s: not new.
	st.m.CanaryRenewed(st.to(30*sec), renewed(17*sec))
	check(32*sec, false)
	check(33*sec, true)
	st.release(34*sec, "n1/a", "Crashed")
	st.expect("a failure while the view is stale is held", held(boot1), "n1")
	st.m.CanaryRenewed(st.to(35*sec), renewed(35*sec))
	check(35*sec, false)
	st.expect("the view current again: the failure taints", gated(notReady, boot1), "n1")
	// A new instance has observed no renewal yet: the last one its
	// predecessor observed is new to it.
	st.stop(40 * sec)
	st.start(41 * sec)
	check(50*sec, false)
	st.m.CanaryRenewed(st.to(50*sec), renewed(35*sec))
	check(65*sec, false)
	check(66*sec, true)
}

// A planned release keeps its gate planned until the Lease renews, also when
// the extension releases again with a reason that is not for maintenance
// (kube-proxy's heartbeat answering ProbeFailed on a node the autoscaler
// removes): docs/controller.md, "the node's other failures are planned too
// ... until that Lease renews or the node reboots" (seed
// 17062627265987914959). A controller started meanwhile knows only the
// reason the release has then.
func TestAPlannedReleaseThatReleasesAgainWithAnotherReasonStaysPlannedUntilItRenews(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", nodev1alpha1.ReasonUpdating)
	st.expect("planned release", gated(plannedReason, boot1), "n1")
	st.release(20*sec, "n1/a", "ProbeFailed")
	st.expect("released again without a renewal", gated(plannedReason, boot1), "n1")
	st.stop(30 * sec)
	st.start(31 * sec)
	st.expect("a new instance finds a release for a probe", gated(nodev1alpha1.ReasonExtensionsNotReady, boot1), "n1")
	st.renew(40*sec, "n1/a")
	st.expect("renewed", ready(boot1), "n1")
}

// The model takes a decision as written the instant the API server takes
// the controller's writes again; the controller's retry reaches the API a
// read and a patch later, and an own-view guard that fires in between holds
// it. A driver that sees the controller hold such a node tells the model
// (RetryMetTheGuard): a reboot's gate is then pending, which a renewal seen
// while the view is stale cannot end, and it gates at the recovery (seed
// 11577162341470377777: the model ended it in the stale view and wrote the
// boot record of a boot the controller never saw ready). A taint taken as
// written before the outage is no such case, nor is one on a current view.
func TestARebootTaintWhoseRetryCameAfterTheGuardFiredIsPending(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")))
	st.release(5*sec, "n2/a", "Crashed")
	st.expect("failing before the outage", gated(notReady, boot1), "n2")
	rebootDuringAnOutageOfTheWrites(st, "n1")
	if st.m.RetryMetTheGuard(st.to(16*sec), "n1") {
		t.Fatal("n1's taint taken back with the view current")
	}
	st.stale(17 * sec)
	if st.m.RetryMetTheGuard(st.to(17*sec), "n2") {
		t.Error("n2's taint, written before the outage, taken back")
	}
	if !st.m.RetryMetTheGuard(st.to(17*sec), "n1") {
		t.Fatal("n1's taint, taken as written when the writes came back, not taken back under the guard that fired after")
	}
	st.expect("held: the reboot's gate is pending", held(boot1), "n1")
	st.expect("still tainted", gated(notReady, boot1), "n2")
	pendingRebootGateWaitsForTheRecovery(st, "n1")
}

// rebootDuringAnOutageOfTheWrites reboots node (gating "a") while the API
// server refuses the controller's writes (10 s to 16 s): the model takes the
// reboot gate's taint as written when they come back.
func rebootDuringAnOutageOfTheWrites(st *story, node string) {
	st.t.Helper()
	st.writes(10*sec, true)
	rebooted := worker(node, gating("a"))
	rebooted.BootID = "boot2"
	st.update(12*sec, rebooted)
	st.writes(16*sec, false)
	st.expect("the writes are taken again", gated(rebootedReason, boot1), node)
}

// pendingRebootGateWaitsForTheRecovery: node's pending reboot gate (gating
// "a") does not end on a renewal in the stale view (18 s), gates at the
// recovery (20 s) and ends on the renewal after it.
func pendingRebootGateWaitsForTheRecovery(st *story, node string) {
	st.t.Helper()
	st.renew(18*sec, node+"/a")
	st.expect("a pending gate does not end in a stale view", held(boot1), node)
	st.recover(20 * sec)
	st.expect("the recovery gates it", gated(rebootedReason, boot1), node)
	st.renew(21*sec, node+"/a")
	st.expect("renewed after the recovery", ready(boot2), node)
}

// Seed 17271907123373396587: the model may end such a gate on a renewal in
// the guard's own second, before the driver sees the controller hold the
// node. The node is put back as it was before that ungate, its gate pending:
// no boot record of the new boot, gated at the recovery. A gate ended on a
// current view is no such case.
func TestARebootGateEndedInTheStaleViewIsPutBackWhenItsRetryMetTheGuard(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	rebootDuringAnOutageOfTheWrites(st, "n1")
	st.stale(17 * sec)
	st.renew(17*sec, "n1/a")
	st.expect("ended in the stale view, as a gate in force may", ready(boot2), "n1")
	if !st.m.RetryMetTheGuard(st.to(17*sec), "n1") {
		t.Fatal("the gate ended in the guard's second is not put back")
	}
	st.expect("held: the reboot's gate is pending, the record not written", held(boot1), "n1")
	pendingRebootGateWaitsForTheRecovery(st, "n1")
	if st.m.RetryMetTheGuard(st.to(21*sec), "n1") {
		t.Fatal("a gate ended on a current view put back")
	}
}

// The controller's resume queues the held nodes, and its workers sync them
// one by one: a suspension that comes back in the instant of the resume can
// reach a queued node before its sync, which then holds it. The model taints
// every held node at the resume; it takes the other order for a node the
// driver saw the controller hold so, and for no other.
func TestANodeTheResumeTaintedMayBeHeldAgainByASuspensionInTheSameInstant(t *testing.T) {
	st := sixNodesAtHalf(t)
	st.keep(leasesOf("kube-proxy", "n3", "n4", "n5", "n6")...)
	st.run(20 * sec)
	st.drop(leasesOf("kube-proxy", "n3", "n4", "n5", "n6")...)
	st.renew(60*sec, leasesOf("kube-proxy", "n5", "n6")...)
	st.advance(70 * sec)
	st.expect("four fail (67 %): suspended", held(boot1), "n3", "n4")
	st.renew(71*sec, "n1/kube-proxy", "n3/kube-proxy")
	st.expect("two fail: resumed, the held node is tainted", gated(notReady, boot1), "n2", "n4")
	if st.m.HoldAgainAtResume("n4") {
		t.Fatal("n4 held again while nothing is suspended")
	}
	st.release(71*sec, "n5/kube-proxy", "Crash")
	st.release(71*sec, "n6/kube-proxy", "Crash")
	st.expectSuspended("four fail again in the instant of the resume", "", true)
	if st.m.HoldAgainAtResume("n2") {
		t.Error("n2, tainted before the resume, held again")
	}
	if !st.m.HoldAgainAtResume("n4") {
		t.Fatal("n4, tainted at the resume, not held again by the suspension of the same instant")
	}
	st.expect("held again", held(boot1), "n4")
	st.expect("tainted before the resume", gated(notReady, boot1), "n2")
	st.advance(72 * sec)
	st.expect("still held a second later", held(boot1), "n4")
	st.expectHeld("a second later", "n4", "n5", "n6")
}
