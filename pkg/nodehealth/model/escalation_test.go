package model

import (
	"testing"
	"time"
)

func noExecute(v NodeView) NodeView { v.NoExecute = true; return v }

func TestInModeNoneAFailingNodeIsNeverEscalated(t *testing.T) {
	cfg := defaultConfig()
	cfg.EvictionMode = EvictionModeNone
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", "Crashed")
	st.advance(5*minute + 10*sec)
	st.expect("its eviction timeout passed", gated(notReady, boot1), "n1")
	st.advance(30 * minute)
	st.expect("still failing, still only tainted", gated(notReady, boot1), "n1")
	if st.m.Escalated("n1") {
		t.Error("escalated in mode None: the drain invariant would wait for evictions")
	}
}

// crashedInModeNoExecute is n1 in service in mode NoExecute, its extension
// a crashed at 10 s: it comes due at 5m10s.
func crashedInModeNoExecute(t *testing.T) *story {
	cfg := defaultConfig()
	cfg.EvictionMode = EvictionModeNoExecute
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", "Crashed")
	return st
}

func TestInModeNoExecuteAnEscalatedNodeCarriesTheNoExecuteTaintUntilItsUngate(t *testing.T) {
	st := crashedInModeNoExecute(t)
	st.advance(5*minute + 9*sec)
	st.expect("not yet due", gated(notReady, boot1), "n1")
	st.advance(5*minute + 10*sec)
	st.expect("escalated: the NoExecute variant, no eviction", noExecute(gated(notReady, boot1)), "n1")
	st.stale(6 * minute)
	st.expect("a guard keeps what was added", noExecute(gated(notReady, boot1)), "n1")
	st.recover(6*minute + 10*sec)
	st.renew(7*minute, "n1/a")
	st.expect("ungated: both taints go", ready(boot1), "n1")
}

// threeFailingTogether is n1, n2 and n3 failing at 10 s, at a rate of one
// escalation in 10 s, at the instant they come due (5m10s).
func threeFailingTogether(t *testing.T) *story {
	cfg := defaultConfig()
	cfg.EscalationsPerSecond = 0.1
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	for _, n := range names(3) {
		st.release(10*sec, n+"/a", "Crashed")
	}
	st.advance(5*minute + 10*sec)
	return st
}

func TestEscalationsDueTogetherAreSpacedByTheRateInNameOrder(t *testing.T) {
	st := threeFailingTogether(t)
	st.expect("the first turn", evicted(gated(notReady, boot1)), "n1")
	st.expect("waiting", gated(notReady, boot1), "n2", "n3")
	st.advance(5*minute + 19*sec)
	st.expect("not before its turn", gated(notReady, boot1), "n2", "n3")
	st.advance(5*minute + 20*sec)
	st.expect("the second turn", evicted(gated(notReady, boot1)), "n2")
	st.expect("the third is 10 s later", gated(notReady, boot1), "n3")
	st.advance(5*minute + 30*sec)
	st.expect("the third turn", evicted(gated(notReady, boot1)), "n3")
}

// A tie has no order of its own: a controller may give the free turn to
// any node of it, and SwapTiedTurns takes that order, but never changes
// whether or when a turn is spent, nor swaps nodes that did not tie.
func TestTheNodesOfATieMayTakeTheirTurnsInAnyOrderButNothingElseMoves(t *testing.T) {
	cfg := defaultConfig()
	cfg.EscalationsPerSecond = 0.1
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")), worker("n4", gating("a")))
	for _, n := range names(3) {
		st.release(10*sec, n+"/a", "Crashed")
	}
	st.release(11*sec, "n4/a", "Crashed")
	st.advance(5*minute + 10*sec)
	if st.m.SwapTiedTurns("n2", "n3", true) {
		t.Error("swapped n2, which waits, for n3: only the node escalated now gives its turn away")
	}
	if !st.m.SwapTiedTurns("n1", "n3", true) {
		t.Fatal("n1 and n3 came due together: the controller may have given n3 the free turn")
	}
	st.expect("n3 took the free turn", evicted(gated(notReady, boot1)), "n3")
	st.expect("n1 gave its escalation back", gated(notReady, boot1), "n1", "n2")
	st.advance(5*minute + 11*sec)
	if st.m.SwapTiedTurns("n3", "n4", true) {
		t.Error("swapped with n4, which came due a second later")
	}
	st.advance(5*minute + 20*sec)
	st.expect("the second turn: n2's", evicted(gated(notReady, boot1)), "n2")
	st.expect("n1 waits for the turn n3 had", gated(notReady, boot1), "n1", "n4")
	st.advance(5*minute + 30*sec)
	st.expect("n1's turn", evicted(gated(notReady, boot1)), "n1")
	st.advance(5*minute + 40*sec)
	st.expect("n4's turn", evicted(gated(notReady, boot1)), "n4")
}

// The nodes of a tie that all wait may take their later turns in any order
// too: a controller that gave the earlier one to a node that recovered
// before it came spends it unused, and the node the model gave it to waits
// for the next.
func TestANodeOfATieThatRecoveredMayHaveSpentTheEarlierTurnTheModelGaveAnother(t *testing.T) {
	st := threeFailingTogether(t)
	st.expect("the free turn", evicted(gated(notReady, boot1)), "n1")
	st.renew(5*minute+15*sec, "n3/a")
	st.advance(5*minute + 20*sec)
	st.expect("the second turn, n2's in name order", evicted(gated(notReady, boot1)), "n2")
	if st.m.SwapTiedTurns("n2", "n3", true) {
		t.Error("n3 escalated at the second turn, though it recovered before it")
	}
	if !st.m.SwapTiedTurns("n2", "n3", false) {
		t.Fatal("n2 and n3 came due together: the controller may have given n3 the second turn, which it spent recovered")
	}
	st.expect("n2 gave its escalation back", gated(notReady, boot1), "n2")
	st.expect("n3 spent the turn", ready(boot1), "n3")
	if st.m.SwapTiedTurns("n2", "n1", false) {
		t.Error("swapped with n1, whose turn was spent: a turn never comes twice")
	}
	st.advance(5*minute + 29*sec)
	st.expect("n2 waits for the turn n3 had", gated(notReady, boot1), "n2")
	st.advance(5*minute + 30*sec)
	st.expect("n2's turn", evicted(gated(notReady, boot1)), "n2")
}

func TestATurnOfTheRateIsSpentAtItsInstantByANodeThatNoLongerFails(t *testing.T) {
	cfg := defaultConfig()
	cfg.EscalationsPerSecond = 0.1
	cfg.EvictionTimeout = 20 * sec
	st := newStory(t, cfg)
	st.inService(worker("n1", gating("a")), worker("n2", gating("a")), worker("n3", gating("a")))
	for _, n := range names(3) {
		st.release(10*sec, n+"/a", "Crashed")
	}
	st.advance(30 * sec)
	st.expect("the first turn", evicted(gated(notReady, boot1)), "n1")
	// n2 recovers before its turn (40 s) and fails again at once: its clock
	// runs out at 56 s, after that turn, which it spent not being due, so
	// it takes a new one, after n3's (50 s).
	st.renew(35*sec, "n2/a")
	st.expect("recovered", ready(boot1), "n2")
	st.release(36*sec, "n2/a", "Crashed")
	st.advance(40 * sec)
	st.expect("its turn came while its clock ran", gated(notReady, boot1), "n2")
	st.advance(50 * sec)
	st.expect("n3's turn is not moved up nor back", evicted(gated(notReady, boot1)), "n3")
	st.advance(56 * sec)
	st.expect("due again, a new turn", gated(notReady, boot1), "n2")
	st.advance(60 * sec)
	st.expect("the turn after n3's", evicted(gated(notReady, boot1)), "n2")
}

func TestInModeNoExecuteTheNoExecuteTaintSomeoneRemovedWhileTheOwnViewIsStaleComesBackAtTheLift(t *testing.T) {
	st := crashedInModeNoExecute(t)
	st.advance(5*minute + 10*sec)
	st.expect("escalated", noExecute(gated(notReady, boot1)), "n1")
	st.stale(6 * minute)
	st.m.ReadinessTaintRemoved(st.to(6*minute+5*sec), "n1")
	st.recover(6*minute + 10*sec)
	st.expect("the lift: the failure stands, the node escalated and not held", noExecute(gated(notReady, boot1)), "n1")
}

func TestInModeNoExecuteAnEscalationDecidedWhileWritesAreRefusedAddsTheVariantWhenTheyAreTakenAgain(t *testing.T) {
	st := crashedInModeNoExecute(t)
	st.writes(5*minute, true)
	st.advance(5*minute + 10*sec)
	st.expect("escalated during the outage: the variant's write was refused", gated(notReady, boot1), "n1")
	if !st.m.nodes["n1"].clock.escalated {
		t.Error("the escalation was forgotten with its refused write")
	}
	st.writes(5*minute+20*sec, false)
	st.expect("writes taken: the escalation still stands and its variant comes", noExecute(gated(notReady, boot1)), "n1")
}

func TestInModeNoExecuteARebootBeforeRefusedWritesReturnDropsTheVariantOfTheOldGate(t *testing.T) {
	st := crashedInModeNoExecute(t)
	st.writes(5*minute, true)
	st.advance(5*minute + 10*sec)
	rebooted := worker("n1", gating("a"))
	rebooted.BootID = "boot2"
	st.update(5*minute+15*sec, rebooted)
	st.writes(5*minute+20*sec, false)
	st.expect("the reboot's gate has no escalation of its own", gated(rebootedReason, boot1), "n1")
}

// An ungate decided on a renewal of the instant in which the node also came
// back from a reboot is refused with its write (WorldWrites): the failure it
// would have ended goes on into the reboot's gate, and the escalated node's
// pods stay evicted until that gate ends. Decided before the reboot's
// instant, the ungate is written and ends the eviction.
func TestAnEscalatedNodesUngateRefusedByANewBootInItsInstantKeepsItsPodsEvicted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		renewAt time.Duration
		want    NodeView
	}{
		{"renewed and rebooted in one instant after the world's writes", 6 * minute, evicted(gated(rebootedReason, boot1))},
		{"renewed an instant before the reboot", 6*minute - sec, gated(rebootedReason, boot1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStory(t, defaultConfig())
			st.inService(worker("n1", gating("a")))
			st.release(10*sec, "n1/a", "Crashed")
			st.advance(5*minute + 10*sec)
			st.expect("escalated", evicted(gated(notReady, boot1)), "n1")
			st.m.WorldWrites(st.to(tc.renewAt))
			st.renew(tc.renewAt, "n1/a")
			rebooted := worker("n1", gating("a"))
			rebooted.BootID = "boot2"
			st.update(6*minute, rebooted)
			st.expect("back from the reboot", tc.want, "n1")
			st.renew(6*minute+10*sec, "n1/a")
			st.expect("the reboot's gate ended: so did the failure", ready(boot2), "n1")
		})
	}
}
