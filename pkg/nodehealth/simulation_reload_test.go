package nodehealth_test

import (
	"flag"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/sim"
)

var simReloads = flag.Bool("sim.reloads", true, "draw, on a share of the seeds, configuration reloads: the controller restarts with options a user edited (false: the schedule before they were drawn)")

// reloadStream is xored into the seed for reloadFaults' stream: a stream of
// its own, so that a seed runs the schedule it ran before reloads were
// drawn until the first of them.
const reloadStream = 0x72656c6f6164 // "reload"

// reloadShare is the share of seeds whose configuration is edited while
// they run; reloadChance the chance, each second of those seeds, of an
// edit. About 3 edits in a 300 s seed, some of them rejected.
const (
	reloadShare  = 0.25
	reloadChance = 0.01
)

// drawReloads decides whether the seed's configuration is edited while it
// runs, and if so starts the edits' stream. The seeds kept for what they
// found keep their schedules; an open finding draws as the fresh seed it was
// (seeds 10644956011548756368 and 15660107569789160911 passed while
// registered, since registering them took their reloads away).
func (s *simulation) drawReloads(seed uint64) {
	kept := slices.Concat(simRegressions.Seeds(), simEvictionRegressions.Seeds(), simZoneRegressions.Seeds(),
		simWritersRegressions.Seeds())
	if !*simReloads || slices.Contains(kept, seed) {
		return
	}
	s.rrng = sim.Stream(seed, reloadStream, reloadShare)
}

// reloadFaults edits the controller's configuration now and then, as
// `kubectl edit configmap` does. The binary re-reads the file, keeps running
// with the old configuration when the new one is invalid, and restarts its
// control loop with a valid one (docs/controller.md): an edit the
// controller's validation rejects is therefore no restart at all, and a
// valid one is the driver's restart with the new options, of which the
// model is told between the old instance's stop and the new one's start
// (startController).
func (s *simulation) reloadFaults(now time.Time) {
	r := s.rrng
	if r == nil || !r.Chance(reloadChance) {
		return
	}
	next, edit := editOptions(r, s.opts)
	if err := next.Validate(); err != nil {
		s.trace.Add("t=%s configuration edit rejected (%s: %v): the controller keeps running with the old one", s.at(), edit, err)
		return
	}
	if now.Before(s.lagUntil) {
		// As for the schedule's restarts: the model takes the old
		// instance's decisions as written, which they may not be yet.
		s.trace.Add("t=%s no configuration reload while the controller catches up after an outage (%s)", s.at(), edit)
		return
	}
	s.opts = next
	if s.leaderless() {
		// No instance runs to re-read the file: the next leader starts
		// with it.
		s.trace.Add("t=%s configuration edited while no leader runs: %s", s.at(), edit)
		return
	}
	s.trace.Add("t=%s configuration reloaded: %s", s.at(), edit)
	s.startController()
}

// editOptions returns a copy of o with one edit a user would make, drawn
// from r, and the edit in words. Every edit is one the model understands;
// some (a minimum lease duration the canary cannot guard) are invalid.
func editOptions(r *sim.Rand, o nodehealth.Options) (nodehealth.Options, string) {
	o.Rules = slices.Clone(o.Rules)
	seconds := func(choices ...int) time.Duration {
		return time.Duration(choices[r.Intn(len(choices))]) * time.Second
	}
	switch r.Intn(9) {
	case 0:
		// A negative grace is a typo the validation rejects.
		o.RenewalGrace = seconds(-5, 0, 1, 5, 10)
		return o, fmt.Sprintf("renewalGrace %s", o.RenewalGrace)
	case 1:
		// With a short grace, a minimum lease duration of 4 s is
		// shorter than the canary can guard: rejected.
		o.MinimumLeaseDuration, o.RenewalGrace = seconds(0, 4, 10, 15), seconds(0, 1, 5)
		return o, fmt.Sprintf("minimumLeaseDuration %s, renewalGrace %s", o.MinimumLeaseDuration, o.RenewalGrace)
	case 2:
		o.RegistrationGrace = seconds(10, 30, 60)
		return o, fmt.Sprintf("registrationGrace %s", o.RegistrationGrace)
	case 3:
		if i := slices.IndexFunc(o.Rules, func(r nodehealth.Rule) bool { return r.Name == "cni" }); i >= 0 {
			o.Rules = slices.Delete(o.Rules, i, i+1)
			return o, "rule cni removed"
		}
		o.Rules = append(o.Rules, simCNIRule())
		return o, "rule cni added"
	case 4:
		cni := simRuleNamed(&o, "cni")
		timeout, policy := seconds(0, 10, 20, 40), nodehealth.FailurePolicyKeepGated
		if r.Chance(0.5) {
			policy = nodehealth.FailurePolicyUngate
		}
		if cni == nil {
			return o, "rule cni's startup timeout, which has no rule cni (nothing changes)"
		}
		cni.StartupTimeout, cni.FailurePolicy = timeout, policy
		return o, fmt.Sprintf("rule cni startupTimeout %s, failurePolicy %s", timeout, policy)
	case 5:
		o.BlastRadius.ClusterThreshold = float64(r.Intn(101)) / 100
		o.BlastRadius.ZoneThreshold = float64(r.Intn(101)) / 100
		return o, fmt.Sprintf("blast radius cluster %v zone %v", o.BlastRadius.ClusterThreshold, o.BlastRadius.ZoneThreshold)
	case 6:
		o.Eviction.Timeout = seconds(10, 30, 60)
		return o, fmt.Sprintf("eviction timeout %s", o.Eviction.Timeout)
	case 7:
		o.Eviction.Mode = []nodehealth.EvictionMode{nodehealth.EvictionModeEvict, nodehealth.EvictionModeNoExecute, nodehealth.EvictionModeNone}[r.Intn(3)]
		// kubectl drain's flags go with mode Evict only (the
		// configuration's validation); the simulation's pods declare a
		// controller, so the flag changes nothing they see.
		o.Eviction.Force = o.Eviction.Mode == nodehealth.EvictionModeEvict
		return o, fmt.Sprintf("eviction mode %s", o.Eviction.Mode)
	default:
		o.Eviction.NodesPerSecond = simRates[r.Intn(len(simRates))]
		return o, fmt.Sprintf("eviction nodesPerSecond %g", o.Eviction.NodesPerSecond)
	}
}

// simCNIRule is the rule that follows the cni label, as simOptions has it.
func simCNIRule() nodehealth.Rule {
	return nodehealth.Rule{Name: "cni", Extension: "cni", Selector: labels.SelectorFromSet(labels.Set{"cni": "true"}), AffectsReadiness: true, FailurePolicy: nodehealth.FailurePolicyKeepGated}
}

// simRuleNamed is o's rule of that name (nil: o has none): a reload may
// have removed it.
func simRuleNamed(o *nodehealth.Options, name string) *nodehealth.Rule {
	for i := range o.Rules {
		if o.Rules[i].Name == name {
			return &o.Rules[i]
		}
	}
	return nil
}

// simReloadRegressions are the seeds the reload class found something
// with, kept with what they found; unlike simRegressions, they draw their
// reloads.
var simReloadRegressions = sim.Regressions{
	// The model's (the class's first 150 fresh seeds, -sim.fresh=configreload-3,
	// 2026-11-29): n8, escalated in mode Evict at 1m7s, its pods gone; the
	// configuration changed to mode NoExecute at 1m28s and the model, which
	// reported Evicted only while the mode was Evict, took them back.
	{Seed: 7720080455803372287, Name: "pods evicted in mode Evict stay evicted after a reload to mode NoExecute (model)"},
	// The driver's (-sim.fresh=configreload-4): another writer added the
	// readiness taint to n3 at 13s and the reload, drawn after the other
	// writers' writes of that second, restarted the controller before it
	// removed the taint; the new instance found n3 gated
	// (ControllerStarted), the model, told nothing of such a taint, in
	// service. Reloads are now drawn where the schedule's restarts are.
	{Seed: 14092126669512402196, Name: "a reload is drawn before the other writers' writes of its second, as the schedule's restarts are (driver)"},
	// The model's (make simulate SEEDS=200 on 3a7a540 and SEEDS=100 on
	// 03862f1, 2026-11-29): a reload's restart found n3 (n0) gated and
	// failing, in service in its boot; during a blast-radius suspension
	// another writer removed its taint, and the model put it back as if
	// the found gate were a bootstrap's, while the controller held the
	// node like any failing one (docs/controller.md, "Other writers").
	{Seed: 10644956011548756368, Name: "a taint another writer removes during a suspension from a failing node found gated at a reload is a failure taint: held (model)"},
	{Seed: 15660107569789160911, Name: "the same with the cluster suspended four seconds before the removal, 16 s after the fourth controller's start (model)"},
	// The driver's (make simulate-fresh on 5180462, 2026-11-29; 4 workers):
	// at 3m45s n20's release and then n0's renewal were delivered, the
	// second between the workers' requests; the controller kept the cluster
	// suspended (n0 back, n20 failing: still 3 at a 1 % threshold), the
	// model, handed them sorted by name, took n0 first, lifted the
	// suspension and tainted the held n6 and n10.
	{Seed: 13028741961077139859, Name: "events delivered between the workers' requests reach the model in the order the controller saw them, not by name (driver)"},
	// The same model defect as 10644956011548756368 (make simulate SEEDS=40
	// beside its fix, 2026-11-29): t=1m17s n6, held by the controller,
	// tainted by the model, after another writer removed its taint three
	// times during a zone's suspension.
	{Seed: 13561207296339849341, Name: "a failing node's taint removed again and again during a suspension stays held (model)"},
	// The controller's (make simulate-fresh on f14a986, 2026-11-29; 2
	// workers, no reload: kept here because this list draws its workers,
	// and with one it passes): at 2m0s the own view's recovery grace ran
	// out on every kube-proxy Lease at once (cluster suspended, 7 held)
	// and kube-proxy came back everywhere; n6's renewal lifted the
	// suspension, n8's was delivered before n8's sync, which took n8 for
	// recovered instead of tainting it as the lift had judged it.
	{Seed: 9210168856590487975, Name: "a held node still failing when a suspension lifts is tainted in that step, also when its renewal in that instant reaches the cache before its sync (controller)"},
	// The controller's (make simulate SEEDS=200 on 7e8eccb, 2026-11-29;
	// mode NoExecute, 0.1 nodes per second, no reload: kept here because
	// this list draws its zones and workers): n6 and n9, their eviction
	// clocks held past the timeout by a suspension and a stale own view,
	// came due together at 4m22s when both lifted; the controller queued
	// them in map order, and n9 took the turn of 4m25s the model gave n6.
	{Seed: 3951628173843678851, Name: "nodes a guard held past their eviction timeout take their turns of the rate in name order when it lifts (controller)"},
}
