package operator_test

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

// -sim.off switches fault classes off: the driver makes the draw that would
// inject one and skips the injection, so that without the flag every seed
// schedules what it did; with it, the draws after a skipped one move (a
// switch of the driver goes on to its next case). With it, a mutant said
// to be reached by one class only is shown not to be found without it
// (docs/reliability.md, "The updater's fault classes").
//
//	go test ./pkg/updater/operator -run '^TestUpdaterSimulation$' -sim.seeds=0 -sim.seed=6 -sim.off=tolerating-pod,health-lag
var simOff = flag.String("sim.off", "", "comma-separated fault classes the updater simulation does not inject (simOffKeys lists them)")

// simOffKeys are the classes -sim.off takes, in the order of the table of
// docs/reliability.md.
var simOffKeys = []string{
	// The hosts and their agents.
	"agent-kill", "agent-kill-mid-step", "prepare-kill", "answers-lost", "reboot-refused", "bottlerocket-500",
	"prepare-fails", "repository-unreachable", "slow-prepare", "boot-fails", "user-lock", "user-lock-preparing",
	"user-lock-ahead", "host-crash",
	// The cluster.
	"node-delete", "tolerating-pod", "shadow-delete", "health-lag", "status-lost", "spec-conflict", "spec-lost",
	"report-conflict", "unmanage",
	// The operator.
	"operator-kill", "hook-failover",
	// Users and the policy.
	"wave", "pin", "pause", "windows", "pacing-edit", "resume",
	// What a seed draws for its policy and releases.
	"pacing", "blocking-pods", "rollback", "alerts", "hooks", "drain-options", "bad-release",
	// What the gates' sources do.
	"alert-fires", "node-alert-fires", "alert-source-down", "hook-fails",
}

// simOffClasses parses -sim.off; an unknown class fails the test, so that a
// typo never runs a schedule with everything on.
func simOffClasses(t *testing.T) map[string]bool {
	off := map[string]bool{}
	if *simOff == "" {
		return off
	}
	for _, k := range strings.Split(*simOff, ",") {
		if !slices.Contains(simOffKeys, k) {
			t.Fatalf("-sim.off: no fault class %q; the classes are %s", k, strings.Join(simOffKeys, ", "))
		}
		off[k] = true
	}
	return off
}

// on reports whether the driver injects the class (-sim.off).
func (s *updaterSimulation) on(class string) bool {
	if !slices.Contains(simOffKeys, class) {
		s.t.Fatalf("the driver asks about fault class %q, which simOffKeys lacks", class)
	}
	return !s.off[class]
}
