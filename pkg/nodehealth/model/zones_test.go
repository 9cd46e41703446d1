package model

import "testing"

// Zone labels that change while the controller runs (docs/controller.md,
// "Blast radius"): a node counts in the zone its label names now, its old
// zone is judged on the nodes left in it, and a node without a label counts
// in the cluster only.

// twoZones starts 8 nodes in service, n1..n4 in zone a and n5..n8 in zone b.
func twoZones(st *story) {
	var nodes []Node
	for i, n := range names(8) {
		w := worker(n, gating("kube-proxy"))
		w.Zone = []string{"a", "b"}[i/4]
		nodes = append(nodes, w)
	}
	st.inService(nodes...)
}

func relabel(name, zone string) Node {
	w := worker(name, gating("kube-proxy"))
	w.Zone = zone
	return w
}

func TestAHeldNodeRelabelledOutOfASuspendedZoneIsTaintedAndItsOldZoneIsJudgedOnTheNodesLeft(t *testing.T) {
	cfg := defaultConfig()
	cfg.ZoneThreshold = 0.5
	st := newStory(t, cfg)
	twoZones(st)
	st.keep(leasesOf("kube-proxy", "n4", "n6", "n7", "n8")...)
	st.run(50 * sec) // n1..n3 (zone a) and n5 (zone b) expire
	st.expect("three of four in zone a", held(boot1), "n1", "n2", "n3")
	st.expectSuspended("zone a", "a", true)

	st.update(55*sec, relabel("n3", "b"))
	st.expect("moved to zone b (2 of 5 failing there): tainted", gated(notReady, boot1), "n3", "n5")
	st.expectSuspended("zone a, 2 of 3 failing", "a", false)
	st.expect("zone a resumed: its held nodes are judged afresh", gated(notReady, boot1), "n1", "n2")
	st.expectHeld("nothing suspended")
}

func TestAFailingNodeRelabelledIntoASuspendedZoneKeepsItsTaintAndItsEvictionClockPausesUntilItLosesItsZone(t *testing.T) {
	cfg := defaultConfig()
	cfg.ZoneThreshold = 0.5
	cfg.EvictionTimeout = 2 * minute
	st := newStory(t, cfg)
	twoZones(st)
	st.keep(leasesOf("kube-proxy", "n4", "n6", "n7", "n8")...)
	st.run(50 * sec) // zone a suspended (3 of 4); n5 tainted, its clock starts
	st.expect("n5 fails alone in zone b", gated(notReady, boot1), "n5")

	st.update(60*sec, relabel("n5", "a"))
	st.expect("a suspension adds no taint and removes none", gated(notReady, boot1), "n5")
	st.expectSuspended("zone a, 4 of 5 failing", "a", true)
	st.run(3 * minute)
	st.expect("its clock paused at 10 s counted: no eviction at 2m50s", gated(notReady, boot1), "n5")

	st.update(3*minute, relabel("n5", ""))
	st.expectSuspended("no zone: the cluster only", "", false)
	st.expectSuspended("zone a, 3 of 4 failing", "a", true)
	st.expect("n1..n3 stay held", held(boot1), "n1", "n2", "n3")
	st.run(4*minute + 49*sec)
	st.expect("10 s + 1m49s counted", gated(notReady, boot1), "n5")
	st.run(4*minute + 50*sec)
	st.expect("10 s + 1m50s counted: escalated", evicted(gated(notReady, boot1)), "n5")
}

// A failure judged in the instant its node is relabelled, on a view that
// does not show the new label yet: after the world's writes of the instant
// (WorldWrites), the controller's taint write reads the Node afresh, finds
// its labels changed and is refused, and the decision is made again on the
// new zone, whose suspension holds it (simulation seed 583410693624293234:
// the model kept the taint). Judged before them (the timers), the taint is
// written, and a suspension removes no taint.
func TestAFailureTaintDecidedInTheInstantItsNodeMovesIntoASuspendingZoneIsDecidedAgainThere(t *testing.T) {
	for _, tc := range []struct {
		name  string
		world bool
		want  NodeView
	}{
		{"decided after the world's writes: refused, and held by the new zone", true, held(boot1)},
		{"decided before them: written, and kept", false, gated(notReady, boot1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.ZoneThreshold = 0.5
			st := newStory(t, cfg)
			twoZones(st)
			st.keep(leasesOf("kube-proxy", "n3", "n4", "n5", "n6", "n7", "n8")...)
			st.run(50 * sec) // n1 and n2 expire: 2 of 4 in zone a, not suspended
			st.expect("two of four in zone a", gated(notReady, boot1), "n1", "n2")
			st.expectSuspended("zone a, 2 of 4 failing", "a", false)
			st.run(60 * sec)
			if tc.world {
				st.m.WorldWrites(st.to(60 * sec))
			}
			st.release(60*sec, "n5/kube-proxy", "Crash")
			st.expect("n5 fails alone in zone b", gated(notReady, boot1), "n5")

			st.update(60*sec, relabel("n5", "a"))
			st.expectSuspended("zone a, 3 of 5 failing", "a", true)
			st.expect(tc.name, tc.want, "n5")
		})
	}
}

// A failure taint decided before another node's failure suspends the zone
// is held when its patch met a conflict: the controller computes the write
// again on a fresh read after what it observed meanwhile, and asks the
// guard again. Without the conflict the taint was written first and stays;
// so it does when the API server took it and a later patch of the node in
// the same instant conflicted: the retry reads the taint back (simulation
// seed 11236189133390383420: the model took back a boot record so taken).
func TestATaintWhosePatchConflictedIsHeldWhenTheZoneWasSuspendedBeforeItsRetry(t *testing.T) {
	for _, tc := range []struct {
		name             string
		landed, conflict bool
		want             NodeView
	}{
		{"written", false, false, gated(notReady, boot1)},
		{"conflicted", false, true, held(boot1)},
		{"written, and a later patch of the instant conflicted", true, true, gated(notReady, boot1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.ZoneThreshold = 0.5
			st := newStory(t, cfg)
			twoZones(st)
			st.keep(leasesOf("kube-proxy", names(8)...)...)
			st.run(40 * sec)
			st.release(41*sec, "n1/kube-proxy", "Crash")
			st.m.WorldWrites(st.to(42 * sec))
			st.release(42*sec, "n2/kube-proxy", "Crash")
			st.expect("2 of 4 in zone a fail, not over half", gated(notReady, boot1), "n1", "n2")
			if tc.landed {
				st.m.WriteLanded(st.to(42*sec), "n2")
			}
			st.release(42*sec, "n3/kube-proxy", "Crash")
			st.expectSuspended("3 of 4 in zone a", "a", true)
			st.expect("n3 fails once the zone is suspended", held(boot1), "n3")
			if tc.conflict {
				st.m.WriteRetried(st.to(42*sec), "n2")
			}
			st.expect("n2 after the zone was suspended", tc.want, "n2")
		})
	}
}
