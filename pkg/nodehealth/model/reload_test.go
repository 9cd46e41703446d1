package model

import (
	"testing"
	"time"
)

// A configuration change restarts the controller with the new options
// (docs/controller.md, "Changing the configuration"): a failing node's
// eviction clock starts afresh at the restart and runs to the new timeout,
// whatever the old one had counted.
func TestARestartWithANewEvictionTimeoutCountsTheNewTimeoutFromTheRestart(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", "Crashed")
	st.advance(4 * minute)
	st.expect("4 m of the 5 m counted", gated(notReady, boot1), "n1")
	st.stop(4 * minute)
	cfg := defaultConfig()
	cfg.EvictionTimeout = 2 * minute
	st.m.Configure(cfg)
	st.start(4*minute + 10*sec)
	st.advance(6*minute + 9*sec)
	st.expect("the old clock's 5 m have passed, the new 2 m not yet", gated(notReady, boot1), "n1")
	st.advance(6*minute + 10*sec)
	st.expect("2 m after the restart", evicted(gated(notReady, boot1)), "n1")
}

// A fail-open of this boot, in the boot record, outlives a change of the
// rule's failurePolicy to KeepGated: the policy decides the startup
// timeouts that pass from then on, and the node it ungated stays in service
// until the extension renews.
func TestAFailOpenOfThisBootOutlivesAChangeOfItsPolicyToKeepGated(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.start(0)
	open := Extension{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: true}
	st.add(0, worker("n1", gating("a"), open))
	st.keep("n1/a")
	st.run(1 * minute)
	st.expect("b failed open", failedOpen(boot1+";b"), "n1")
	st.stop(90 * sec)
	closed := open
	closed.FailOpen = false
	st.update(90*sec, worker("n1", gating("a"), closed))
	st.start(100 * sec)
	st.run(3 * minute)
	st.expect("b still failed open", failedOpen(boot1+";b"), "n1")
	st.renew(3*minute+1*sec, "n1/b")
	st.expect("b came up", ready(boot1), "n1")
}

// Evicted says the pods went: a configuration change to another mode does
// not bring them back (simulation seed 7720080455803372287, the model's: it
// reported Evicted only while the mode was Evict).
func TestPodsEvictedInModeEvictStayEvictedAfterAChangeToModeNoExecute(t *testing.T) {
	st := newStory(t, defaultConfig())
	st.inService(worker("n1", gating("a")))
	st.release(10*sec, "n1/a", "Crashed")
	st.advance(5*minute + 10*sec)
	st.expect("escalated in mode Evict", evicted(gated(notReady, boot1)), "n1")
	st.stop(6 * minute)
	cfg := defaultConfig()
	cfg.EvictionMode = EvictionModeNoExecute
	st.m.Configure(cfg)
	st.start(6 * minute)
	st.expect("the pods are still gone", evicted(gated(notReady, boot1)), "n1")
	st.advance(11*minute + 10*sec)
	want := evicted(gated(notReady, boot1))
	want.NoExecute = true
	st.expect("escalated again in mode NoExecute, 5 m after the restart", want, "n1")
}
