package model

import (
	"strings"
	"testing"
)

// atDrain is a shadow at the operator's drain, its node tainted in boot b1.
func atDrain() (World, Shadow) {
	s := idleShadow("a")
	s.Spec, s.Status, s.SpecSince, s.SpecVersion = Rebooted, Staged, t0, "1.1.0"
	w := world(s)
	n := w.Nodes["a"]
	n.BootID, n.Tainted, n.Healthy = "b1", true, false
	w.Nodes["a"] = n
	return w, s
}

// The operator's drained annotation, write by write: it names the Node's
// boot, only at the drain of a tainted node, and no transition of spec keeps
// it.
func TestTheDrainedAnnotationIsWrittenOnlyAtTheDrainOfATaintedNodeInItsBoot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(w *World, prev, next *Shadow)
		want   string // a part of the violation; "" allowed
	}{
		{"marked drained at the drain, in the Node's boot", func(_ *World, _, next *Shadow) { next.Drained = "b1" }, ""},
		{"marked drained in another boot", func(_ *World, _, next *Shadow) { next.Drained = "b0" }, "the Node runs boot b1"},
		{"marked drained before the taint", func(w *World, _, next *Shadow) {
			n := w.Nodes["a"]
			n.Tainted = false
			w.Nodes["a"] = n
			next.Drained = "b1"
		}, "without the readiness taint"},
		{"marked drained before the agent reported staging", func(_ *World, prev, next *Shadow) {
			prev.Status, next.Status, next.Drained = Idle, Idle, "b1"
		}, "not at the drain"},
		{"marked drained after the agent asked for the reboot", func(_ *World, prev, next *Shadow) {
			prev.RebootRequested, next.RebootRequested, next.Drained = true, true, "b1"
		}, "not at the drain"},
		{"marked drained while its Node is gone", func(w *World, _, next *Shadow) {
			delete(w.Nodes, "a")
			next.Drained = "b1"
		}, "does not exist"},
		{"removed without a transition", func(_ *World, prev, _ *Shadow) { prev.Drained = "b1" }, "removed without a change of spec"},
		{"removed with the transition to MonitoringUpdate", func(_ *World, prev, next *Shadow) {
			prev.Drained, prev.Status, next.Status = "b1", Rebooted, Rebooted
			next.Spec, next.SpecSince = Monitoring, t0.Add(1)
		}, ""},
		{"kept through the transition to MonitoringUpdate", func(_ *World, prev, next *Shadow) {
			prev.Drained, prev.Status, next.Status = "b1", Rebooted, Rebooted
			next.Spec, next.SpecSince, next.Drained = Monitoring, t0.Add(1), "b1"
		}, "survived it"},
		{"kept through a failure's return to Idle", func(_ *World, prev, next *Shadow) {
			prev.Drained = "b1"
			next.Spec, next.SpecSince, next.Drained = Idle, t0.Add(1), "b1"
		}, "survived it"},
		{"another write that leaves it alone", func(_ *World, prev, next *Shadow) {
			prev.Drained, next.Drained = "b1", "b1"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, prev := atDrain()
			next := prev
			tc.change(&w, &prev, &next)
			w.Shadows["a"] = prev
			got := DrainedAllowed(w, prev, next)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("DrainedAllowed = %q, want %q", got, tc.want)
			}
		})
	}
}

// Nothing is evicted before the node carries the readiness taint, nor
// outside the drain and the wait for the reboot it allowed.
func TestTheOperatorEvictsOnlyFromATaintedNodeAtItsDrain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(w *World, s *Shadow)
		want   string
	}{
		{"at the drain", func(*World, *Shadow) {}, ""},
		{"the last pass while the reboot waits", func(_ *World, s *Shadow) { s.Drained, s.RebootRequested = "b1", true }, ""},
		{"before the taint", func(w *World, _ *Shadow) {
			n := w.Nodes["a"]
			n.Tainted = false
			w.Nodes["a"] = n
		}, "without the readiness taint"},
		{"while staging", func(_ *World, s *Shadow) { s.Spec = Staged }, "not at the drain"},
		{"after the agent reported the reboot", func(_ *World, s *Shadow) { s.Status = Rebooted }, "not at the drain"},
		{"while a reboot asked for in an undrained boot waits", func(_ *World, s *Shadow) { s.Drained, s.RebootRequested = "b0", true }, "without a drain of this boot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, s := atDrain()
			tc.change(&w, &s)
			got := EvictionAllowed(w, s)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("EvictionAllowed = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTheAgentRebootsForItsUpdateOnlyFromTheBootTheOperatorDrained(t *testing.T) {
	_, s := atDrain()
	if why := RebootAllowed(s, "b1"); !strings.Contains(why, `says ""`) {
		t.Fatalf("undrained: RebootAllowed = %q", why)
	}
	s.Drained = "b0"
	if why := RebootAllowed(s, "b1"); !strings.Contains(why, `says "b0"`) {
		t.Fatalf("drained in an earlier boot: RebootAllowed = %q", why)
	}
	s.Drained = "b1"
	if why := RebootAllowed(s, "b1"); why != "" {
		t.Fatalf("drained in its boot: RebootAllowed = %q", why)
	}
}

// The drain's options decide which pod an eviction may take and with what
// grace period: never a skipped pod, a bare pod only with force, emptyDir
// data only with deleteEmptyDirData, the policy's grace period always.
func TestTheDrainOptionsSayWhichPodsAreEvictedAndWithWhatGracePeriod(t *testing.T) {
	five := int64(5)
	for _, tc := range []struct {
		name  string
		opts  DrainOptions
		pod   Pod
		grace *int64
		want  string // a part of the violation; "" allowed
	}{
		{"a managed pod, no grace period set", DrainOptions{}, Pod{Name: "p"}, nil, ""},
		{"a managed pod with the policy's grace period", DrainOptions{GracePeriodSeconds: &five}, Pod{Name: "p"}, &five, ""},
		{"a managed pod without the policy's grace period", DrainOptions{GracePeriodSeconds: &five}, Pod{Name: "p"}, nil, "the policy's is 5"},
		{"a grace period the policy does not set", DrainOptions{}, Pod{Name: "p"}, &five, "the policy's is unset"},
		{"a skipped pod", DrainOptions{Force: true, DeleteEmptyDirData: true}, Pod{Name: "p", Skip: true}, nil, "skipPodSelector"},
		{"a bare pod with force", DrainOptions{Force: true}, Pod{Name: "p", Unmanaged: true}, nil, ""},
		{"a bare pod without force", DrainOptions{}, Pod{Name: "p", Unmanaged: true}, nil, "without force"},
		{"emptyDir data with deleteEmptyDirData", DrainOptions{DeleteEmptyDirData: true}, Pod{Name: "p", LocalData: true}, nil, ""},
		{"emptyDir data without deleteEmptyDirData", DrainOptions{}, Pod{Name: "p", LocalData: true}, nil, "without deleteEmptyDirData"},
	} {
		c := cfg
		c.Drain = tc.opts
		got := c.PodEvictionViolation(tc.pod, tc.grace)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if c := cfg; !c.StaysForTheReboot(Pod{Skip: true}) || c.StaysForTheReboot(Pod{Unmanaged: true}) {
		t.Error("only a skipped pod stays for the reboot")
	}
}
