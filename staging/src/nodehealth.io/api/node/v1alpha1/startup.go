package v1alpha1

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxStartupExtensions bounds the extensions a StartupTimeline lists: the
// slowest are kept and the others counted in Omitted, so that the boot record,
// which every Node informer caches, stays well under a kilobyte whatever the
// node's list holds (64 extensions of 63-character names).
const MaxStartupExtensions = 8

// StartupResolution is what every duration of a StartupTimeline is rounded to.
const StartupResolution = 100 * time.Millisecond

// StartupTimeline is the start-up of a node's current boot as the node-health
// controller observed it: from the moment it observed the cause (a new node,
// a reboot, a re-creation, or its own start finding the node gated) to each
// required extension's first ready renewal and to the removal of the readiness
// taint. It is field "startup" of the nodehealth.io/boot record, written in the
// patch that removes the taint; the record's bootID and uid say which boot and
// incarnation of the node it belongs to.
//
// Clocks: Start and every duration but SinceCreation are the controller's
// own clock (when it observed each thing, as for every freshness judgement it
// makes). SinceCreation starts at the Node's creationTimestamp, the API
// server's clock, and ends at the ungate, the controller's clock.
type StartupTimeline struct {
	// Cause is the reason the gate began: NodeRegistered, NodeRebooted,
	// NodeRecreated, or ControllerStarted (the controller started and found
	// the node gated before it was ever ready in its boot).
	Cause string `json:"cause"`
	// FoundAtStart is true when the controller found the cause in its initial
	// view (it started, or a new leader took over, after the node booted or
	// was created): Start is then that moment, and the start-up began an
	// unknown time earlier. Such timelines are not counted in the start-up
	// histograms.
	FoundAtStart bool `json:"foundAtStart,omitempty"`
	// Start is when the controller observed the cause (RFC 3339, seconds).
	Start metav1.Time `json:"start"`
	// Ready is from Start to the ungate.
	Ready metav1.Duration `json:"ready"`
	// SinceCreation is set for a new or re-created node: from its
	// creationTimestamp to the ungate.
	SinceCreation *metav1.Duration `json:"sinceCreation,omitempty"`
	// Extensions are the required extensions, slowest first, at most
	// MaxStartupExtensions of them.
	Extensions []StartupExtension `json:"extensions,omitempty"`
	// Omitted counts the extensions left out of Extensions; each of them
	// became ready no later than the last one listed.
	Omitted int32 `json:"omitted,omitempty"`
}

// StartupExtension is one required extension of a StartupTimeline.
type StartupExtension struct {
	Name string `json:"name"`
	// Ready is from the timeline's Start to the first ready renewal of the
	// extension's Lease that the controller observed after the gate began.
	// Nil when the extension was not ready at the ungate: it failed open
	// after its startup timeout (failurePolicy Ungate).
	Ready *metav1.Duration `json:"ready,omitempty"`
}

// Slower reports whether a is listed before b in a timeline: an extension
// that never became ready first, then the later first ready renewal, then by
// name.
func Slower(a, b StartupExtension) bool {
	switch {
	case (a.Ready == nil) != (b.Ready == nil):
		return a.Ready == nil
	case a.Ready != nil && a.Ready.Duration != b.Ready.Duration:
		return a.Ready.Duration > b.Ready.Duration
	}
	return a.Name < b.Name
}

// RoundStartup rounds a start-up duration to StartupResolution.
func RoundStartup(d time.Duration) time.Duration { return d.Round(StartupResolution) }

// Summary says the timeline in one line, e.g. "ready 41s after reboot;
// slowest cni 38s, then kube-proxy 12s": the controller's NodeUngated Event
// carries it.
func (t *StartupTimeline) Summary() string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ready %s after %s", ShortDuration(t.Ready.Duration), causeNoun(t.Cause))
	if t.FoundAtStart {
		b.WriteString(" (found at the controller's start: the start-up began earlier)")
	}
	if t.SinceCreation != nil {
		fmt.Fprintf(&b, " (%s after creation)", ShortDuration(t.SinceCreation.Duration))
	}
	for i, e := range t.Extensions {
		if i == 2 {
			break
		}
		sep := "; slowest "
		if i > 0 {
			sep = ", then "
		}
		b.WriteString(sep + e.Name + " ")
		if e.Ready == nil {
			b.WriteString("never (failed open)")
		} else {
			b.WriteString(ShortDuration(e.Ready.Duration))
		}
	}
	return b.String()
}

func causeNoun(cause string) string {
	switch cause {
	case ReasonNodeRegistered:
		return "registration"
	case ReasonNodeRebooted:
		return "reboot"
	case ReasonNodeRecreated:
		return "re-creation"
	case ReasonControllerStarted:
		return "the controller started"
	}
	return "the gate began (" + cause + ")"
}

// ShortDuration prints a start-up duration for people: tenths of a second
// below ten seconds ("3.2s"), whole seconds above ("41s", "2m5s").
func ShortDuration(d time.Duration) string {
	if d < 10*time.Second && d > -10*time.Second {
		return RoundStartup(d).String()
	}
	return d.Round(time.Second).String()
}
