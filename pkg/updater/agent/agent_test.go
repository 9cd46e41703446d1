package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
)

const (
	idle       = updatesv1alpha1.StateIdle
	staged     = updatesv1alpha1.StateStagedAndPerformedUpdate
	rebootedTo = updatesv1alpha1.StateRebootedIntoUpdate
	monitoring = updatesv1alpha1.StateMonitoringUpdate
	errorReset = updatesv1alpha1.StateErrorReset
)

func mustSync(t *testing.T, h *harness, a *Agent) time.Duration {
	t.Helper()
	d, err := h.sync(a)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return d
}

func TestWaitsForTheShadowAndWritesTheFirstStatus(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	if d := mustSync(t, h, a); d != 2*time.Minute {
		t.Errorf("without a shadow the agent waits %v, want the update check interval", d)
	}
	if !h.lease.isHeld() {
		t.Error("without a shadow the agent must still renew its Lease (it is alive)")
	}
	h.shadows.create()
	mustSync(t, h, a)
	st := h.status()
	if st.CurrentState != idle || st.CurrentVersion != "1.20.0" || st.TargetVersion != "1.21.0" {
		t.Fatalf("first status = %+v, want Idle 1.20.0 → 1.21.0", st)
	}
}

func TestRefreshesTheOfferedVersionEveryInterval(t *testing.T) {
	h := newHarness(t, emulator.Config{})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	if st := h.status(); st.TargetVersion != "1.20.0" {
		t.Fatalf("nothing offered: targetVersion = %q, want the running 1.20.0", st.TargetVersion)
	}
	if err := h.em.Offer("1.22.0"); err != nil {
		t.Fatal(err)
	}
	writes := h.shadows.writes
	h.clk.Step(time.Minute)
	if d := mustSync(t, h, a); d != time.Minute {
		t.Errorf("before the interval the agent waits %v more, want 1m", d)
	}
	if h.status().TargetVersion != "1.20.0" || h.shadows.writes != writes {
		t.Fatal("the agent refreshed before updateCheckInterval")
	}
	h.clk.Step(time.Minute)
	mustSync(t, h, a)
	if got := h.status().TargetVersion; got != "1.22.0" {
		t.Fatalf("after the interval targetVersion = %q, want 1.22.0", got)
	}
	h.clk.Step(2 * time.Minute)
	writes = h.shadows.writes
	mustSync(t, h, a)
	if h.shadows.writes != writes {
		t.Error("a refresh that found nothing new wrote the shadow")
	}
}

// update drives a whole update with a fresh agent before every sync when
// restart is true; it returns after the node is Idle again or after max
// syncs.
func (h *harness) update(version string, restart bool, max int) {
	h.t.Helper()
	a := h.newAgent()
	for i := 0; i < max; i++ {
		if restart {
			a = h.newAgent()
			if err := a.InitLease(context.Background()); err != nil {
				h.t.Fatal(err)
			}
			h.settle()
		}
		if _, err := h.sync(a); err != nil {
			h.t.Logf("sync %d: %v", i, err)
		}
		h.operator(version)
		s := h.shadows.get()
		if s.Spec.State == idle && s.Status.CurrentState == idle && s.Status.CurrentVersion == version {
			return
		}
	}
	h.t.Fatalf("the update did not finish in %d syncs: %+v", max, h.shadows.get())
}

func TestAnUpdateDrainsOnlyATaintedNodeRebootsItOnceAndEndsIdle(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, VersionLock: "latest"})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)

	// StagedAndPerformedUpdate: lock recorded, pinned, restored; the node
	// keeps serving (Lease held, no drain).
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(staged)
	st := h.status()
	if st.PreviousVersionLock != "latest" {
		t.Errorf("previousVersionLock = %q, want latest", st.PreviousVersionLock)
	}
	em := h.em.State()
	if em.VersionLock != "latest" {
		t.Errorf("the version lock is %q after activation, want it restored to latest", em.VersionLock)
	}
	if v := em.Status.ActivatedVersion(); v != "1.21.0" {
		t.Errorf("activated version = %q, want 1.21.0", v)
	}
	if !h.lease.isHeld() || len(h.pods.evicted) > 0 {
		t.Fatal("staging must not release the Lease or drain")
	}

	// RebootedIntoUpdate: release (Updating), taint, drain, marker, reboot.
	h.operator("1.21.0")
	h.noController = true
	mustSync(t, h, a)
	if got := h.lease.releases(); !slices.Equal(got, []string{"Updating"}) {
		t.Fatalf("Lease releases = %v, want [Updating]", got)
	}
	if len(h.pods.evicted) > 0 {
		t.Fatal("the agent evicted pods before the readiness taint was on the node")
	}
	h.noController = false
	h.settle() // the controller taints
	for i := 0; i < 5 && h.em.State().Reboots == 0; i++ {
		mustSync(t, h, a)
	}
	if got := h.em.State().Reboots; got != 1 {
		t.Fatalf("reboots = %d, want 1", got)
	}
	if !slices.Equal(h.pods.evicted, []string{"web-1", "web-2"}) {
		t.Errorf("evicted %v, want web-1 and web-2 (no DaemonSet or mirror pod)", h.pods.evicted)
	}
	for i, tainted := range h.pods.taintAtEviction {
		if !tainted {
			t.Errorf("eviction %d happened on an untainted node", i)
		}
	}
	if got := h.status().RebootFromBootID; got != "boot-0" {
		t.Errorf("rebootFromBootID = %q, want boot-0", got)
	}
	if h.lease.isHeld() {
		t.Fatal("the Lease was renewed before the agent saw the new bootID")
	}
	mustSync(t, h, a)
	h.expectState(rebootedTo)
	if st := h.status(); st.CurrentVersion != "1.21.0" {
		t.Errorf("currentVersion = %q after the reboot, want 1.21.0", st.CurrentVersion)
	}
	last := h.lease.calls[len(h.lease.calls)-1]
	if last.release || last.bootID != "boot-1" {
		t.Errorf("the Lease was last %+v, want renewed with the new bootID boot-1", last)
	}
	for i := 0; i < 3; i++ {
		mustSync(t, h, a)
	}
	if got := h.em.State().RebootRequests; got != 1 {
		t.Fatalf("reboot requests = %d, want exactly 1", got)
	}

	// MonitoringUpdate, then Idle: crashCount resets.
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(monitoring)
	h.operator("1.21.0")
	mustSync(t, h, a)
	st = h.status()
	if st.CurrentState != idle || st.CrashCount != 0 || st.RebootFromBootID != "" || st.PreviousVersionLock != "" {
		t.Errorf("after the update status = %+v, want Idle with the bookkeeping cleared", st)
	}
	if h.events.find(ReasonUpdated) == nil || h.events.find(ReasonRebooting) == nil {
		t.Errorf("events %+v lack Rebooting and Updated", h.events.events)
	}
}

func TestRestoresAUserVersionLock(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}, VersionLock: "1.21.0"})
	h.shadows.create()
	h.update("1.21.0", false, 20)
	if got := h.em.State().VersionLock; got != "1.21.0" {
		t.Errorf("version lock = %q after the update, want the user's 1.21.0", got)
	}
}

// TestKilledAfterEverySync restarts the agent before every sync: the state
// is in the shadow and in Bottlerocket, so the update still finishes, with
// one reboot.
func TestKilledAfterEverySync(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	h.update("1.21.0", true, 40)
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Fatalf("reboots = %d, requests = %d, want 1 and 1", st.Reboots, st.RebootRequests)
	}
	for i, tainted := range h.pods.taintAtEviction {
		if !tainted {
			t.Errorf("eviction %d happened on an untainted node", i)
		}
	}
}

func TestPrepareFailsThenAborts(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{PrepareFails: true}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(errorReset)
	st := h.status()
	c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	if st.CrashCount != 1 || st.StateTransitionFailureTimestamp == nil || c == nil || c.Reason != ReasonPrepareFailed {
		t.Fatalf("status = %+v, want crashCount 1, a failure time and UpdateFailed/PrepareFailed", st)
	}
	if got := h.em.State().VersionLock; got != "1.21.0" {
		t.Fatalf("version lock = %q while failed, want the pin 1.21.0 (restored by the abort)", got)
	}
	h.operator("1.21.0") // → Idle
	mustSync(t, h, a)
	h.expectState(idle)
	if got := h.em.State().VersionLock; got != "latest" {
		t.Errorf("version lock = %q after the abort, want latest", got)
	}
	if st := h.status(); st.CrashCount != 1 || st.PreviousVersionLock != "" {
		t.Errorf("after the abort status = %+v, want crashCount kept at 1", st)
	}
	if h.em.State().RebootRequests != 0 || !h.lease.isHeld() {
		t.Error("a failed staging must not reboot, and the Lease stays held")
	}
}

func TestAFailedActivationResetsTheUpdateWithReasonActivateFailed(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{ActivateFails: true}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(errorReset)
	if c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != ReasonActivateFailed {
		t.Fatalf("conditions %+v, want UpdateFailed/ActivateFailed", h.status().Conditions)
	}
}

// toRebooting brings a node to spec RebootedIntoUpdate with status
// StagedAndPerformedUpdate.
func toRebooting(t *testing.T, h *harness, a *Agent) {
	t.Helper()
	h.shadows.create()
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(staged)
	h.operator("1.21.0")
}

func TestTaintNeverAppearsFailsAndAbortDeactivates(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	h.noController = true
	d := mustSync(t, h, a)
	h.expectState(staged)
	if d > 10*time.Second {
		t.Errorf("waiting for the taint, the agent looks again after %v, want at most the retry interval", d)
	}
	h.clk.Step(2*time.Minute - time.Second)
	mustSync(t, h, a)
	h.expectState(staged)
	h.clk.Step(time.Second)
	mustSync(t, h, a)
	h.expectState(errorReset)
	if c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != ReasonTaintNotApplied {
		t.Fatalf("conditions %+v, want UpdateFailed/%s", h.status().Conditions, ReasonTaintNotApplied)
	}
	if len(h.pods.evicted) != 0 {
		t.Fatal("evicted pods without the taint")
	}
	if h.lease.isHeld() {
		t.Fatal("the Lease was renewed while spec is still RebootedIntoUpdate")
	}
	// Abort: the activated update is deactivated, the Lease renewed.
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(idle)
	em := h.em.State()
	if em.Status.UpdateState != brapi.StateStaged || em.Status.ActivatedVersion() != "" {
		t.Errorf("after the abort the update is %s (activated %q), want deactivated", em.Status.UpdateState, em.Status.ActivatedVersion())
	}
	if !h.lease.isHeld() {
		t.Error("the abort must renew the Lease")
	}
	for _, r := range h.lease.releases() {
		if r != "Updating" {
			t.Errorf("released with %q during the update", r)
		}
	}
}

// TestTheAgentRebootsOnlyOnceTheOperatorMarkedItsBootDrained: the agent
// holds no pod permissions; the operator drains and records the drain in
// the shadow's drained annotation with the node's bootID. A tainted agent
// without that mark for its current boot waits, evicts nothing and writes no
// reboot marker; a mark of another boot is not its drain.
func TestTheAgentRebootsOnlyOnceTheOperatorMarkedItsBootDrained(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	h.noDrain = true
	for i := 0; i < 3; i++ {
		if d := mustSync(t, h, a); d > 10*time.Second {
			t.Errorf("waiting for the drain, the agent looks again after %v, want at most the retry interval", d)
		}
	}
	if !h.node.tainted() {
		t.Fatal("the node is not tainted: the agent did not release its Lease")
	}
	if st := h.em.State(); st.RebootRequests != 0 {
		t.Fatalf("%d reboot requests before the operator marked the node drained", st.RebootRequests)
	}
	if st := h.status(); st.RebootFromBootID != "" || st.CurrentState != staged {
		t.Fatalf("status %+v, want StagedAndPerformedUpdate and no reboot marker while the drain is not done", st)
	}
	if len(h.pods.evicted) != 0 {
		t.Fatalf("pods %v evicted without the operator", h.pods.evicted)
	}
	h.shadows.setDrained("boot-of-an-earlier-attempt")
	mustSync(t, h, a)
	if st := h.em.State(); st.RebootRequests != 0 {
		t.Fatal("rebooted on a drain recorded for another boot")
	}
	h.shadows.setDrained(h.node.bootID())
	mustSync(t, h, a)
	if st := h.em.State(); st.RebootRequests != 1 || st.Reboots != 1 {
		t.Fatalf("reboot requests %d, reboots %d once drained, want 1 and 1", st.RebootRequests, st.Reboots)
	}
	if got := h.status().RebootFromBootID; got != "boot-0" {
		t.Errorf("rebootFromBootID = %q, want boot-0", got)
	}
}

// TestALostRebootRequestIsPostedAgainAfterRebootGraceAndBootsOnce: the
// reboot request's connection drops. The agent cannot tell whether it
// reached the host, so it waits for the bootID — but a host that accepted a
// reboot goes down within seconds: still on the recorded bootID rebootGrace
// later, with the update still armed, it asks again. "Never twice" means
// never two boots into one update, not never two requests (docs/updater.md).
func TestALostRebootRequestIsPostedAgainAfterRebootGraceAndBootsOnce(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	mustSync(t, h, a) // the release; the controller taints, the operator drains
	h.em.UpdateFaults(func(f *emulator.Faults) { f.DropNext = 1 })
	mustSync(t, h, a)
	if st := h.status(); st.RebootFromBootID != "boot-0" || st.RebootRequestedAt == nil {
		t.Fatalf("marker %q at %v, want boot-0 and the time, written before the reboot", st.RebootFromBootID, st.RebootRequestedAt)
	}
	if h.events.find(ReasonRebootUncertain) == nil {
		t.Errorf("events %+v, want RebootUncertain", h.events.events)
	}
	for i := 0; i < 3; i++ {
		mustSync(t, h, h.newAgent()) // restarted agents too
	}
	if got := h.em.State().RebootRequests; got != 0 {
		t.Fatalf("reboot requests = %d within rebootGrace, want 0: the host may still be going down", got)
	}
	h.clk.Step(3 * time.Minute)
	for i := 0; i < 4 && h.status().CurrentState != rebootedTo; i++ {
		mustSync(t, h, h.newAgent())
	}
	h.expectState(rebootedTo)
	for i := 0; i < 3; i++ {
		h.clk.Step(3 * time.Minute)
		mustSync(t, h, h.newAgent())
	}
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Fatalf("reboots = %d, requests = %d, want 1 and 1", st.Reboots, st.RebootRequests)
	}
}

// TestALostAnswerToTheRebootMarkerStillReboots: the marker write committed
// but its answer was lost. The agent reads the shadow back instead of
// waiting for a reboot it never asked for.
func TestALostAnswerToTheRebootMarkerStillReboots(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	mustSync(t, h, a) // release; the controller taints
	h.shadows.mu.Lock()
	h.shadows.loseNext = 1 // the next status write is the marker
	h.shadows.mu.Unlock()
	for i := 0; i < 5 && h.em.State().Reboots == 0; i++ {
		_, _ = h.sync(a)
	}
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Fatalf("reboots = %d, requests = %d, want 1 and 1 without waiting for any deadline", st.Reboots, st.RebootRequests)
	}
}

// TestARefusedRebootIsRetriedWithBackoffAndBootsOnce: Bottlerocket answers
// 500 when its reboot command is refused (a shutdown inhibitor). An answer
// says the host is not going down, so the agent asks again, backing off,
// instead of leaving a drained node for the operator's deadline.
func TestARefusedRebootIsRetriedWithBackoffAndBootsOnce(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{RefuseRebootNext: 2}})
	a := h.newAgent()
	toRebooting(t, h, a)
	var waits []time.Duration
	for i := 0; i < 8 && h.em.State().Reboots == 0; i++ {
		d := mustSync(t, h, a)
		if h.em.State().RebootsRefused > len(waits) {
			waits = append(waits, d)
		}
		h.clk.Step(d)
	}
	st := h.em.State()
	if st.RebootsRefused != 2 || st.RebootRequests != 1 || st.Reboots != 1 {
		t.Fatalf("refused %d, accepted %d, reboots %d; want 2, 1, 1", st.RebootsRefused, st.RebootRequests, st.Reboots)
	}
	if len(waits) != 2 || waits[0] <= 0 || waits[1] <= waits[0] || waits[1] > 3*time.Minute {
		t.Errorf("waits after the refusals = %v, want a growing back-off bounded by rebootGrace", waits)
	}
	if e := h.events.find(ReasonRebootRefused); e == nil || e.typ != "Warning" {
		t.Errorf("events %+v, want a Warning %s", h.events.events, ReasonRebootRefused)
	}
	for i := 0; i < 3; i++ {
		h.clk.Step(3 * time.Minute)
		mustSync(t, h, h.newAgent())
	}
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Fatalf("after the boot: reboots = %d, requests = %d, want 1 and 1", st.Reboots, st.RebootRequests)
	}
}

// TestARebootThatHangsIsAskedAgainButNeverBootsTwice: the host accepted the
// reboot and never went down. After rebootGrace the agent asks again — the
// update is still armed, so a second request can only cause the first boot.
func TestARebootThatHangsIsAskedAgainButNeverBootsTwice(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{RebootHangs: true}})
	a := h.newAgent()
	toRebooting(t, h, a)
	for i := 0; i < 4; i++ {
		mustSync(t, h, a)
		h.clk.Step(time.Minute)
	}
	if got := h.em.State().RebootRequests; got != 1 {
		t.Fatalf("reboot requests = %d within rebootGrace, want 1", got)
	}
	h.em.UpdateFaults(func(f *emulator.Faults) { f.RebootHangs = false })
	h.hungRequests = 1
	for i := 0; i < 6 && h.status().CurrentState != rebootedTo; i++ {
		h.clk.Step(time.Minute)
		mustSync(t, h, a)
	}
	h.expectState(rebootedTo)
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 2 {
		t.Fatalf("reboots = %d, requests = %d; want one boot from the second request", st.Reboots, st.RebootRequests)
	}
}

// TestAnAgentThatFindsTheUpdateBootedNeverPostsTheRebootAgain: the host
// rebooted into the update but the Node still shows the old bootID (the
// kubelet has not reported yet). The update is no longer armed — the host
// runs it — so no amount of waiting makes the agent ask again.
func TestAnAgentThatFindsTheUpdateBootedNeverPostsTheRebootAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.staleBootID = true
	a := h.newAgent()
	toRebooting(t, h, a)
	for i := 0; i < 4 && h.em.State().Reboots == 0; i++ {
		mustSync(t, h, a)
	}
	for i := 0; i < 4; i++ {
		h.clk.Step(3 * time.Minute)
		_, _ = h.sync(h.newAgent())
	}
	if st := h.em.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Fatalf("reboots = %d, requests = %d with a stale bootID, want 1 and 1", st.Reboots, st.RebootRequests)
	}
	h.expectState(staged) // waits for the Node's bootID
	h.node.setBootID("boot-1")
	mustSync(t, h, h.newAgent())
	h.expectState(rebootedTo)
}

func TestWrongVersionAfterReboot(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{NeverComesUp: true}})
	a := h.newAgent()
	toRebooting(t, h, a)
	for i := 0; i < 6 && h.status().CurrentState != rebootedTo; i++ {
		mustSync(t, h, a)
	}
	h.expectState(rebootedTo)
	st := h.status()
	c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	if st.CurrentVersion != "1.20.0" || c == nil || c.Reason != ReasonWrongVersion {
		t.Fatalf("status = %+v, want currentVersion 1.20.0 and UpdateFailed/%s", st, ReasonWrongVersion)
	}
	if h.em.State().Reboots != 1 {
		t.Fatal("want one reboot")
	}
}

func TestInitLeaseAfterARestartMidDrain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.pods.setBudget("web-1", "pdb")
	a := h.newAgent()
	toRebooting(t, h, a)
	mustSync(t, h, a)
	mustSync(t, h, a)
	h.lease.held = true // what a new process's renewer would do on its own
	b := h.newAgent()
	if err := b.InitLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.lease.isHeld() {
		t.Fatal("a restarted agent mid-drain must keep the Lease released")
	}
	if got := h.lease.releases(); got[len(got)-1] != "Updating" {
		t.Errorf("released with %v, want Updating", got)
	}
}

// TestAnAgentStoppedWhileIdleNeverReleasesItsLeaseWithAFailureReason: an
// update-agent outage (a bad agent image, a DaemonSet rollout) is not a node
// failure. While Idle a SIGTERM leaves the Lease to expire — the agent
// registers it with affects-readiness=false, so that never gates — and
// during an update it releases with Updating only, never turning the planned
// release into a failure. (That a planned release gates even from an
// extension with affectsReadiness false is the node-health controller's
// side, pkg/nodehealth.)
func TestAnAgentStoppedWhileIdleNeverReleasesItsLeaseWithAFailureReason(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	if err := h.newAgent().Shutdown(context.Background()); err != nil { // before any shadow
		t.Fatal(err)
	}
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.lease.releases(); len(got) != 0 {
		t.Errorf("releases while Idle = %v, want none", got)
	}
	h.operator("1.21.0")
	mustSync(t, h, a)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.lease.releases(); !slices.Equal(got, []string{"Updating"}) {
		t.Errorf("releases = %v, want only Updating, during the update", got)
	}
}

func TestSpecWithoutVersionFails(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.shadows.setSpec(staged, "")
	mustSync(t, h, a)
	h.expectState(errorReset)
}

// TestAPinNotOfferedYetWaitsWithoutACrash: Bottlerocket releases in waves,
// so the version the operator pins may not be offered to this node yet. The
// agent calls the attempt off (ErrorReset, so the operator returns spec to
// Idle and the lock is restored) without counting a crash — otherwise the
// node would back off towards 24 h for waiting its turn.
func TestAPinNotOfferedYetWaitsWithoutACrash(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.shadows.setSpec(staged, "1.23.0")
	mustSync(t, h, a)
	h.expectState(errorReset)
	st := h.status()
	if c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != updatesv1alpha1.ReasonVersionNotOffered {
		t.Fatalf("conditions %+v, want UpdateFailed/%s", st.Conditions, updatesv1alpha1.ReasonVersionNotOffered)
	}
	if st.CrashCount != 0 || st.StateTransitionFailureTimestamp == nil {
		t.Errorf("crashCount %d, failure time %v: want no crash counted, and the time the version was not offered", st.CrashCount, st.StateTransitionFailureTimestamp)
	}
	if e := h.events.find(updatesv1alpha1.ReasonVersionNotOffered); e == nil || e.typ != "Normal" {
		t.Errorf("events %+v, want a Normal %s", h.events.events, updatesv1alpha1.ReasonVersionNotOffered)
	}
	h.operator("1.23.0")
	mustSync(t, h, a)
	h.expectConverged("latest")
}

// TestAPinNotOfferedForDaysSendsOneEventWhenItStartsWaiting: the operator
// tries a waiting node again after every refresh, for as long as its wave
// takes (days, at times). Each try is a re-check, not news: one Event when
// the node starts waiting for a version, none on the re-checks, and the
// UpdateFailed/VersionNotOffered condition keeps saying since when; a new
// pin that is not offered either is news again.
func TestAPinNotOfferedForDaysSendsOneEventWhenItStartsWaiting(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	// Every Event of the waits: the aborts that call the tries off are
	// part of them.
	notOffered := func() int {
		h.events.mu.Lock()
		defer h.events.mu.Unlock()
		n := 0
		for _, e := range h.events.events {
			if e.reason != updatesv1alpha1.ReasonVersionNotOffered {
				t.Errorf("an Event %s (%s) while the node waits for its wave", e.reason, e.message)
			}
			n++
		}
		return n
	}
	try := func(version string) {
		t.Helper()
		h.shadows.setSpec(staged, version)
		mustSync(t, h, a)
		h.expectState(errorReset)
		// The operator returns spec to Idle; the agent aborts.
		h.shadows.setSpec(idle, version)
		mustSync(t, h, a)
		h.expectState(idle)
	}
	try("1.23.0")
	since := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed).LastTransitionTime
	for range 5 {
		h.clk.Step(2 * time.Minute)
		try("1.23.0")
	}
	if n := notOffered(); n != 1 {
		t.Errorf("%d Events for six tries of one version, want one %s: %+v", n, updatesv1alpha1.ReasonVersionNotOffered, h.events.events)
	}
	c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != updatesv1alpha1.ReasonVersionNotOffered || !c.LastTransitionTime.Equal(&since) ||
		!strings.Contains(c.Message, "1.23.0") {
		t.Errorf("condition %+v, want UpdateFailed=True/%s about 1.23.0 since %v", c, updatesv1alpha1.ReasonVersionNotOffered, since)
	}
	try("1.24.0")
	if n := notOffered(); n != 2 {
		t.Errorf("%d Events after a new pin, want a second %s: %+v", n, updatesv1alpha1.ReasonVersionNotOffered, h.events.events)
	}
}

func TestTransientAPIErrorsRetryThenFail(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	h.em.Stop() // the API is down: connections refused
	for i := 1; i < DefaultTransientAttempts; i++ {
		if _, err := h.sync(a); err == nil {
			t.Fatalf("attempt %d: want an error while the API is down", i)
		}
		h.expectState(idle)
	}
	mustSync(t, h, a)
	h.expectState(errorReset)
	if err := h.em.Start(); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorAbortAfterTheReboot(t *testing.T) {
	// The operator calls off a node whose status is RebootedIntoUpdate (its
	// health gate failed): nothing to deactivate; Idle, crashCount kept.
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	for i := 0; i < 6 && h.status().CurrentState != rebootedTo; i++ {
		mustSync(t, h, a)
	}
	h.shadows.setSpec(idle, "")
	mustSync(t, h, a)
	h.expectState(idle)
	if h.status().CurrentVersion != "1.21.0" || h.em.State().Reboots != 1 {
		t.Fatalf("status %+v", h.status())
	}
}

var errKilled = errors.New("killed")

// killer makes one agent process die at its n-th call of any client: that
// call takes effect (the answer is what is lost), every later call of the
// same process fails without effect.
type killer struct {
	n, calls int
	dead     bool
}

func (k *killer) call(do func() error) error {
	if k.dead {
		return errKilled
	}
	k.calls++
	err := do()
	if k.calls == k.n {
		k.dead = true
		return errKilled
	}
	return err
}

type killAPI struct {
	k *killer
	BottlerocketAPI
}

func (a killAPI) OS(ctx context.Context) (r *brapi.OSInfo, err error) {
	e := a.k.call(func() error { r, err = a.BottlerocketAPI.OS(ctx); return err })
	return r, e
}

func (a killAPI) status(ctx context.Context, f func(context.Context) (*brapi.UpdateStatus, error)) (r *brapi.UpdateStatus, err error) {
	e := a.k.call(func() error { r, err = f(ctx); return err })
	return r, e
}

func (a killAPI) UpdateStatus(ctx context.Context) (*brapi.UpdateStatus, error) {
	return a.status(ctx, a.BottlerocketAPI.UpdateStatus)
}
func (a killAPI) RefreshUpdates(ctx context.Context) (*brapi.UpdateStatus, error) {
	return a.status(ctx, a.BottlerocketAPI.RefreshUpdates)
}
func (a killAPI) PrepareUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	return a.status(ctx, a.BottlerocketAPI.PrepareUpdate)
}
func (a killAPI) ActivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	return a.status(ctx, a.BottlerocketAPI.ActivateUpdate)
}
func (a killAPI) DeactivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	return a.status(ctx, a.BottlerocketAPI.DeactivateUpdate)
}
func (a killAPI) Reboot(ctx context.Context) error {
	return a.k.call(func() error { return a.BottlerocketAPI.Reboot(ctx) })
}
func (a killAPI) VersionLock(ctx context.Context) (l string, err error) {
	e := a.k.call(func() error { l, err = a.BottlerocketAPI.VersionLock(ctx); return err })
	return l, e
}
func (a killAPI) SetVersionLock(ctx context.Context, lock string) error {
	return a.k.call(func() error { return a.BottlerocketAPI.SetVersionLock(ctx, lock) })
}

type killShadows struct {
	k *killer
	ShadowClient
}

func (s killShadows) GetShadow(ctx context.Context, name string) (r *updatesv1alpha1.BottlerocketShadow, err error) {
	e := s.k.call(func() error { r, err = s.ShadowClient.GetShadow(ctx, name); return err })
	return r, e
}

func (s killShadows) UpdateShadowStatus(ctx context.Context, sh *updatesv1alpha1.BottlerocketShadow) (r *updatesv1alpha1.BottlerocketShadow, err error) {
	e := s.k.call(func() error { r, err = s.ShadowClient.UpdateShadowStatus(ctx, sh); return err })
	return r, e
}

type killLease struct {
	k *killer
	Lease
}

func (l killLease) Release(ctx context.Context, reason, message string) error {
	return l.k.call(func() error { return l.Lease.Release(ctx, reason, message) })
}
func (l killLease) Resume() { _ = l.k.call(func() error { l.Lease.Resume(); return nil }) }

// TestKilledAtEveryCall kills the agent at each of its calls in turn, in a
// whole update, and restarts it: every run finishes the update with exactly
// one reboot and never drains an untainted node — killed between the reboot
// marker and the reboot, too (the next process asks after rebootGrace).
func TestKilledAtEveryCall(t *testing.T) {
	for n := 1; ; n++ {
		h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
		h.shadows.create()
		killed := false
		var k *killer
		start := func(kill int) *Agent {
			k = &killer{n: kill}
			c := h.clients()
			c.API = killAPI{k, c.API}
			c.Shadows = killShadows{k, c.Shadows}
			c.Lease = killLease{k, c.Lease}
			a, err := New(c, h.options())
			if err != nil {
				t.Fatal(err)
			}
			if err := a.InitLease(context.Background()); err != nil && !errors.Is(err, errKilled) {
				t.Fatal(err)
			}
			return a
		}
		a := start(n)
		done := false
		for i := 0; i < 60 && !done; i++ {
			if k.dead {
				killed = true
				a = start(0) // the restarted process is never killed
			}
			_, _ = h.sync(a)
			h.operator("1.21.0")
			s := h.shadows.get()
			done = s.Spec.State == idle && s.Status.CurrentState == idle && s.Status.CurrentVersion == "1.21.0"
			if st := s.Status; st.RebootFromBootID != "" && st.RebootFromBootID == h.node.bootID() {
				// Waiting for a boot: killed between the marker and the
				// reboot, the next process asks after rebootGrace.
				h.clk.Step(time.Minute)
			}
		}
		if !done {
			t.Fatalf("killed at call %d: the update did not finish: %+v", n, h.shadows.get())
		}
		if st := h.em.State(); st.RebootRequests != 1 || st.Reboots != 1 {
			t.Fatalf("killed at call %d: %d reboot requests, %d reboots; want exactly 1", n, st.RebootRequests, st.Reboots)
		}
		if st := h.status(); st.CrashCount != 0 {
			t.Fatalf("killed at call %d: crashCount %d, want 0 (a kill is not a failure)", n, st.CrashCount)
		}
		for i, tainted := range h.pods.taintAtEviction {
			if !tainted {
				t.Fatalf("killed at call %d: eviction %d on an untainted node", n, i)
			}
		}
		for _, r := range h.lease.releases() {
			if r != "Updating" {
				t.Fatalf("killed at call %d: Lease released with %q", n, r)
			}
		}
		if !killed {
			t.Logf("a clean update makes %d calls; killed at each of them", n-1)
			return
		}
	}
}

// hookAPI runs a function right after a Bottlerocket API call returned: the
// world (the operator) changing while the agent waits on the host.
type hookAPI struct {
	BottlerocketAPI
	afterPrepare func()
}

func (a hookAPI) PrepareUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	s, err := a.BottlerocketAPI.PrepareUpdate(ctx)
	if a.afterPrepare != nil {
		a.afterPrepare()
	}
	return s, err
}

// expectConverged checks what an abort leaves on the host: nothing
// activated, the lock as want, the status Idle without bookkeeping.
func (h *harness) expectConverged(wantLock string) {
	h.t.Helper()
	em := h.em.State()
	if v := em.Status.ActivatedVersion(); v != "" {
		h.t.Errorf("update %s is still activated on a node whose spec is Idle: the next unplanned reboot boots it with no drain and no health gate", v)
	}
	if em.VersionLock != wantLock {
		h.t.Errorf("version lock = %q, want %q", em.VersionLock, wantLock)
	}
	if st := h.status(); st.CurrentState != idle || st.PreviousVersionLock != "" {
		h.t.Errorf("status = %+v, want Idle with previousVersionLock cleared", st)
	}
}

// TestAnAbortWhileTheAgentIsStagingLeavesNothingActivated: the operator's
// StagedAndPerformedUpdate deadline (15 m) is shorter than a Bottlerocket
// command may take (20 m). The operator fails the node while prepare runs;
// the agent must not leave the update activated once spec is Idle, whatever
// its status said when the abort came.
func TestAnAbortWhileTheAgentIsStagingLeavesNothingActivated(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	c := h.clients()
	c.API = hookAPI{BottlerocketAPI: c.API, afterPrepare: func() {
		h.shadows.setSpec(idle, "1.21.0") // the operator's deadline, as it writes it
	}}
	a, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, h, a)
	h.operator("1.21.0")
	_, _ = h.sync(a) // stages; spec turns Idle while prepare runs
	for i := 0; i < 3; i++ {
		mustSync(t, h, a)
	}
	h.expectConverged("latest")
	if h.em.State().RebootRequests != 0 {
		t.Error("an aborted update rebooted the node")
	}
}

// TestAnAgentKilledBetweenPinningAndRestoringTheLockRestoresItOnceSpecIsIdle:
// the status never left Idle, but the host's lock is the agent's pin.
func TestAnAgentKilledBetweenPinningAndRestoringTheLockRestoresItOnceSpecIsIdle(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.shadows.create()
	mustSync(t, h, h.newAgent())
	h.operator("1.21.0")
	// The first process recorded the lock, pinned it, and died.
	k := &killer{n: 5} // OS (the downgrade check), VersionLock, status write, PATCH+commit of the pin
	c := h.clients()
	c.API = killAPI{k, c.API}
	c.Shadows = killShadows{k, c.Shadows}
	a, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.sync(a)
	if got := h.em.State().VersionLock; got != "1.21.0" || h.status().PreviousVersionLock != "latest" {
		t.Fatalf("lock %q, previousVersionLock %q: the kill did not land between pin and restore", got, h.status().PreviousVersionLock)
	}
	h.shadows.setSpec(idle, "1.21.0") // the operator's deadline
	b := h.newAgent()
	for i := 0; i < 3; i++ {
		mustSync(t, h, b)
	}
	h.expectConverged("latest")
}

// TestAnAbortLeavesAVersionLockTheUserChangedAlone: a stale
// previousVersionLock must never overwrite a lock someone set since the
// agent pinned it; the agent says so in an Event.
func TestAnAbortLeavesAVersionLockTheUserChangedAlone(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}, Faults: emulator.Faults{PrepareFails: true}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(errorReset)
	if err := h.api.SetVersionLock(context.Background(), "1.22.0"); err != nil { // a user
		t.Fatal(err)
	}
	h.operator("1.21.0") // → Idle
	mustSync(t, h, a)
	h.expectConverged("1.22.0")
	if h.events.find(ReasonVersionLockChanged) == nil {
		t.Errorf("events %+v, want %s", h.events.events, ReasonVersionLockChanged)
	}
}

// TestAFailedRefreshAfterASuccessfulUpdateStillReportsIdle: completing does
// not depend on the update repository answering (docs/updater.md). A node that
// cannot refresh after a good update reports Idle on the new version, so it
// frees its slot instead of freezing the rollout.
func TestAFailedRefreshAfterASuccessfulUpdateStillReportsIdle(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	a := h.newAgent()
	toRebooting(t, h, a)
	for i := 0; i < 6 && h.status().CurrentState != rebootedTo; i++ {
		mustSync(t, h, a)
	}
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(monitoring)
	h.em.UpdateFaults(func(f *emulator.Faults) { f.RefreshFails = true })
	h.operator("1.21.0") // health gate passed: Idle
	_, _ = h.sync(a)
	st := h.status()
	if st.CurrentState != idle || st.CurrentVersion != "1.21.0" || st.CrashCount != 0 || st.RebootFromBootID != "" {
		t.Fatalf("status = %+v, want Idle on 1.21.0 with the bookkeeping cleared although refresh-updates fails", st)
	}
}

// TestANodeThatRebootedIntoTheUpdateMidDrainReportsItInsteadOfRebootingAgain:
// the node rebooted for another reason (a kernel panic, maintenance) while
// the agent drained it, and booted the activated update. The restarted
// agent checks where the host stands before draining: it runs spec.version,
// so it reports RebootedIntoUpdate instead of draining and rebooting again.
func TestANodeThatRebootedIntoTheUpdateMidDrainReportsItInsteadOfRebootingAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.pods.setBudget("web-2", "web-pdb")
	a := h.newAgent()
	toRebooting(t, h, a)
	mustSync(t, h, a)                                          // release; the controller taints
	mustSync(t, h, a)                                          // a drain pass, blocked
	if err := h.api.Reboot(context.Background()); err != nil { // not the agent's
		t.Fatal(err)
	}
	h.settle()
	h.pods.setBudget("web-2", "")
	b := h.newAgent() // the reboot restarted the agent
	if err := b.InitLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expectReportedBootedWithoutASecondReboot(b, "1.21.0")
	if !h.lease.isHeld() {
		t.Error("the Lease stays released after the node came back on the update")
	}
}

// TestAnAgentWhoseReportOfTheUpdateBootedMidDrainFailedNeverRebootsAgain:
// found by the update simulation (a random seed, never-two-boots). The host
// booted the activated update on its own mid-drain; the restarted agent finds
// it running the update, but its report fails (a conflict: the operator wrote
// the shadow in between). Its next sync must look at the host again, not
// drain and reboot a host that already runs the update.
func TestAnAgentWhoseReportOfTheUpdateBootedMidDrainFailedNeverRebootsAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	h.pods.setBudget("web-2", "web-pdb")
	a := h.newAgent()
	toRebooting(t, h, a)
	mustSync(t, h, a)                                          // release; the controller taints
	mustSync(t, h, a)                                          // a drain pass, blocked
	if err := h.api.Reboot(context.Background()); err != nil { // not the agent's
		t.Fatal(err)
	}
	h.settle()
	h.pods.setBudget("web-2", "")
	b := h.newAgent() // the reboot restarted the agent
	if err := b.InitLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.shadows.mu.Lock()
	h.shadows.conflictNext = 1
	h.shadows.mu.Unlock()
	if _, err := h.sync(b); err == nil {
		t.Fatal("the report of the boot did not meet the conflict")
	}
	h.expectReportedBootedWithoutASecondReboot(b, "1.21.0")
}

// TestTheRebootMarkerIsClearedWhenAnUpdateEnds: found by the update
// simulation (a random seed; the model refused an abort "past the drain"). An
// update that completed or was called off kept status.rebootRequestedAt while
// clearing rebootFromBootID, so the next attempt looked past its drain before
// it drained: deleting that node in a scale-down would have been recorded as a
// failed update (NodeDeleted) that halts the rollout.
func TestTheRebootMarkerIsClearedWhenAnUpdateEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status updatesv1alpha1.ShadowState
	}{
		{"completed", monitoring},
		{"called off after the marker", staged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, emulator.Config{})
			h.shadows.create()
			h.shadows.mu.Lock()
			h.shadows.shadow.Spec.Version = "1.20.0"
			h.shadows.shadow.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: tc.status, CurrentVersion: "1.20.0",
				RebootFromBootID: "boot-0", RebootRequestedAt: &metav1.Time{Time: t0}}
			h.shadows.mu.Unlock()
			a := h.newAgent()
			mustSync(t, h, a)
			if st := h.status(); st.CurrentState != idle || st.RebootFromBootID != "" || st.RebootRequestedAt != nil {
				t.Errorf("status = %+v, want Idle with rebootFromBootID and rebootRequestedAt cleared", st)
			}
		})
	}
}

// refreshDown answers the next n refreshes with a connection error, a
// transient failure the agent retries.
type refreshDown struct {
	BottlerocketAPI
	n int
}

func (r *refreshDown) RefreshUpdates(ctx context.Context) (*brapi.UpdateStatus, error) {
	if r.n > 0 {
		r.n--
		return nil, errors.New("connection reset by peer")
	}
	return r.BottlerocketAPI.RefreshUpdates(ctx)
}

// TestAUserLockChangeBetweenStagingAttemptsIsRespected: a user who changes
// the version lock after the agent pinned it (here between two attempts of
// StagedAndPerformedUpdate, the first failing transiently) keeps that lock:
// the agent does not pin over it, forgets previousVersionLock (no longer its
// to restore), says so in an Event naming the new lock and reports the
// attempt failed (VersionLockChanged), like any staging failure. The abort
// then leaves the user's lock alone.
func TestAUserLockChangeBetweenStagingAttemptsIsRespected(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	h.shadows.create()
	c := h.clients()
	api := &refreshDown{BottlerocketAPI: c.API}
	c.API = api
	a, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, h, a)
	h.operator("1.21.0")
	api.n = 1
	if _, err := h.sync(a); err == nil {
		t.Fatal("the first attempt: want the transient refresh error")
	}
	h.expectState(idle)
	if got, prev := h.em.State().VersionLock, h.status().PreviousVersionLock; got != "1.21.0" || prev != "latest" {
		t.Fatalf("after the first attempt: lock %q, previousVersionLock %q; want the pin 1.21.0 and latest", got, prev)
	}
	if err := h.api.SetVersionLock(context.Background(), "1.22.0"); err != nil { // a user
		t.Fatal(err)
	}
	mustSync(t, h, a) // the second attempt
	if got := h.em.State().VersionLock; got != "1.22.0" {
		t.Fatalf("version lock = %q after the second attempt, want the user's 1.22.0", got)
	}
	h.expectState(errorReset)
	st := h.status()
	cond := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed)
	if cond == nil || cond.Reason != ReasonVersionLockChanged || st.PreviousVersionLock != "" || st.StateTransitionFailureTimestamp == nil {
		t.Fatalf("status = %+v, want ErrorReset with UpdateFailed/%s, a failure time and previousVersionLock cleared", st, ReasonVersionLockChanged)
	}
	if e := h.events.find(ReasonVersionLockChanged); e == nil || !strings.Contains(e.message, `"1.22.0"`) {
		t.Errorf("events %+v, want %s naming the lock 1.22.0", h.events.events, ReasonVersionLockChanged)
	}
	if st := h.em.State(); st.Status.ActivatedVersion() != "" || st.RebootRequests != 0 {
		t.Errorf("the attempt went on: activated %q, reboot requests %d", st.Status.ActivatedVersion(), st.RebootRequests)
	}
	h.operator("1.21.0") // → Idle
	mustSync(t, h, a)
	h.expectConverged("1.22.0")
}

// TestAnEarlierAttemptsPinIsNotTakenForAUsersLock: the operator calls an
// attempt off (its deadline) and starts another, towards another version,
// before the agent ran the abort: the lock is still this process's pin of
// the first version, not a user's, and the new attempt pins over it; the
// lock from before the update is what the end restores.
func TestAnEarlierAttemptsPinIsNotTakenForAUsersLock(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	h.shadows.create()
	c := h.clients()
	api := &refreshDown{BottlerocketAPI: c.API}
	c.API = api
	a, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, h, a)
	h.operator("1.21.0")
	api.n = 1
	if _, err := h.sync(a); err == nil {
		t.Fatal("the first attempt: want the transient refresh error")
	}
	h.shadows.setSpec(idle, "1.21.0")                                          // the deadline
	h.shadows.setSpec(updatesv1alpha1.StateStagedAndPerformedUpdate, "1.22.0") // and a new start
	mustSync(t, h, a)
	if st := h.status(); st.CurrentState != staged || st.PreviousVersionLock != "latest" {
		t.Fatalf("status = %+v, want StagedAndPerformedUpdate with previousVersionLock latest", st)
	}
	if h.events.find(ReasonVersionLockChanged) != nil {
		t.Errorf("the agent took its own earlier pin for a user's lock: %+v", h.events.events)
	}
	h.shadows.setSpec(idle, "1.22.0")
	mustSync(t, h, a)
	h.expectConverged("latest")
}

// pinnedThenTransient runs a first agent process that records the lock,
// pins the version lock to 1.21.0 and fails transiently (its refresh),
// leaving status Idle with the pin on the host; the caller then plays the
// restart with a new process, which shares nothing in memory with it.
func pinnedThenTransient(t *testing.T, h *harness) {
	t.Helper()
	h.shadows.create()
	c := h.clients()
	api := &refreshDown{BottlerocketAPI: c.API}
	c.API = api
	first, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, h, first)
	h.operator("1.21.0")
	api.n = 1
	if _, err := h.sync(first); err == nil {
		t.Fatal("the first attempt: want the transient refresh error")
	}
	if got, prev := h.em.State().VersionLock, h.status().PreviousVersionLock; got != "1.21.0" || prev != "latest" {
		t.Fatalf("after the first attempt: lock %q, previousVersionLock %q; want the pin 1.21.0 and latest", got, prev)
	}
}

// TestARestartedAgentDoesNotPinOverAUsersNewerVersionLock: a user who pins
// a version newer than the running one while the agent is down between two
// attempts keeps that lock. The new process remembers nothing of the old
// one's pin in memory; what it pinned is in the shadow's status, so it
// tells the user's 1.22.0 from its own 1.21.0 and does as for any lock a
// user changed: no pin over it, VersionLockChanged, and the abort leaves it.
func TestARestartedAgentDoesNotPinOverAUsersNewerVersionLock(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	pinnedThenTransient(t, h)
	if err := h.api.SetVersionLock(context.Background(), "1.22.0"); err != nil { // a user, while no agent runs
		t.Fatal(err)
	}
	restarted := h.newAgent()
	mustSync(t, h, restarted)
	if got := h.em.State().VersionLock; got != "1.22.0" {
		t.Fatalf("version lock = %q after the restarted agent's attempt, want the user's 1.22.0", got)
	}
	h.expectState(errorReset)
	st := h.status()
	if cond := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed); cond == nil || cond.Reason != ReasonVersionLockChanged || st.PreviousVersionLock != "" {
		t.Fatalf("status = %+v, want ErrorReset with UpdateFailed/%s and previousVersionLock cleared", st, ReasonVersionLockChanged)
	}
	if e := h.events.find(ReasonVersionLockChanged); e == nil || !strings.Contains(e.message, `"1.22.0"`) {
		t.Errorf("events %+v, want %s naming the lock 1.22.0", h.events.events, ReasonVersionLockChanged)
	}
	if v := h.em.State().Status.ActivatedVersion(); v != "" {
		t.Errorf("the attempt went on: %s activated", v)
	}
	h.operator("1.21.0") // → Idle
	mustSync(t, h, h.newAgent())
	h.expectConverged("1.22.0")
}

// TestARestartedAgentTakesItsEarlierAttemptsPinForItsOwn: the operator
// calls an attempt off and starts another, towards another version, while
// the agent is down. The lock is the first attempt's pin, which spec.version
// no longer names: the new process knows it for its own from the status,
// pins over it, and the end restores the lock from before the update.
func TestARestartedAgentTakesItsEarlierAttemptsPinForItsOwn(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	pinnedThenTransient(t, h)
	h.shadows.setSpec(idle, "1.21.0")                                          // the deadline
	h.shadows.setSpec(updatesv1alpha1.StateStagedAndPerformedUpdate, "1.22.0") // and a new start
	restarted := h.newAgent()
	mustSync(t, h, restarted)
	if st := h.status(); st.CurrentState != staged || st.PreviousVersionLock != "latest" {
		t.Fatalf("status = %+v, want StagedAndPerformedUpdate with previousVersionLock latest", st)
	}
	if e := h.events.find(ReasonVersionLockChanged); e != nil {
		t.Errorf("the restarted agent took its own earlier pin for a user's lock: %+v", e)
	}
	if got := h.em.State().VersionLock; got != "latest" {
		t.Errorf("version lock = %q once staged, want latest restored", got)
	}
	h.shadows.setSpec(idle, "1.22.0")
	mustSync(t, h, restarted)
	h.expectConverged("latest")
}

// TestAnAbortAfterTheVersionMovedRestoresTheAgentsEarlierPin: the operator
// calls an attempt off, starts another towards another version and calls
// that off too, all before the agent runs again. The host's lock is still
// the first attempt's pin: the abort restores the lock from before the
// update instead of leaving the host pinned for good because spec.version
// no longer names that pin.
func TestAnAbortAfterTheVersionMovedRestoresTheAgentsEarlierPin(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	pinnedThenTransient(t, h)
	h.shadows.setSpec(idle, "1.21.0")
	h.shadows.setSpec(updatesv1alpha1.StateStagedAndPerformedUpdate, "1.22.0")
	h.shadows.setSpec(idle, "1.22.0")
	mustSync(t, h, h.newAgent())
	h.expectConverged("latest")
	if e := h.events.find(ReasonVersionLockChanged); e != nil {
		t.Errorf("the abort took the agent's own earlier pin for a user's lock: %+v", e)
	}
}

// TestAUserLockChangeDuringAPrepareIsKeptWhenStagingSucceeds: a user who
// changes the version lock while the host prepares the update (after the
// agent pinned it, before the agent restores the lock from before the
// update) keeps that lock: the update was already chosen under the pin, so
// staging goes on, but the end of staging does not "restore" the old lock
// over the user's; it says so in the Event the abort sends, and forgets
// previousVersionLock, which is no longer the agent's to restore.
func TestAUserLockChangeDuringAPrepareIsKeptWhenStagingSucceeds(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	h.shadows.create()
	c := h.clients()
	c.API = hookAPI{BottlerocketAPI: c.API, afterPrepare: func() {
		if err := h.api.SetVersionLock(context.Background(), "1.22.0"); err != nil { // a user
			t.Fatal(err)
		}
	}}
	a, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(staged)
	if got := h.em.State().VersionLock; got != "1.22.0" {
		t.Fatalf("version lock = %q once staged, want the user's 1.22.0", got)
	}
	if e := h.events.find(ReasonVersionLockChanged); e == nil || !strings.Contains(e.message, `"1.22.0"`) {
		t.Errorf("events %+v, want %s naming the lock 1.22.0", h.events.events, ReasonVersionLockChanged)
	}
	if prev := h.status().PreviousVersionLock; prev != "" {
		t.Errorf("previousVersionLock = %q once staged, want it cleared: the lock it records is no longer the agent's to restore", prev)
	}
	if v := h.em.State().Status.ActivatedVersion(); v != "1.21.0" {
		t.Errorf("activated version = %q, want 1.21.0: the update was prepared under the agent's pin", v)
	}
	// The rest of the update (the user's lock chooses 1.22.0 next, so the
	// loop stops at the first Idle instead of starting another).
	for i := 0; i < 20; i++ {
		h.operator("1.21.0")
		_, _ = h.sync(a)
		if s := h.shadows.get(); s.Spec.State == idle && s.Status.CurrentState == idle {
			break
		}
	}
	if st := h.status(); st.CurrentState != idle || st.CurrentVersion != "1.21.0" {
		t.Fatalf("status = %+v, want Idle on 1.21.0", st)
	}
	if got := h.em.State().VersionLock; got != "1.22.0" {
		t.Errorf("version lock = %q after the update, want the user's 1.22.0", got)
	}
}

// killedWhilePreparing is an agent process killed right after it asked the
// host to prepare: the host accepted the command (and runs it on), the
// process never saw it end.
type killedWhilePreparing struct {
	BottlerocketAPI
	socket string
}

func (a killedWhilePreparing) PrepareUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", a.socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/actions/prepare-update", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return nil, fmt.Errorf("POST /actions/prepare-update answered %s", resp.Status)
	}
	return nil, errKilled
}

// TestAnAgentRestartedWhileTheHostPreparesWaitsForThePrepare: a prepare
// downloads an image and runs for minutes, and Bottlerocket answers 423 to
// /updates/status and to every update action until it ends. An agent
// restarted meanwhile finds the command its earlier process started still
// running: that is not a failure. It looks again at its usual interval,
// without counting an attempt or a crash, for as long as the prepare runs,
// and then reads the result and goes on from there (here: activates what
// was staged), with one prepare in all.
func TestAnAgentRestartedWhileTheHostPreparesWaitsForThePrepare(t *testing.T) {
	const prepare = 10 * time.Minute
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, Delays: emulator.Delays{Prepare: prepare}})
	h.shadows.create()
	mustSync(t, h, h.newAgent())
	h.operator("1.21.0")
	c := h.clients()
	c.API = killedWhilePreparing{BottlerocketAPI: c.API, socket: h.api.SocketPath()}
	first, err := New(c, h.options())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(first); !errors.Is(err, errKilled) {
		t.Fatalf("the first process: %v, want it killed after asking for the prepare", err)
	}
	if st := h.em.State(); st.InFlight == nil || st.InFlight.Cmd != brapi.CommandPrepare {
		t.Fatalf("in flight: %+v, want the prepare the first process asked for", st.InFlight)
	}

	second := h.newAgent()
	retry := h.options().RetryInterval
	waited := time.Duration(0)
	for i := 0; i < 2*DefaultTransientAttempts; i++ {
		d, err := h.sync(second)
		if st := h.status(); st.CurrentState != idle || st.CrashCount != 0 {
			t.Fatalf("sync %d, %v into the prepare: status %s, crashCount %d, %+v: a command in progress was taken for a failure",
				i, waited, st.CurrentState, st.CrashCount, st.Conditions)
		}
		if err != nil {
			t.Errorf("sync %d, %v into the prepare: %v; want no error: a command in progress is not a failure", i, waited, err)
		}
		if d != retry {
			t.Errorf("sync %d: the agent looks again in %v, want its retry interval %v", i, d, retry)
		}
		h.clk.Step(d)
		waited += d
	}
	h.clk.Step(prepare - waited)
	mustSync(t, h, second)
	h.expectState(staged)
	em := h.em.State()
	if v := em.Status.ActivatedVersion(); v != "1.21.0" {
		t.Errorf("activated version = %q, want 1.21.0, staged by the prepare the first process asked for", v)
	}
	if r := em.Status.MostRecentCommand; r == nil || r.CmdType != brapi.CommandActivate {
		t.Errorf("most recent command %+v, want the activate", r)
	}
	if em.VersionLock != "latest" {
		t.Errorf("version lock = %q once staged, want latest restored", em.VersionLock)
	}
	if st := h.status(); st.CrashCount != 0 || meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed) != nil {
		t.Errorf("status = %+v, want no crash and no UpdateFailed condition", st)
	}
}

// hookedAPI runs a hook before the agent's prepare or activate: someone else
// acting on the host between two of the agent's calls.
type hookedAPI struct {
	BottlerocketAPI
	beforePrepare, beforeActivate func()
}

func (h *hookedAPI) PrepareUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	if f := h.beforePrepare; f != nil {
		h.beforePrepare = nil
		f()
	}
	return h.BottlerocketAPI.PrepareUpdate(ctx)
}

func (h *hookedAPI) ActivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	if f := h.beforeActivate; f != nil {
		h.beforeActivate = nil
		f()
	}
	return h.BottlerocketAPI.ActivateUpdate(ctx)
}

func (h *harness) agentWith(api BottlerocketAPI) *Agent {
	h.t.Helper()
	c := h.clients()
	c.API = api
	a, err := New(c, h.options())
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Bottlerocket's status names the last refresh's choice as staged, whatever
// updog update-image wrote (docs/updater-emulator.md): a Staged status
// whose prepare wrote another version is prepared again, not activated.
func TestTheAgentDoesNotActivateAStagedStatusWhosePrepareWroteAnotherVersion(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}, VersionLock: "1.21.0"})
	ctx := context.Background()
	_, err := h.api.RefreshUpdates(ctx)
	must(t, err)
	must(t, h.api.SetVersionLock(ctx, "1.22.0"))
	_, err = h.api.PrepareUpdate(ctx)
	must(t, err)
	must(t, h.api.SetVersionLock(ctx, "latest"))
	if s, _ := h.api.UpdateStatus(ctx); s.StagedVersion() != "1.21.0" || h.em.State().Inactive != "1.22.0" {
		t.Fatalf("set-up: the status stages %q, the partition holds %q; want 1.21.0 and 1.22.0", s.StagedVersion(), h.em.State().Inactive)
	}
	h.shadows.create()
	h.shadows.setSpec(staged, "1.21.0")
	a := h.newAgent()
	mustSync(t, h, a)
	h.expectState(staged)
	if got := h.em.Activated(); got != "1.21.0" {
		t.Fatalf("the host boots %q next, want 1.21.0", got)
	}
}

// A prepare whose updog chose another version than the refresh (the lock
// changed in between) is not activated: the update fails, named.
func TestAPrepareThatWroteAnotherVersionFailsAsAStagedVersionMismatch(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
	api := &hookedAPI{BottlerocketAPI: h.api, beforePrepare: func() {
		if err := h.api.SetVersionLock(context.Background(), "1.22.0"); err != nil {
			t.Error(err)
		}
	}}
	h.shadows.create()
	a := h.agentWith(api)
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(errorReset)
	if c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != ReasonStagedVersionMismatch || !strings.Contains(c.Message, "1.22.0") {
		t.Fatalf("conditions %+v, want UpdateFailed/%s naming 1.22.0", h.status().Conditions, ReasonStagedVersionMismatch)
	}
	if got := h.em.Activated(); got != "" {
		t.Errorf("%s is activated; want nothing", got)
	}
}

// Bottlerocket applies a settings commit asynchronously
// (docs/updater-emulator.md): a refresh right after the pin may still
// choose under the old lock. The agent refreshes again until the updater
// chooses the pin.
func TestAfterPinningTheAgentRefreshesUntilTheUpdaterChoosesThePin(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}, Delays: emulator.Delays{SettingsApply: 15 * time.Second}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	for i := 0; i < 5 && h.status().CurrentState != staged; i++ {
		d := mustSync(t, h, a)
		if h.status().CurrentState == errorReset {
			t.Fatalf("the agent gave up while the pin was not applied yet: %+v", h.status())
		}
		h.clk.Step(d)
	}
	h.expectState(staged)
	if got := h.em.Activated(); got != "1.21.0" || h.status().CrashCount != 0 {
		t.Fatalf("the host boots %q next, crashCount %d; want 1.21.0 and 0", got, h.status().CrashCount)
	}
}

// A pin the updater never takes fails by name after a bounded wait, and the
// abort restores the lock.
func TestAPinTheUpdaterNeverTakesFailsAsVersionLockNotApplied(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}, Delays: emulator.Delays{SettingsApply: 24 * time.Hour}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	syncs := 0
	for ; syncs < 20 && h.status().CurrentState != errorReset; syncs++ {
		h.clk.Step(mustSync(t, h, a))
	}
	h.expectState(errorReset)
	if c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != ReasonVersionLockNotApplied {
		t.Fatalf("conditions %+v, want UpdateFailed/%s", h.status().Conditions, ReasonVersionLockNotApplied)
	}
	if syncs != DefaultPinRefreshes {
		t.Errorf("gave up after %d syncs, want %d refreshes", syncs, DefaultPinRefreshes)
	}
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectConverged("latest")
}

// A failed re-prepare clears the inactive partition while the status still
// says Staged (docs/updater-emulator.md): activate then finds nothing, and
// the agent prepares again instead of failing.
func TestWhenActivateFindsNothingToActivateTheAgentPreparesAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, VersionLock: "1.21.0"})
	ctx := context.Background()
	_, err := h.api.RefreshUpdates(ctx)
	must(t, err)
	_, err = h.api.PrepareUpdate(ctx)
	must(t, err)
	api := &hookedAPI{BottlerocketAPI: h.api, beforeActivate: func() {
		h.em.SetFaults(emulator.Faults{PrepareFails: true})
		if _, err := h.api.PrepareUpdate(ctx); !brapi.IsCommandFailed(err) {
			t.Errorf("someone's re-prepare: %v, want it failed", err)
		}
		h.em.SetFaults(emulator.Faults{})
	}}
	h.shadows.create()
	h.shadows.setSpec(staged, "1.21.0")
	a := h.agentWith(api)
	mustSync(t, h, a)
	h.expectState(staged)
	if got := h.em.Activated(); got != "1.21.0" {
		t.Fatalf("the host boots %q next, want 1.21.0", got)
	}
}

// The status of an earlier failed re-prepare still says Staged: the agent
// prepares again rather than activating a partition that was cleared.
func TestAStagedStatusAfterAFailedRePrepareIsPreparedAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}})
	ctx := context.Background()
	_, err := h.api.RefreshUpdates(ctx)
	must(t, err)
	_, err = h.api.PrepareUpdate(ctx)
	must(t, err)
	h.em.SetFaults(emulator.Faults{PrepareFails: true})
	_, _ = h.api.PrepareUpdate(ctx)
	h.em.SetFaults(emulator.Faults{})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.operator("1.21.0")
	mustSync(t, h, a)
	h.expectState(staged)
	if got := h.em.Activated(); got != "1.21.0" {
		t.Fatalf("the host boots %q next, want 1.21.0", got)
	}
}

// settings.updates.ignore-waves is the only way to take a version ahead of
// its wave (docs/updater-emulator.md): with spec.ignoreWaves the agent turns
// it on while it pins, and off again where it restores the lock.
func TestWithIgnoreWavesTheAgentTakesAPinAheadOfItsWaveAndTurnsTheSettingOffAgain(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, BeforeWave: []string{"1.22.0"}, Delays: emulator.Delays{SettingsApply: 5 * time.Second}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.shadows.setSpec(staged, "1.22.0")
	h.shadows.setIgnoreWaves(true)
	for i := 0; i < 4 && h.status().CurrentState != staged; i++ {
		h.clk.Step(mustSync(t, h, a))
		if h.status().CurrentState == errorReset {
			t.Fatalf("the agent gave up: %+v", h.status())
		}
	}
	h.expectState(staged)
	if got := h.em.Activated(); got != "1.22.0" {
		t.Fatalf("the host boots %q next, want 1.22.0", got)
	}
	if st := h.em.State(); st.IgnoreWaves || st.VersionLock != "latest" || h.status().IgnoringWaves {
		t.Errorf("after staging: ignore-waves %v, lock %q, status.ignoringWaves %v; want off, latest, false", st.IgnoreWaves, st.VersionLock, h.status().IgnoringWaves)
	}
}

// An abort turns ignore-waves off like the lock, and a setting that was on
// before the update is the user's: the agent leaves it on.
func TestAnAbortTurnsIgnoreWavesOffButLeavesAUsersOn(t *testing.T) {
	h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, BeforeWave: []string{"1.22.0"}, Faults: emulator.Faults{PrepareFails: true}})
	h.shadows.create()
	a := h.newAgent()
	mustSync(t, h, a)
	h.shadows.setSpec(staged, "1.22.0")
	h.shadows.setIgnoreWaves(true)
	mustSync(t, h, a)
	h.expectState(errorReset)
	if c := meta.FindStatusCondition(h.status().Conditions, updatesv1alpha1.ConditionUpdateFailed); c == nil || c.Reason != ReasonPrepareFailed {
		t.Fatalf("conditions %+v, want UpdateFailed/%s (the version was taken ahead of its wave)", h.status().Conditions, ReasonPrepareFailed)
	}
	if !h.em.State().IgnoreWaves || !h.status().IgnoringWaves {
		t.Fatalf("during the update: ignore-waves %v, status.ignoringWaves %v; want both on", h.em.State().IgnoreWaves, h.status().IgnoringWaves)
	}
	h.operator("1.22.0")
	mustSync(t, h, a)
	h.expectConverged("latest")
	if h.em.State().IgnoreWaves || h.status().IgnoringWaves {
		t.Errorf("after the abort: ignore-waves %v, status.ignoringWaves %v; want off", h.em.State().IgnoreWaves, h.status().IgnoringWaves)
	}

	// The user's own ignore-waves stays on.
	u := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, BeforeWave: []string{"1.22.0"}})
	must(t, u.api.SetIgnoreWaves(context.Background(), true))
	u.shadows.create()
	b := u.newAgent()
	mustSync(t, u, b)
	u.shadows.setSpec(staged, "1.22.0")
	u.shadows.setIgnoreWaves(true)
	mustSync(t, u, b)
	u.expectState(staged)
	if !u.em.State().IgnoreWaves || u.status().IgnoringWaves {
		t.Errorf("a user's ignore-waves: %v, status.ignoringWaves %v; want left on, not recorded as the agent's", u.em.State().IgnoreWaves, u.status().IgnoringWaves)
	}
}

// TestTheAgentLocksAnOlderVersionOnlyForTheRollbackOfTheVersionItRuns: a
// spec.version older than the running version is a downgrade, which the
// agent takes only while the rollback annotation names the version it
// leaves; otherwise it fails before touching the lock. The rollback then
// boots the older version as updog does with an older lock (the emulator
// keeps the version a host left in its repository).
func TestTheAgentLocksAnOlderVersionOnlyForTheRollbackOfTheVersionItRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rollback string // the annotation; "" none
		ok       bool
	}{
		{name: "no rollback annotation: refused"},
		{name: "the annotation names another version: refused", rollback: "1.22.0"},
		{name: "the annotation names the running version: rolled back", rollback: "1.21.0", ok: true},
		{name: "v-prefixed alike", rollback: "v1.21.0", ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, emulator.Config{Offered: []string{"1.21.0"}, VersionLock: "latest"})
			h.shadows.create()
			h.update("1.21.0", false, 30)
			if tc.rollback != "" {
				h.shadows.annotate(updatesv1alpha1.RollbackAnnotation, tc.rollback)
			}
			h.shadows.setSpec(staged, "1.20.0")
			a := h.newAgent()
			if !tc.ok {
				mustSync(t, h, a)
				h.expectState(updatesv1alpha1.StateErrorReset)
				if c := h.events.find(ReasonDowngradeRefused); c == nil {
					t.Errorf("events %+v lack %s", h.events.events, ReasonDowngradeRefused)
				}
				if em := h.em.State(); em.VersionLock != "latest" || em.Status.ActivatedVersion() != "" {
					t.Errorf("lock %q, activated %q: want the lock untouched and nothing activated", em.VersionLock, em.Status.ActivatedVersion())
				}
				return
			}
			for i := 0; i < 30 && !(h.status().CurrentState == idle && h.shadows.get().Spec.State == idle); i++ {
				if _, err := h.sync(a); err != nil {
					t.Logf("sync %d: %v", i, err)
				}
				h.operator("")
			}
			em := h.em.State()
			if em.Running != "1.20.0" || em.Reboots != 2 || em.VersionLock != "latest" {
				t.Errorf("running %s after %d reboots, lock %q; want 1.20.0 after 2, latest restored", em.Running, em.Reboots, em.VersionLock)
			}
			if st := h.status(); st.CurrentState != idle || st.CurrentVersion != "1.20.0" {
				t.Errorf("status %+v, want Idle on 1.20.0", st)
			}
		})
	}
}

// activationAnswerLost is an agent process that activated the update and
// was gone before it saw the answer: the host took the activation, the
// shadow never heard of it.
type activationAnswerLost struct{ BottlerocketAPI }

func (a activationAnswerLost) ActivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error) {
	if _, err := a.BottlerocketAPI.ActivateUpdate(ctx); err != nil {
		return nil, err
	}
	return nil, errKilled
}

// TestAnUpdateBootedBeforeItsStagingWasReportedGoesOnToItsHealthGate: found
// by the update simulation (seed 15065666919217838311). The agent activated
// the update, the answer was lost, and the host rebooted for another reason
// into the update while spec still asked for StagedAndPerformedUpdate. The
// restarted agent finds the host on spec.version: staging has nothing left
// to do, so it reports the update staged and then booted (no drain, no
// second reboot), and the operator's health gate judges the release. Failing
// the attempt instead, as a user's lock change while the agent was down
// made it do, aborted an update that had already booted: the node stayed on
// a release no health gate had seen. A lock someone changed is still theirs.
func TestAnUpdateBootedBeforeItsStagingWasReportedGoesOnToItsHealthGate(t *testing.T) {
	for _, userLock := range []string{"", "1.22.0"} {
		t.Run(fmt.Sprintf("user lock %q", userLock), func(t *testing.T) {
			h := newHarness(t, emulator.Config{Offered: []string{"1.21.0", "1.22.0"}})
			h.shadows.create()
			a := h.agentWith(activationAnswerLost{h.api})
			mustSync(t, h, a)
			h.operator("1.21.0")
			if _, err := h.sync(a); !errors.Is(err, errKilled) {
				t.Fatalf("staging sync = %v, want the activation's answer lost", err)
			}
			h.expectState(idle)
			if v := h.em.State().Status.ActivatedVersion(); v != "1.21.0" {
				t.Fatalf("activated version = %q, want 1.21.0", v)
			}
			ctx := context.Background()
			must(t, h.api.Reboot(ctx)) // not the agent's: a kernel panic, maintenance
			h.settle()
			if userLock != "" {
				must(t, h.api.SetVersionLock(ctx, userLock)) // while the agent is down
			}
			b := h.newAgent()
			must(t, b.InitLease(ctx))
			mustSync(t, h, b)
			h.expectState(staged)
			want := userLock
			if want == "" {
				want = "latest"
			}
			if got := h.em.State().VersionLock; got != want {
				t.Errorf("version lock = %q once staged, want %q", got, want)
			}
			h.operator("1.21.0")
			h.expectReportedBootedWithoutASecondReboot(b, "1.21.0")
			if st := h.status(); st.CrashCount != 0 || meta.FindStatusCondition(st.Conditions, updatesv1alpha1.ConditionUpdateFailed) != nil {
				t.Errorf("status = %+v, want no crash and no UpdateFailed condition", st)
			}
			if !h.lease.isHeld() {
				t.Error("the Lease stays released on a node that runs the update")
			}
		})
	}
}

// expectReportedBootedWithoutASecondReboot syncs a (a few times at most)
// until it reports RebootedIntoUpdate, and checks that the host booted
// version once, unplanned, and was not rebooted again.
func (h *harness) expectReportedBootedWithoutASecondReboot(a *Agent, version string) {
	h.t.Helper()
	for i := 0; i < 4 && h.status().CurrentState != rebootedTo; i++ {
		mustSync(h.t, h, a)
	}
	h.expectState(rebootedTo)
	if st := h.em.State(); st.Reboots != 1 || st.Running != version {
		h.t.Fatalf("reboots = %d, running %s: want the one unplanned boot into %s and no second", st.Reboots, st.Running, version)
	}
}
