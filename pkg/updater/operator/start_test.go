package operator

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func pin(v string) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.TargetVersion = v }
}
func paused(p *updatesv1alpha1.UpdatePolicy) { p.Spec.Paused = true }
func limit(v intstr.IntOrString) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.MaxConcurrentUpdates = v }
}
func zoneLimit(v intstr.IntOrString) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.MaxConcurrentUpdatesPerZone = &v }
}
func inWindow(schedule string, d time.Duration, tz string) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		p.Spec.Windows = append(p.Spec.Windows, updatesv1alpha1.UpdateWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz})
	}
}
func generation(g int64) policyMod { return func(p *updatesv1alpha1.UpdatePolicy) { p.Generation = g } }
func all(mods ...policyMod) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		for _, m := range mods {
			m(p)
		}
	}
}

func TestSyncStartStartsOnlyEligibleNodesWithinTheLimitsWindowsAndBackOff(t *testing.T) {
	type S = []*updatesv1alpha1.BottlerocketShadow
	type N = []*v1.Node
	start := func(name, version string) string { return "update " + name + " StagedAndPerformedUpdate " + version }
	cases := []struct {
		name    string
		opts    func(*Options)
		pol     policyMod // of the fleet policy
		nodes   N
		shadows S
		listed  S // the API server's view when the cache is behind
		want    []string
		events  []string
		timer   []time.Duration // start-pass timers
	}{
		{name: "one eligible node starts with its offered version", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "pin overrides the offered version", pol: pin("1.19.5"),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			want: []string{"list", "list policies", start("a", "1.19.5")}, events: []string{"Normal UpdateStarted"}},
		{name: "pin older than the node: never downgraded", pol: pin("1.18.0"),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}, events: []string{"Normal DowngradeRefused"}},
		{name: "offered version equals the running one", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, offered(oldV))}},
		{name: "nothing offered: never started", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, offered(""))}},
		{name: "agent has not reported yet", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, "", running(""), offered(""))}},
		{name: "unmanaged node never started", nodes: N{mkNode("a", unmanaged)}, shadows: S{mkShadow("a", idle, idle)}},
		{name: "paused: none starts", pol: paused, nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}},
		{name: "halted by a failure", nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, rebooted, failedAt(t0.Add(-time.Hour)), since(time.Hour))}},
		{name: "halted by a failure its resume does not repeat", nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle, failedAt(t0.Add(-time.Hour)), resumedAt(t0.Add(-2*time.Hour)))}},
		{name: "resumed failure no longer halts", nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle, running(newV), failedAt(t0.Add(-time.Hour)), resumedAt(t0.Add(-time.Hour)))},
			want:    []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "halt found only in the consistent LIST", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			listed: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle, failedAt(t0))}, want: []string{"list", "list policies"}},
		{name: "window closed: none starts, timer to its opening",
			pol:   inWindow("0 12 * * *", time.Hour, ""),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}, timer: []time.Duration{2 * time.Hour}},
		{name: "window open at its first second",
			pol:   inWindow("0 10 * * *", time.Hour, ""),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}, want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"},
			timer: []time.Duration{time.Hour}}, // its closing changes the WindowOpen condition
		{name: "window closed at its last instant",
			pol:   inWindow("0 9 * * *", time.Hour, ""),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}, timer: []time.Duration{23 * time.Hour}},
		{name: "back-off 2^2 minutes not over", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, crashed(2, t0.Add(-3*time.Minute)))},
			timer: []time.Duration{time.Minute}},
		{name: "back-off 2^2 minutes over", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, crashed(2, t0.Add(-4*time.Minute)))},
			want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "back-off capped at 24h", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, crashed(30, t0.Add(-23*time.Hour)))},
			timer: []time.Duration{time.Hour}},
		{name: "back-off cap over", nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle, crashed(30, t0.Add(-24*time.Hour)))},
			want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "not ready: not started", nodes: N{mkNode("a", unready("ExtensionsNotReady"))}, shadows: S{mkShadow("a", idle, idle)},
			events: []string{"Normal UpdateBlocked"}},
		{name: "updater extension not listed", nodes: N{mkNode("a", extensions(`[{"name":"kube-proxy"}]`))}, shadows: S{mkShadow("a", idle, idle)},
			events: []string{"Normal UpdateBlocked"}},
		{name: "unparsable extension list", nodes: N{mkNode("a", extensions(`{`))}, shadows: S{mkShadow("a", idle, idle)},
			events: []string{"Normal UpdateBlocked"}},
		{name: "excluded node", nodes: N{mkNode("a", label(nodev1alpha1.ExcludeLabel, "true"))}, shadows: S{mkShadow("a", idle, idle)},
			events: []string{"Normal UpdateBlocked"}},
		{name: "limit 1 held by a node in flight", nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", rebooted, staged)}},
		{name: "spec Idle but status still in flight counts", nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, monitor, running(newV), since(0))}},
		{name: "a failed node does not count", pol: limit(intstr.FromInt32(1)), nodes: N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, rebooted, failedAt(t0.Add(-time.Hour)), resumedAt(t0.Add(-time.Hour)), since(time.Hour))},
			want:    []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "limit 2: one more beside the one in flight, in name order", pol: limit(intstr.FromInt32(2)),
			nodes:   N{mkNode("a"), mkNode("b"), mkNode("c"), mkNode("d")},
			shadows: S{mkShadow("a", staged, idle), mkShadow("c", idle, idle), mkShadow("b", idle, idle), mkShadow("d", idle, idle)},
			want:    []string{"list", "list policies", start("b", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "limit 50% of 4 managed nodes", pol: limit(intstr.FromString("50%")),
			nodes:   N{mkNode("a"), mkNode("b"), mkNode("c"), mkNode("d")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle), mkShadow("c", idle, idle), mkShadow("d", idle, idle)},
			want:    []string{"list", "list policies", start("a", newV), start("b", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "limit 10% of 4 nodes is still 1", pol: limit(intstr.FromString("10%")),
			nodes:   N{mkNode("a"), mkNode("b")},
			shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle)},
			want:    []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "stale cache: the LIST shows the slot taken", pol: limit(intstr.FromInt32(1)),
			nodes: N{mkNode("a"), mkNode("b")}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle)},
			listed: S{mkShadow("a", idle, idle), mkShadow("b", staged, idle)}, want: []string{"list", "list policies"}},
		{name: "stale cache: the LIST shows the candidate already started", pol: limit(intstr.FromInt32(3)),
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)},
			listed: S{mkShadow("a", staged, idle)}, want: []string{"list", "list policies"}},
		{name: "per-zone limit skips the busy zone",
			pol:     all(limit(intstr.FromInt32(3)), zoneLimit(intstr.FromInt32(1))),
			nodes:   N{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b")), mkNode("b2", zone("b"))},
			shadows: S{mkShadow("a1", staged, staged), mkShadow("a2", idle, idle), mkShadow("b1", idle, idle), mkShadow("b2", idle, idle)},
			want:    []string{"list", "list policies", start("b1", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "per-zone percentage of the zone's nodes",
			pol:     all(limit(intstr.FromInt32(10)), zoneLimit(intstr.FromString("50%"))),
			nodes:   N{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("a3", zone("a")), mkNode("a4", zone("a")), mkNode("b1", zone("b"))},
			shadows: S{mkShadow("a1", idle, idle), mkShadow("a2", idle, idle), mkShadow("a3", idle, idle), mkShadow("a4", idle, idle), mkShadow("b1", idle, idle)},
			want:    []string{"list", "list policies", start("a1", newV), start("a2", newV), start("b1", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "own node waits for the others", pol: limit(intstr.FromInt32(5)), opts: func(o *Options) { o.OwnNode = "a" },
			nodes: N{mkNode("a"), mkNode("b")}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle)},
			want: []string{"list", "list policies", start("b", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "own node waits while another is in flight: no LIST needed", pol: limit(intstr.FromInt32(5)), opts: func(o *Options) { o.OwnNode = "a" },
			nodes: N{mkNode("a"), mkNode("b")}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, monitor, running(newV))}},
		{name: "own node last of all", opts: func(o *Options) { o.OwnNode = "a" },
			nodes: N{mkNode("a"), mkNode("b")}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle, running(newV))},
			want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateStarted"}},
		{name: "own node not held by a blocked node", opts: func(o *Options) { o.OwnNode = "a" },
			nodes: N{mkNode("a"), mkNode("b", unready("ExtensionsNotReady"))}, shadows: S{mkShadow("a", idle, idle), mkShadow("b", idle, idle)},
			want: []string{"list", "list policies", start("a", newV)}, events: []string{"Normal UpdateBlocked", "Normal UpdateStarted"}},
		{name: "dry run lists but writes nothing", opts: func(o *Options) { o.DryRun = true },
			nodes: N{mkNode("a")}, shadows: S{mkShadow("a", idle, idle)}, want: []string{"list", "list policies"}, events: []string{"Normal UpdateStarted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			pol := fleet()
			if tc.pol != nil {
				tc.pol(pol)
			}
			f := newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{pol}, tc.nodes, tc.shadows)
			f.listed = tc.listed
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			// Every first pass writes the policy's status (it had none).
			f.expect(append([]string{"status fleet"}, tc.want...))
			if got := distinct(f.events()); strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events = %v, want %v", got, tc.events)
			}
			if got := f.timers[startKey]; !equalDurations(got, tc.timer) {
				t.Errorf("start timers = %v, want %v", got, tc.timer)
			}
		})
	}
}

// TestHaltAndResume: a failure halts starts and is announced; a resume that
// repeats the failed value lifts it with an Event on that shadow, and the
// next node starts in the same pass.
func TestHaltAndResume(t *testing.T) {
	failed := mkShadow("b", idle, idle, running(newV), failedAt(t0), since(0))
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a"), mkNode("b")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), failed})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	if got := testutilCounter(f.c.metrics.RolloutHalted.WithLabelValues(HaltUpdateFailed)); got != 1 {
		t.Errorf("rollout_halted{UpdateFailed} = %v, want 1", got)
	}
	f.clock.Step(time.Minute)
	resumed := failed.DeepCopy()
	resumedAt(t0)(resumed) // the failed value, repeated
	_ = f.shadows.Update(resumed)
	_ = f.client.Tracker().Update(updatesv1alpha1.SchemeGroupVersion.WithResource("bottlerocketshadows"), resumed, "")
	f.client.ClearActions()
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The status write of the first pass is not in the cache: the pass
	// computes it from the cached policy again, finds it changed (no
	// longer halted) and writes it.
	f.expect([]string{"status fleet", "list", "list policies", "update a StagedAndPerformedUpdate 1.20.0"})
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal UpdateResumed,Normal UpdateStarted" {
		t.Errorf("events = %v", got)
	}
	if got := testutilCounter(f.c.metrics.RolloutHalted.WithLabelValues(HaltUpdateFailed)); got != 0 {
		t.Errorf("rollout_halted{UpdateFailed} = %v, want 0", got)
	}
}

// TestInFlightFinishes: a pause or a closed window stops starts, never the
// nodes already updating.
func TestInFlightFinishes(t *testing.T) {
	for name, mod := range map[string]policyMod{
		"paused":        paused,
		"window closed": inWindow("0 3 * * *", time.Hour, ""),
	} {
		t.Run(name, func(t *testing.T) {
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(mod, limit(intstr.FromInt32(2)))},
				[]*v1.Node{mkNode("a"), mkNode("b")},
				[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", staged, staged)})
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{"status fleet"})
			if err := f.c.syncShadow(f.ctx, "b"); err != nil {
				t.Fatal(err)
			}
			f.expect([]string{"update b RebootedIntoUpdate 1.20.0"})
		})
	}
}

// TestTheCountingTable is docs/updater.md's table of which nodes count toward the
// concurrency limits: a node still drained, tainted or aborting is not
// serving, whatever spec says.
func TestTheCountingTable(t *testing.T) {
	failed := failedAt(t0)
	for _, tc := range []struct {
		name   string
		shadow *updatesv1alpha1.BottlerocketShadow
		counts bool
	}{
		{"spec in flight", mkShadow("a", staged, idle, since(0)), true},
		{"spec in flight, agent aborting", mkShadow("a", rebooted, errReset, since(0)), true},
		{"spec Idle, agent still staged", mkShadow("a", idle, staged, since(0)), true},
		{"spec Idle, agent still rebooting", mkShadow("a", idle, rebooted, since(0)), true},
		{"spec Idle, agent completing", mkShadow("a", idle, monitor, since(0)), true},
		{"spec Idle, agent aborting after ErrorReset", mkShadow("a", idle, errReset, since(0)), true},
		{"spec Idle, agent in flight, marked failed", mkShadow("a", idle, rebooted, since(0), failed), false},
		{"spec Idle, agent aborting, marked failed", mkShadow("a", idle, errReset, since(0), failed), false},
		{"Idle", mkShadow("a", idle, idle), false},
		{"Idle, no status yet", mkShadow("a", idle, ""), false},
		{"Idle after a failure", mkShadow("a", idle, idle, since(0), failed), false},
		{"spec Idle, agent completing, marked failed, its rollback to start",
			mkShadow("a", idle, monitor, since(0), failed, running(newV), specVersion(newV), fromVersion(oldV), rolledBack(newV)), true},
		{"Idle on the failed version, its rollback to start",
			mkShadow("a", idle, idle, since(0), failed, running(newV), specVersion(newV), fromVersion(oldV), rolledBack(newV)), true},
		{"Idle on another version after a failure that named a rollback",
			mkShadow("a", idle, idle, since(0), failed, running(oldV), specVersion(newV), fromVersion(oldV), rolledBack(newV)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := counts(tc.shadow); got != tc.counts {
				t.Errorf("counts = %v, want %v", got, tc.counts)
			}
		})
	}
}

// TestAnErrorResetHoldsItsSlotUntilTheAgentReportsIdle: after a failure
// before the reboot the node may still be tainted and drained; the next
// node must not start until its agent has aborted.
func TestAnErrorResetHoldsItsSlotUntilTheAgentReportsIdle(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a"), mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, errReset, since(time.Minute), crashed(1, t0)), mkShadow("b", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
}

// notOfferedAt is the agent's report of a first try that found the version
// not offered: the condition turned True with this try.
func notOfferedAt(at time.Time) shadowMod { return notOfferedSince(at, at) }

// notOfferedSince is the agent's report of a try at at that found the
// version not offered, by a node waiting for it since since.
func notOfferedSince(since, at time.Time) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) {
		s.Status.StateTransitionFailureTimestamp = &metav1.Time{Time: at}
		s.Status.Conditions = []metav1.Condition{{Type: updatesv1alpha1.ConditionUpdateFailed, Status: metav1.ConditionTrue,
			Reason: updatesv1alpha1.ReasonVersionNotOffered, Message: "version 1.20.0 is not offered to this node", LastTransitionTime: metav1.Time{Time: since}}}
	}
}

// TestANodeNotOfferedItsPinYetWaitsForItsNextRefresh: Bottlerocket releases
// in waves, so a pinned version may not be offered to a node yet. That is no
// failure: no crashCount, no Warning, and the node is tried again after its
// agent's next refresh rather than backing off towards 24 h.
func TestANodeNotOfferedItsPinYetWaitsForItsNextRefresh(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, errReset, since(time.Minute), notOfferedAt(t0))})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle 1.20.0"})
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal UpdateWaiting" {
		t.Errorf("events = %v, want Normal UpdateWaiting", got)
	}
	// The tries after the first re-check, for days at times: the node goes
	// back to Idle without an Event; the condition says since when it waits.
	f = newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, errReset, since(time.Minute), notOfferedSince(t0.Add(-48*time.Hour), t0))})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update n1 Idle 1.20.0"})
	if got := f.events(); len(got) != 0 {
		t.Errorf("events of a re-check = %v, want none", got)
	}

	f = newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", idle, idle, notOfferedAt(t0.Add(-time.Minute)))})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	if got := f.timers[startKey]; !equalDurations(got, []time.Duration{time.Minute}) {
		t.Errorf("start timers = %v, want a retry in 1m, after the agent's next refresh", got)
	}
}

// TestAFailureDueAtTheStartPassIsRecordedBeforeAnyStart: a node past its
// deadline halts the rollout. The start pass records due failures before it
// starts anything, so no node starts in the instant between a failure
// becoming due and its node's own sync recording it.
func TestAFailureDueAtTheStartPassIsRecordedBeforeAnyStart(t *testing.T) {
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(limit(intstr.FromInt32(2)))}, []*v1.Node{mkNode("a"), mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", monitor, monitor, running(newV), since(monitorDL)), mkShadow("b", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update a Idle 1.20.0 failed=DeadlineExceeded:"})
}

// TestAStartPassWithTheLimitReachedInItsCacheMakesNoList: the cache can
// only lag behind the slots taken (a freed slot's event brings the pass
// back), so a pass whose cache already shows every candidate blocked by a
// limit starts nothing and needs no consistent LIST.
func TestAStartPassWithTheLimitReachedInItsCacheMakesNoList(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("a"), mkNode("b")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", rebooted, staged, since(time.Minute))})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
}

// A pinned policy with ignoreWaves passes it to the node it starts, and on
// through the update's later states; Idle drops it.
func TestAPolicyThatIgnoresWavesAsksTheAgentToTakeItsPinAheadOfItsWave(t *testing.T) {
	pinIgnoringWaves := func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.TargetVersion, p.Spec.IgnoreWaves = newV, true }
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(pinIgnoringWaves)}, []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.actions(); !slices.Contains(got, "update a StagedAndPerformedUpdate 1.20.0 ignoreWaves") {
		t.Fatalf("actions %v, want the start to ask for ignoreWaves", got)
	}

	f = newFixture(t, defaultOptions(), []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", staged, staged, func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.IgnoreWaves = true })})
	if err := f.c.syncShadow(f.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"update a RebootedIntoUpdate 1.20.0 ignoreWaves"})
}
