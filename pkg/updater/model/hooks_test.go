package model

import (
	"strings"
	"testing"
	"time"
)

// At the drain with a beforeDrain hook: its run is owed, the drain waits
// for its success, and its failure is owed as the update's failure.
func TestTheDrainWaitsForTheBeforeDrainHookOfItsStepAndBootAndItsFailureIsDue(t *testing.T) {
	c := cfg
	c.BeforeDrain = true
	w, s := atDrain()
	if due := c.Due(w); len(due) != 1 || due[0].What != "Hook beforeDrain" {
		t.Fatalf("no run yet: Due = %v, want Hook beforeDrain", due)
	}
	if why := c.DrainHeld(w, s); why == "" {
		t.Error("no run yet: the drain was allowed")
	}
	run := HookRun{Node: "a", Hook: BeforeDrain, Since: t0, Boot: "b1"}
	w.Hooks = []HookRun{run}
	if due := c.Due(w); len(due) != 0 {
		t.Errorf("the run is running: Due = %v, want nothing", due)
	}
	if why := c.DrainHeld(w, s); !strings.Contains(why, "before its beforeDrain hook succeeded") {
		t.Errorf("the run is running: DrainHeld = %q", why)
	}
	// A run of an earlier step, or of another boot, is not this step's.
	for _, other := range []HookRun{{Node: "a", Hook: BeforeDrain, Since: t0.Add(-time.Minute), Boot: "b1", Succeeded: true},
		{Node: "a", Hook: BeforeDrain, Since: t0, Boot: "b0", Succeeded: true}} {
		w.Hooks = []HookRun{other}
		if why := c.DrainHeld(w, s); why == "" {
			t.Errorf("a success of %+v allowed this step's drain", other)
		}
	}
	run.Succeeded = true
	w.Hooks = []HookRun{run}
	if why := c.DrainHeld(w, s); why != "" {
		t.Errorf("the run succeeded: DrainHeld = %q", why)
	}
	run.Succeeded, run.Failed = false, true
	w.Hooks = []HookRun{run}
	if f := c.FailureDue(w, s); f != HookFailed {
		t.Errorf("the run failed: FailureDue = %q, want HookFailed", f)
	}
	if why := c.DrainHeld(w, s); !strings.Contains(why, "failed") {
		t.Errorf("the run failed: DrainHeld = %q, want the drain refused", why)
	}
	failed := s
	failed.Spec, failed.Failed = Idle, t0.Format(time.RFC3339)
	if why := c.Allowed(w, s, failed); why != "" {
		t.Errorf("recording the hook's failure: %s", why)
	}
}

// In the soak with an afterReboot hook: the update passes only once its
// run succeeded; a failed run is owed as a failure and never passes.
func TestTheHealthGatePassesOnlyOnceTheAfterRebootHookSucceeded(t *testing.T) {
	c := cfg
	c.AfterReboot = true
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion, s.HealthySince = Monitoring, Monitoring, t0, "1.1.0", t0
	w := world(s)
	w.Now = t0.Add(c.Soak)
	if due := c.Due(w); len(due) != 1 || due[0].What != "Hook afterReboot" {
		t.Fatalf("no run yet: Due = %v, want Hook afterReboot", due)
	}
	passed := s
	passed.Spec = Idle
	run := HookRun{Node: "a", Hook: AfterReboot, Since: t0}
	for _, tc := range []struct {
		name   string
		set    func(*HookRun)
		due    string
		passes bool
	}{
		{"running", func(*HookRun) {}, "", false},
		{"succeeded", func(r *HookRun) { r.Succeeded = true }, "Succeed", true},
		{"failed", func(r *HookRun) { r.Failed = true }, "Fail HookFailed", false},
	} {
		r := run
		tc.set(&r)
		w.Hooks = []HookRun{r}
		due := c.Due(w)
		if (tc.due == "" && len(due) != 0) || (tc.due != "" && (len(due) != 1 || due[0].What != tc.due)) {
			t.Errorf("%s: Due = %v, want %q", tc.name, due, tc.due)
		}
		if why := c.Allowed(w, s, passed); (why == "") != tc.passes {
			t.Errorf("%s: the pass: Allowed says %q, want allowed %v", tc.name, why, tc.passes)
		}
	}
	// A paused soak runs no hook.
	paused := s
	paused.SoakPausedSince = t0
	c.Alerts = true
	w.Shadows["a"], w.AlertsDown, w.Hooks = paused, true, nil
	if due := c.Due(w); len(due) != 0 {
		t.Errorf("the soak is paused: Due = %v, want nothing", due)
	}
}
