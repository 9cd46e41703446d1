package model

import "time"

// The hooks of docs/updater.md ("Hooks"): a policy's beforeDrain hook runs
// once a node is ready to be drained, and the drain begins only after it
// succeeded; its afterReboot hook runs in the soak, and the update passes
// its health gate only after it succeeded. A hook that fails or times out
// fails the update, which halts the policy. A hook runs once per step: the
// same step (the time the update entered it) in the same boot of the Node
// never runs it twice, even across operator restarts.

// The hooks, as spec.hooks names them.
const (
	BeforeDrain = "beforeDrain"
	AfterReboot = "afterReboot"
)

// HookFailed is the failure of an update whose hook failed or timed out.
const HookFailed = "HookFailed"

// HookRun is one run of a hook: a Job the operator created for one step of
// one node's update.
type HookRun struct {
	Node, Hook string
	// Since is the spec.stateTransitionTimestamp of the step the operator
	// ran it for, and Boot the Node's bootID then.
	Since time.Time
	Boot  string
	// Succeeded, or Failed (its pod failed or it ran past its timeout);
	// neither while it runs.
	Succeeded, Failed bool
}

// HookRun is the run of hook for s's current step in the boot its Node
// runs now, if the operator started one.
func (w World) HookRun(s Shadow, hook string) (HookRun, bool) {
	node, ok := w.NodeOf(s)
	if !ok {
		return HookRun{}, false
	}
	for _, r := range w.Hooks {
		if r.Node == s.Name && r.Hook == hook && r.Boot == node.BootID && r.Since.Equal(s.SpecSince) {
			return r, true
		}
	}
	return HookRun{}, false
}

// hookSucceeded: the policy has no such hook, or its run for s's step
// succeeded.
func (c Config) hookSucceeded(w World, s Shadow, hook string) bool {
	if !c.has(hook) {
		return true
	}
	r, ok := w.HookRun(s, hook)
	return ok && r.Succeeded
}

func (c Config) has(hook string) bool {
	switch hook {
	case BeforeDrain:
		return c.BeforeDrain
	case AfterReboot:
		return c.AfterReboot
	}
	return false
}

// hookReady is the hook the operator runs for s now, "" when none: the
// beforeDrain hook at the drain of a tainted node not yet drained in its
// boot, the afterReboot hook in a soak its alerts do not hold (paused, or
// its source cannot answer). Choice: a failure of the hook is read there
// too, so a node that lost readiness in its soak is failed by its deadline
// or by the hook once it is ready again.
func (c Config) hookReady(w World, s Shadow) string {
	node, ok := w.NodeOf(s)
	if !ok {
		return ""
	}
	switch {
	case c.BeforeDrain && WaitsForDrain(s) && node.Tainted && node.BootID != "" && s.Drained != node.BootID:
		return BeforeDrain
	case c.AfterReboot && soaking(w, s) && !SoakPausedNow(s) && !(c.Alerts && w.AlertsDown):
		return AfterReboot
	}
	return ""
}

// hookDue is what the hook of s's step owes now: a run to start ("Hook
// <name>"), a failure to record (HookFailed), or nothing.
func (c Config) hookDue(w World, s Shadow) string {
	hook := c.hookReady(w, s)
	if hook == "" {
		return ""
	}
	r, ok := w.HookRun(s, hook)
	switch {
	case !ok:
		return "Hook " + hook
	case r.Failed:
		return "Fail " + HookFailed
	}
	return ""
}

// DrainHeld says why the node's drain may not have begun ("" when it may):
// its policy's beforeDrain hook has not succeeded for this step and boot.
// It judges each eviction and the drained annotation's write.
func (c Config) DrainHeld(w World, s Shadow) string {
	if c.hookSucceeded(w, s, BeforeDrain) {
		return ""
	}
	if r, ok := w.HookRun(s, BeforeDrain); ok && r.Failed {
		return "drained although its beforeDrain hook failed"
	}
	return "drained before its beforeDrain hook succeeded"
}
