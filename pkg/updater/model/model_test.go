package model

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	t0  = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	cfg = Config{MaxConcurrent: 1, MaxConcurrentPerZone: 0, Staged: 15 * time.Minute, Rebooted: 30 * time.Minute,
		Monitoring: 20 * time.Minute, ReturnToIdle: 10 * time.Minute, Soak: 5 * time.Minute, NotOfferedRetry: 2 * time.Minute}
)

func idleShadow(name string) Shadow {
	return Shadow{Name: name, NodeUID: "uid-" + name, Spec: Idle, Status: Idle, CurrentVersion: "1.0.0", TargetVersion: "1.1.0"}
}

func healthyNode(name, zone string) Node {
	return Node{Name: name, UID: "uid-" + name, Zone: zone, Managed: true, ExtensionsReady: true, Healthy: true, ListsUpdater: true}
}

func world(shadows ...Shadow) World {
	w := World{Now: t0, Shadows: map[string]Shadow{}, Nodes: map[string]Node{}}
	for _, s := range shadows {
		w.Shadows[s.Name] = s
		w.Nodes[s.Name] = healthyNode(s.Name, "z")
	}
	return w
}

// The counting table of docs/updater.md, row by row.
func TestCountsFollowsTheCountingTable(t *testing.T) {
	failedNow := t0.Format(time.RFC3339)
	for _, tc := range []struct {
		name string
		s    Shadow
		want bool
	}{
		{"spec in flight, not failed", Shadow{Spec: Staged, Status: Idle, SpecSince: t0}, true},
		{"spec in flight, failed", Shadow{Spec: Rebooted, Status: Staged, SpecSince: t0, Failed: failedNow}, false},
		{"spec Idle, status in flight", Shadow{Spec: Idle, Status: Monitoring, SpecSince: t0}, true},
		{"spec Idle, status ErrorReset", Shadow{Spec: Idle, Status: ErrorReset, SpecSince: t0}, true},
		{"spec Idle, status in flight, failed", Shadow{Spec: Idle, Status: Rebooted, SpecSince: t0, Failed: failedNow}, false},
		{"spec Idle, status Idle", Shadow{Spec: Idle, Status: Idle, SpecSince: t0}, false},
		{"spec Idle, no status", Shadow{Spec: Idle}, false},
		{"an older failure does not mark a later attempt", Shadow{Spec: Staged, SpecSince: t0, Failed: t0.Add(-time.Hour).Format(time.RFC3339)}, true},
		{"spec Idle, status in flight, failed, its rollback to start", Shadow{Spec: Idle, Status: Monitoring, SpecSince: t0, Failed: failedNow,
			SpecVersion: "1.1.0", CurrentVersion: "1.1.0", FromVersion: "1.0.0", Rollback: "1.1.0"}, true},
		{"spec Idle, status Idle on the failed version, its rollback to start", Shadow{Spec: Idle, Status: Idle, SpecSince: t0, Failed: failedNow,
			SpecVersion: "1.1.0", CurrentVersion: "1.1.0", FromVersion: "1.0.0", Rollback: "1.1.0"}, true},
		{"spec Idle, status Idle on another version, failed: no rollback will start", Shadow{Spec: Idle, Status: Idle, SpecSince: t0, Failed: failedNow,
			SpecVersion: "1.1.0", CurrentVersion: "1.0.0", FromVersion: "1.0.0", Rollback: "1.1.0"}, false},
		{"failed, the annotation of an earlier rollback", Shadow{Spec: Idle, Status: Monitoring, SpecSince: t0, Failed: failedNow,
			SpecVersion: "1.2.0", CurrentVersion: "1.2.0", FromVersion: "1.0.0", Rollback: "1.1.0"}, false},
		{"failed, no older version recorded", Shadow{Spec: Idle, Status: Monitoring, SpecSince: t0, Failed: failedNow,
			SpecVersion: "1.1.0", CurrentVersion: "1.1.0", Rollback: "1.1.0"}, false},
	} {
		if got := Counts(tc.s); got != tc.want {
			t.Errorf("%s: Counts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAStartBeyondTheLimitIsNotAllowed(t *testing.T) {
	a, b := idleShadow("a"), idleShadow("b")
	a.Spec, a.Status, a.SpecSince, a.SpecVersion = Staged, Idle, t0, "1.1.0"
	w := world(a, b)
	next := b
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	if why := cfg.Allowed(w, b, next); !strings.Contains(why, "limit 1") {
		t.Fatalf("Allowed = %q, want the limit named", why)
	}
	w.Shadows["a"] = idleShadow("a")
	if why := cfg.Allowed(w, b, next); why != "" {
		t.Fatalf("with the slot free, Allowed = %q", why)
	}
}

// TestARollbackStillToStartHoldsItsSlotAfterAResume: a resume between a
// health gate's failure and its rollback makes no start due nor allowed
// while the rollback will take the slot (seed 8071646136539781039); once
// no rollback will start, the slot is free.
func TestARollbackStillToStartHoldsItsSlotAfterAResume(t *testing.T) {
	failedAt := t0.Add(-time.Minute).Format(time.RFC3339)
	a, b := idleShadow("a"), idleShadow("b")
	a.Status, a.SpecSince, a.SpecVersion, a.CurrentVersion = Monitoring, t0.Add(-time.Minute), "1.1.0", "1.1.0"
	a.Failed, a.Resume, a.FromVersion, a.Rollback = failedAt, failedAt, "1.0.0", "1.1.0"
	w := world(a, b)
	next := b
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	if got := cfg.Due(w); len(got) != 0 {
		t.Errorf("the agent still completes the failed update: Due = %v, want nothing", got)
	}
	if why := cfg.Allowed(w, b, next); !strings.Contains(why, "limit 1") {
		t.Errorf("the agent still completes the failed update: Allowed = %q, want the limit named", why)
	}
	a.Status = Idle
	w.Shadows["a"] = a
	if got := fmt.Sprint(cfg.Due(w)); got != "[a: Rollback 1.0.0]" {
		t.Errorf("the agent reports Idle: Due = %v, want the rollback only", got)
	}
	if why := cfg.Allowed(w, b, next); !strings.Contains(why, "limit 1") {
		t.Errorf("the rollback is due: Allowed = %q, want the limit named", why)
	}
	a.CurrentVersion = "1.0.0" // the host went back on its own: no rollback
	w.Shadows["a"] = a
	if got := fmt.Sprint(cfg.Due(w)); got != "[b: Start 1.1.0]" {
		t.Errorf("no rollback will start: Due = %v, want b started", got)
	}
	if why := cfg.Allowed(w, b, next); why != "" {
		t.Errorf("no rollback will start: Allowed = %q", why)
	}
}

func TestANodeDeletedPastItsDrainOwesAFailureAndOneDeletedBeforeFreesItsSlot(t *testing.T) {
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion = Rebooted, Staged, t0, "1.1.0"
	w := world(s)
	delete(w.Nodes, "a")
	if got := cfg.Due(w); len(got) != 0 {
		t.Fatalf("drained, not yet asked to reboot: Due = %v, want nothing (a scale-down)", got)
	}
	if n, _ := w.InFlight(); n != 0 {
		t.Fatalf("a scaled-down node takes a slot (%d in flight)", n)
	}
	s.RebootRequested = true
	w.Shadows["a"] = s
	if got := cfg.Due(w); len(got) != 1 || got[0].What != "Fail "+NodeDeleted {
		t.Fatalf("past its drain: Due = %v, want Fail %s", got, NodeDeleted)
	}
}

// Every managed node has a shadow; a node that left the managed set loses
// its shadow once it is at rest (no update in flight, no lock of the agent's
// to restore, no failure halting the policy); the shadow of a Node
// re-created under its name is the orphans' business.
func TestAShadowFollowsTheManagedSetButAnUpdateInFlightIsNeverOrphaned(t *testing.T) {
	inFlight := idleShadow("a")
	inFlight.Spec, inFlight.Status, inFlight.SpecSince, inFlight.SpecVersion = Staged, Idle, t0, "1.1.0"
	returning := idleShadow("a")
	returning.Status = ErrorReset
	pinned := idleShadow("a")
	pinned.Pinned = true
	halting := idleShadow("a")
	halting.Failed = t0.Format(time.RFC3339)
	resumed := halting
	resumed.Resume = halting.Failed
	unmanaged := healthyNode("a", "z")
	unmanaged.Managed = false
	recreated := healthyNode("a", "z")
	recreated.UID = "uid-a-2"
	for _, tc := range []struct {
		name      string
		shadow    *Shadow
		node      Node
		due       string
		deleteWhy string
	}{
		{name: "managed, with its shadow", shadow: ptr(idleShadow("a")), node: healthyNode("a", "z"), deleteWhy: "the node is managed"},
		{name: "managed, without a shadow", node: healthyNode("a", "z"), due: "CreateShadow"},
		{name: "outside the set, at rest", shadow: ptr(idleShadow("a")), node: unmanaged, due: "DeleteShadow"},
		{name: "outside the set, in flight", shadow: &inFlight, node: unmanaged, deleteWhy: "never orphaned"},
		{name: "outside the set, still aborting", shadow: &returning, node: unmanaged, deleteWhy: "never orphaned"},
		{name: "outside the set, a lock to restore", shadow: &pinned, node: unmanaged, deleteWhy: "never orphaned"},
		{name: "outside the set, its failure halting the policy", shadow: &halting, node: unmanaged, deleteWhy: "never orphaned"},
		{name: "outside the set, its failure resumed", shadow: &resumed, node: unmanaged, due: "DeleteShadow"},
		{name: "outside the set, without a shadow", node: unmanaged},
		{name: "re-created under the name of an idle shadow", shadow: ptr(idleShadow("a")), node: recreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			w.Nodes["a"] = tc.node
			if tc.shadow != nil {
				w.Shadows["a"] = *tc.shadow
			}
			if got := ShadowDue(w, "a"); got != tc.due {
				t.Errorf("ShadowDue = %q, want %q", got, tc.due)
			}
			if tc.shadow == nil {
				return
			}
			if got := ShadowDeletionAllowed(w, *tc.shadow); !strings.Contains(got, tc.deleteWhy) || (tc.deleteWhy == "") != (got == "") {
				t.Errorf("ShadowDeletionAllowed = %q, want %q", got, tc.deleteWhy)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestAMissedDeadlineIsDueAndMovingOnInsteadIsNotAllowed(t *testing.T) {
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion = Staged, Staged, t0, "1.1.0"
	w := world(s)
	w.Now = t0.Add(cfg.Staged)
	if got := cfg.Due(w); len(got) != 1 || got[0].What != "Fail "+DeadlineExceeded {
		t.Fatalf("Due = %v, want the deadline failure", got)
	}
	next := s
	next.Spec, next.SpecSince = Rebooted, w.Now
	if why := cfg.Allowed(w, s, next); !strings.Contains(why, "is due") {
		t.Fatalf("Allowed = %q, want the due failure named", why)
	}
}

func TestAnAbortIsAllowedOnlyAfterTheAgentReportedErrorReset(t *testing.T) {
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion = Staged, Idle, t0, "1.1.0"
	next := s
	next.Spec = Idle
	if why := cfg.Allowed(world(s), s, next); why == "" {
		t.Fatal("an update called off without ErrorReset or a failure was allowed")
	}
	s.Status = ErrorReset
	if why := cfg.Allowed(world(s), s, next); why != "" {
		t.Fatalf("the abort of an ErrorReset was refused: %s", why)
	}
}

func TestTheHealthGatePassesOnlyAfterTheSoak(t *testing.T) {
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion, s.HealthySince = Monitoring, Monitoring, t0, "1.1.0", t0
	w := world(s)
	w.Now = t0.Add(cfg.Soak - time.Second)
	if got := cfg.Due(w); len(got) != 0 {
		t.Fatalf("before the soak ended: Due = %v", got)
	}
	w.Now = t0.Add(cfg.Soak)
	if got := cfg.Due(w); len(got) != 1 || got[0].What != "Succeed" {
		t.Fatalf("after the soak: Due = %v, want Succeed", got)
	}
}

// An operator absent at the soak's end and at the deadline owes the pass
// once back, not the deadline's failure, for a node whose soak ended before
// the deadline and that is ready now; a soak that would have ended only at
// the deadline, or a node not ready now, still owes the failure.
func TestADeadlinePassedAfterASoakThatEndedInTimeOwesThePassNotTheFailure(t *testing.T) {
	for _, tc := range []struct {
		name        string
		healthyFrom time.Duration // after SpecSince
		ready       bool
		want        string
	}{
		{"soak ended before the deadline, ready", time.Minute, true, "Succeed"},
		{"soak ended before the deadline, not ready", time.Minute, false, "Fail " + DeadlineExceeded},
		{"soak ends at the deadline", cfg.Monitoring - cfg.Soak, true, "Fail " + DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := idleShadow("a")
			s.Spec, s.Status, s.SpecSince, s.SpecVersion = Monitoring, Monitoring, t0, "1.1.0"
			s.HealthySince = t0.Add(tc.healthyFrom)
			w := world(s)
			n := w.Nodes["a"]
			n.Healthy = tc.ready
			w.Nodes["a"] = n
			w.Now = t0.Add(cfg.Monitoring + time.Minute)
			got := cfg.Due(w)
			if len(got) == 0 || got[0].What != tc.want {
				t.Fatalf("Due = %v, want %s first", got, tc.want)
			}
		})
	}
}

func TestNothingStartsOutsideAWindowNorWhilePaused(t *testing.T) {
	w := world(idleShadow("a"))
	c := cfg
	c.Windows = []Window{{Every: 5 * time.Minute, Open: time.Minute}}
	for _, tc := range []struct {
		at   time.Duration // after t0, a multiple of 5 minutes
		want string
	}{
		{0, ""},                         // the window opens
		{time.Minute - time.Second, ""}, // its last second
		{time.Minute, "OutsideWindow"},  // it closes
		{5*time.Minute - time.Second, "OutsideWindow"},
		{5 * time.Minute, ""},
	} {
		w.Now = t0.Add(tc.at)
		if got := c.Halted(w); got != tc.want {
			t.Errorf("at +%s: Halted = %q, want %q", tc.at, got, tc.want)
		}
		if got := len(c.Starts(w)); (got == 0) != (tc.want != "") {
			t.Errorf("at +%s: %d starts", tc.at, got)
		}
	}
	w.Now = t0
	c.Paused = true
	if got := c.Halted(w); got != "Paused" {
		t.Errorf("paused: Halted = %q", got)
	}
	next := idleShadow("a")
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	if why := c.Allowed(w, idleShadow("a"), next); !strings.Contains(why, "Paused") {
		t.Errorf("a start while paused: Allowed = %q", why)
	}
}

// A version starts only once it has been offered for MinReleaseAge, and a
// version nobody was offered has no age; the model owes no start before.
func TestAStartOfAVersionYoungerThanMinReleaseAgeIsNotAllowed(t *testing.T) {
	c := cfg
	c.MinReleaseAge = time.Hour
	a := idleShadow("a")
	next := a
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	for _, tc := range []struct {
		name    string
		offered map[string]time.Time
		allowed bool
	}{
		{"offered 59m ago", map[string]time.Time{"1.1.0": t0.Add(-59 * time.Minute)}, false},
		{"offered 1h ago", map[string]time.Time{"1.1.0": t0.Add(-time.Hour)}, true},
		{"never offered", nil, false},
	} {
		w := world(a)
		w.FirstOffered = tc.offered
		why := c.Allowed(w, a, next)
		if (why == "") != tc.allowed {
			t.Errorf("%s: Allowed says %q, want allowed %v", tc.name, why, tc.allowed)
		}
		if due := c.Due(w); (len(due) > 0) != tc.allowed {
			t.Errorf("%s: Due = %v, want a start owed %v", tc.name, due, tc.allowed)
		}
	}
	c.MinReleaseAge = 0
	if why := c.Allowed(world(a), a, next); why != "" {
		t.Errorf("without minReleaseAge a version never seen offered is refused: %s", why)
	}
}

// After an update passed its health gate, no start for DelayBetweenNodes.
func TestAStartWithinDelayBetweenNodesOfASuccessIsNotAllowed(t *testing.T) {
	c := cfg
	c.DelayBetweenNodes = 10 * time.Minute
	a := idleShadow("a")
	next := a
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	for ago, allowed := range map[time.Duration]bool{time.Second: false, 9*time.Minute + 59*time.Second: false, 10 * time.Minute: true} {
		w := world(a)
		w.LastSucceeded = t0.Add(-ago)
		if why := c.Allowed(w, a, next); (why == "") != allowed {
			t.Errorf("success %s ago: Allowed says %q, want allowed %v", ago, why, allowed)
		}
		if due := c.Due(w); (len(due) > 0) != allowed {
			t.Errorf("success %s ago: Due = %v, want a start owed %v", ago, due, allowed)
		}
	}
	if why := c.Allowed(world(a), a, next); why != "" {
		t.Errorf("with no success yet the first start is refused: %s", why)
	}
}

// An unfinished anywhere pod holds every start; an onNode pod holds its
// node's start only, and another node takes the slot.
func TestABlockingPodHoldsTheStartsItsGateSays(t *testing.T) {
	c := cfg
	c.GateAnywhere, c.GateOnNode = true, true
	a, b := idleShadow("a"), idleShadow("b")
	next := a
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	for _, tc := range []struct {
		name     string
		anywhere []string
		onNode   map[string][]string
		gateOff  bool
		allowed  bool
		due      string
	}{
		{name: "no pod", allowed: true, due: "a: Start 1.1.0"},
		{name: "a pod anywhere", anywhere: []string{"batch/backup"}},
		{name: "a pod anywhere, the gate unset", anywhere: []string{"batch/backup"}, gateOff: true, allowed: true, due: "a: Start 1.1.0"},
		{name: "a pod on a", onNode: map[string][]string{"a": {"db/migrate"}}, due: "b: Start 1.1.0"},
		{name: "a pod on b", onNode: map[string][]string{"b": {"db/migrate"}}, allowed: true, due: "a: Start 1.1.0"},
	} {
		c := c
		if tc.gateOff {
			c.GateAnywhere = false
		}
		w := world(a, b)
		w.AnywherePods, w.OnNodePods = tc.anywhere, tc.onNode
		if why := c.Allowed(w, a, next); (why == "") != tc.allowed {
			t.Errorf("%s: Allowed says %q, want allowed %v", tc.name, why, tc.allowed)
		}
		var due []string
		for _, d := range c.Due(w) {
			due = append(due, d.String())
		}
		if strings.Join(due, "; ") != tc.due {
			t.Errorf("%s: Due = %q, want %q", tc.name, due, tc.due)
		}
	}
}

// The alerts gate: a firing alert or a source that cannot answer holds
// every start; in a soak, an alert naming the node fails it, and a source
// that cannot answer pauses the soak and its deadline, which then fail
// nothing and pass nothing until the pause ends.
func TestTheAlertsGateHoldsStartsFailsTheNodeItNamesAndPausesTheSoak(t *testing.T) {
	c := cfg
	c.Alerts = true
	a := idleShadow("a")
	next := a
	next.Spec, next.SpecVersion, next.SpecSince = Staged, "1.1.0", t0
	for _, tc := range []struct {
		name    string
		alerts  []Alert
		down    bool
		allowed bool
	}{
		{name: "nothing fires", allowed: true},
		{name: "an alert fires", alerts: []Alert{{Name: "DiskFull"}}},
		{name: "the source cannot answer", down: true},
	} {
		w := world(a)
		w.Alerts, w.AlertsDown = tc.alerts, tc.down
		if why := c.Allowed(w, a, next); (why == "") != tc.allowed {
			t.Errorf("%s: Allowed says %q, want allowed %v", tc.name, why, tc.allowed)
		}
		if due := c.Due(w); (len(due) == 1) != tc.allowed {
			t.Errorf("%s: Due = %v", tc.name, due)
		}
	}

	// m soaks: in MonitoringUpdate for 19m (deadline in 1m), soaking 4m.
	m := Shadow{Name: "m", NodeUID: "uid-m", Spec: Monitoring, Status: Monitoring, SpecVersion: "1.1.0", CurrentVersion: "1.1.0",
		FromVersion: "1.0.0", SpecSince: t0.Add(-19 * time.Minute), HealthySince: t0.Add(-4 * time.Minute)}
	w := world(m)
	w.Alerts = []Alert{{Name: "NodeDown", Node: "m"}, {Name: "Other", Node: "x"}}
	if f := c.FailureDue(w, m); f != FiringAlert {
		t.Errorf("an alert names m: FailureDue = %q, want FiringAlert", f)
	}
	w.Alerts, w.AlertsDown = nil, true
	if due := c.Due(w); len(due) != 1 || due[0].What != "SoakPause" {
		t.Errorf("the source is down: Due = %v, want SoakPause", due)
	}
	paused := m
	paused.SoakPausedSince = t0
	if why := c.Allowed(w, m, paused); why != "" {
		t.Errorf("pausing the soak: %s", why)
	}
	// Ten minutes later, nine past the deadline, still paused: nothing is
	// due, and neither a failure nor a pass is allowed.
	w.Now = t0.Add(10 * time.Minute)
	w.Shadows["m"] = paused
	if due := c.Due(w); len(due) != 0 {
		t.Errorf("paused past the deadline: Due = %v, want nothing", due)
	}
	failed, passed := paused, paused
	failed.Spec, failed.Failed = Idle, w.Now.Format(time.RFC3339)
	passed.Spec = Idle
	for _, next := range []Shadow{failed, passed} {
		if why := c.Allowed(w, paused, next); why == "" {
			t.Errorf("a paused soak ended %q", next.Failed)
		}
	}
	// The source answers again: the pause ends, ten minutes added.
	w.AlertsDown = false
	resumed := paused
	resumed.SoakPausedSince, resumed.SoakPaused = time.Time{}, 10*time.Minute
	if due := c.Due(w); len(due) != 1 || due[0].What != "SoakResume" {
		t.Errorf("the source answers again: Due = %v, want SoakResume", due)
	}
	if why := c.Allowed(w, paused, resumed); why != "" {
		t.Errorf("resuming the soak: %s", why)
	}
	short := resumed
	short.SoakPaused = time.Minute
	if why := c.Allowed(w, paused, short); why == "" {
		t.Error("a resume that adds a minute for a ten-minute pause was allowed")
	}
	// The deadline and the soak both end ten minutes later.
	w.Shadows["m"] = resumed
	if f := c.FailureDue(w, resumed); f != "" {
		t.Errorf("after the pause: FailureDue = %q, want none until t0+11m", f)
	}
}
