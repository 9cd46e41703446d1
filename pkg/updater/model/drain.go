package model

import "strconv"

// The drain hand-off (docs/updater.md, RebootedIntoUpdate): the operator
// drains the node once it carries the readiness taint and its agent waits,
// says so with the drained annotation naming the Node's bootID, and removes
// that annotation with every change of spec; the agent reboots for its update
// only once the annotation names the boot it runs in. The judges below check
// each side of that hand-off on one write, one eviction or one reboot.

// WaitsForDrain: the node is at the operator's drain. Its spec is
// RebootedIntoUpdate and its agent still reports StagedAndPerformedUpdate
// with no reboot asked for: it released its Lease and waits for the drained
// annotation.
func WaitsForDrain(s Shadow) bool {
	return s.Spec == Rebooted && s.Status == Staged && !s.RebootRequested
}

// DrainedAllowed judges a write of the operator's that changes the drained
// annotation, or changes spec while one is set (prev the shadow the write
// replaced, next what was written, w what the operator could see). It
// returns why the write breaks the hand-off, or "".
func DrainedAllowed(w World, prev, next Shadow) string {
	specChanged := prev.Spec != next.Spec || prev.SpecVersion != next.SpecVersion || !prev.SpecSince.Equal(next.SpecSince)
	switch {
	case specChanged && next.Drained != "":
		// Choice: a transition that writes a fresh drained annotation is as
		// wrong as one that keeps the old: only the drain step marks, and it
		// changes no spec.
		return "spec changed and the drained annotation " + next.Drained + " survived it: a drain belongs to one RebootedIntoUpdate"
	case specChanged || prev.Drained == next.Drained:
		return ""
	case next.Drained == "":
		return "the drained annotation " + prev.Drained + " was removed without a change of spec"
	}
	if !WaitsForDrain(prev) {
		return "marked drained while the node is not at the drain (spec " + string(prev.Spec) + ", the agent reports " + string(prev.Status) + reboot(prev) + ")"
	}
	node, ok := w.NodeOf(prev)
	switch {
	case !ok:
		return "marked drained, but its Node does not exist"
	case !node.Tainted:
		return "marked drained a node without the readiness taint"
	case next.Drained != node.BootID:
		return "marked drained in boot " + next.Drained + ", but the Node runs boot " + node.BootID
	}
	return ""
}

// EvictionAllowed judges one eviction by the operator of a pod on s's node:
// nothing is evicted before the node carries the readiness taint, and only
// while its update is at the drain or waits for the reboot the drain allowed.
func EvictionAllowed(w World, s Shadow) string {
	node, ok := w.NodeOf(s)
	switch {
	case !ok:
		return "evicted a pod from a node it does not know"
	case !node.Tainted:
		return "evicted a pod from a node without the readiness taint"
	case s.Spec != Rebooted || s.Status != Staged:
		return "evicted a pod while the node is not at the drain (spec " + string(s.Spec) + ", the agent reports " + string(s.Status) + ")"
	case s.RebootRequested && s.Drained != node.BootID:
		return "evicted a pod from a node whose agent asked for a reboot without a drain of this boot"
	}
	return ""
}

// RebootAllowed judges the agent's reboot of its node, in boot bootID, for
// the update s describes: only once the operator marked that boot drained.
func RebootAllowed(s Shadow, bootID string) string {
	if s.Drained != bootID {
		return "rebooted from boot " + bootID + " for its update, but the drained annotation says " + quote(s.Drained)
	}
	return ""
}

func reboot(s Shadow) string {
	if s.RebootRequested {
		return ", reboot asked for"
	}
	return ""
}

func quote(s string) string { return `"` + s + `"` }

// The policy's drain options (docs/updater.md, "Per-policy drain"): the
// drain never evicts a pod its skipPodSelector selects (it stops with the
// reboot), evicts a pod without a controller only with force and one with
// emptyDir data only with deleteEmptyDirData, and every eviction gives the
// pod gracePeriodSeconds when the policy sets it.

// Pod is what the drain's rules read of one pod on the node.
type Pod struct {
	Name string
	// Skip: the policy's skipPodSelector selects it; Unmanaged: it has no
	// controller; LocalData: it has an emptyDir volume.
	Skip, Unmanaged, LocalData bool
}

// DrainOptions are the drain's options as the node's policy and the
// operator's configuration resolve them.
type DrainOptions struct {
	Force, DeleteEmptyDirData bool
	// GracePeriodSeconds is what each eviction passes; nil: the pod's own.
	GracePeriodSeconds *int64
}

// PodEvictionViolation judges one eviction of p with grace (the
// DeleteOptions' gracePeriodSeconds) against the drain's options; "" when
// allowed.
func (c Config) PodEvictionViolation(p Pod, grace *int64) string {
	switch {
	case p.Skip:
		return "evicted a pod the policy's skipPodSelector selects"
	case p.Unmanaged && !c.Drain.Force:
		return "evicted a pod without a controller, without force"
	case p.LocalData && !c.Drain.DeleteEmptyDirData:
		return "evicted a pod with emptyDir data, without deleteEmptyDirData"
	case !sameGrace(grace, c.Drain.GracePeriodSeconds):
		return "evicted with gracePeriodSeconds " + graceString(grace) + ", the policy's is " + graceString(c.Drain.GracePeriodSeconds)
	}
	return ""
}

// StaysForTheReboot: the drain leaves p on the node, to stop with the
// reboot (the policy's skipPodSelector selects it).
func (c Config) StaysForTheReboot(p Pod) bool { return p.Skip }

func sameGrace(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func graceString(g *int64) string {
	if g == nil {
		return "unset (the pod's own)"
	}
	return strconv.FormatInt(*g, 10)
}
