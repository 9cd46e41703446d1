package nodehealth_test

import (
	"flag"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/sim"
)

var simEviction = flag.Bool("sim.eviction", true, "draw each seed's eviction mode and rate (false: mode Evict, 1000 nodes per second, the schedule before they were drawn)")

// evictionStream is xored into the seed for drawEviction's stream: a stream
// of its own, so that a seed whose draw is mode Evict, effectively unlimited,
// runs the schedule it ran before the draw was added.
const evictionStream = 0x6576696374 // "evict"

// simRates are the eviction.nodesPerSecond a seed draws from: effectively
// unlimited, or one node every 10, 20 or 50 s, which a 300 s schedule with
// a 30 s eviction timeout and several nodes failing together reaches.
var simRates = []float64{1000, 0.1, 0.05, 0.02}

// drawEviction draws the eviction mode (Evict most often, NoExecute and
// None on a fraction of the seeds) and the cluster-wide rate, and writes
// them in the trace when they are not the old schedule's.
//
// The seeds of simRegressions keep mode Evict, effectively unlimited: each
// was kept for what it found under them, and most of what they hold (drains,
// eviction clocks) is only observable in mode Evict. A seed's schedule
// depends on the seed alone, however it is run.
func (s *simulation) drawEviction(seed uint64) {
	if !*simEviction || slices.Contains(simRegressions.Seeds(), seed) {
		return
	}
	r := sim.NewRand(seed ^ evictionStream)
	switch {
	case r.Chance(0.15):
		s.opts.Eviction.Mode = nodehealth.EvictionModeNone
	case r.Chance(0.2):
		s.opts.Eviction.Mode = nodehealth.EvictionModeNoExecute
	}
	s.opts.Eviction.NodesPerSecond = simRates[0]
	if r.Chance(0.5) {
		s.opts.Eviction.NodesPerSecond = simRates[1+r.Intn(len(simRates)-1)]
	}
	if s.opts.Eviction.Mode != nodehealth.EvictionModeEvict {
		// kubectl drain's flags go with mode Evict only (the
		// configuration's validation).
		s.opts.Eviction.Force = false
	}
	if s.opts.Eviction.Mode != nodehealth.EvictionModeEvict || s.opts.Eviction.NodesPerSecond != simRates[0] {
		s.trace.Add("eviction mode %s, %g nodes per second", s.opts.Eviction.Mode, s.opts.Eviction.NodesPerSecond)
	}
}

// simEvictionRegressions are the seeds the eviction modes and rate found
// something with, kept with what they found; unlike simRegressions, they
// run with the mode and rate they draw.
var simEvictionRegressions = sim.Regressions{
	// The controller's (the first seeds once modes were drawn, 2026-11-29):
	// n2 escalated in mode NoExecute at 1m25s; its ungate at 2m13s was
	// refused by an outage of the controller's writes, and the updater's
	// release at 2m25s gated it again before the removal was written; the
	// new gate, never escalated, kept the NoExecute variant.
	{Seed: 12, Name: "the NoExecute variant of a gate whose ungate an outage refused is removed when a planned release gates the node again before the removal is written; an escalation in mode NoExecute adds it"},
	{Seed: 25, Name: "in mode None a node that keeps failing past its eviction timeout is never escalated: its pods stay"},
}

// escalatedNow reports whether the controller visibly escalated the node in
// this instant: the running instance tried to evict one of its pods, or put
// the NoExecute variant on it.
func (s *simulation) escalatedNow(n *simNode) bool {
	now := s.clk.Now()
	s.removalsMu.Lock()
	noExecute := s.noExecuteAdded[n.name].Equal(now)
	s.removalsMu.Unlock()
	return n.attemptBy == s.gen && n.lastAttempt.Equal(now) || noExecute
}

// settleTiedTurns tells the model which order of a tie the controller took.
// Nodes that come due in the same instant take their turns in name order in
// the model; the controller's workers evaluate them at once, and whichever
// takes the free turn first has it (seed 8466550013169616459: n11 and n12
// came due together, two workers evaluated them, n12's took the turn). The
// model accepts another order of a tie (model.SwapTiedTurns) and nothing
// else: a node the model escalated now is traded for one the controller
// escalated that waits for a later turn only if both came due in the same
// instant, the second is still due, and the first's own turn escalated it
// now; or, at the end of a second (endOfSecond, when the driver has
// settled the second's evictions), for one neither escalated whose turn
// the model holds for later and which is no longer due: the controller gave
// it the earlier turn, which it spent unused. escalated says whether the
// controller has escalated the node.
func (s *simulation) settleTiedTurns(endOfSecond bool, escalated func(n *simNode, obj *v1.Node) bool) {
	s.t.Helper()
	want := s.model.Nodes()
	var modelOnly, controllerOnly, escalatedByNeither []string
	for _, n := range s.nodes {
		if n.unlisted {
			continue
		}
		obj, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		w, got := want[n.name], escalated(n, obj)
		switch byModel := w.Evicted || w.NoExecute; {
		case !byModel && !got:
			escalatedByNeither = append(escalatedByNeither, n.name)
		case byModel && !got:
			modelOnly = append(modelOnly, n.name)
		case got && !byModel:
			controllerOnly = append(controllerOnly, n.name)
		case got && !s.escalatedNow(n):
			// Escalated by an earlier instance, whose evictions (and
			// NoExecute variant) outlive it: the model may have escalated
			// it again now, at the new instance's turn, and the controller
			// another node of the tie (seed 5702612469490362383: n3,
			// escalated at 2m7s, and n7 came due together 30 s after
			// controller 3's start; the controller evicted n7's pods at
			// the free turn). Only an escalation visible in this instant
			// shows the controller took the turn; one of a node that
			// already carries the NoExecute variant shows nothing, so
			// none is lost by taking the other order.
			modelOnly = append(modelOnly, n.name)
		}
	}
	for _, x := range modelOnly {
		swapped := false
		for i, y := range controllerOnly {
			if s.model.SwapTiedTurns(x, y, true) {
				s.trace.Add("t=%s %s took the turn %s had in the model: they came due together", s.at(), y, x)
				controllerOnly = slices.Delete(controllerOnly, i, i+1)
				swapped = true
				break
			}
		}
		if swapped || !endOfSecond {
			continue
		}
		// Or the controller gave x's turn to a node of the tie that no
		// longer failed when it came, and spent it unused (seed
		// 8630686478205880935: n19, rebooted, had the turn of 3m34s the
		// model gave n17). Only at the end of the second: inside it, the
		// driver has not settled the evictions yet, so a node escalated
		// in mode Evict is not seen as escalated.
		for _, y := range escalatedByNeither {
			if s.model.SwapTiedTurns(x, y, false) {
				s.trace.Add("t=%s %s had the turn %s had in the model and spent it: they came due together", s.at(), y, x)
				break
			}
		}
	}
}

// staysLabel marks the pods a drain must leave on their node whatever the
// escalation, with the reason as its value (stayingPods).
const staysLabel = "sim-stays"

// stayingPods are the pods beside a node's workload that no escalation
// evicts: the kubelet owns a static pod's mirror and the Eviction API cannot
// remove it; the DaemonSet controller would put its pod straight back, and
// it must run until the node goes down; a pod that tolerates the readiness
// taint chose to run on a gated node, as an extension does (pkg/drain's
// filters, as the controller combines them in newDrainer). None of them asks
// for an eviction request, so they change no seed's schedule; an attempt on
// one fails the run (wrongEviction). Only a unit test saw these filters
// before: a drain built without one of them was never run here.
func stayingPods(node, suffix string) []*v1.Pod {
	pod := func(name, why string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-" + node + suffix, Labels: map[string]string{staysLabel: why}},
			Spec: v1.PodSpec{NodeName: node}}
	}
	mirror := pod("mirror", "the mirror of a static pod")
	mirror.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "hash"}
	daemon := pod("ds", "a DaemonSet's pod")
	daemon.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-agent", Controller: ptr.To(true)}}
	tolerating := pod("tol", "a pod that tolerates the readiness taint")
	// Managed, so that only the toleration keeps it: drain.Overrides would
	// leave a pod that declares no controller when force is off.
	tolerating.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "extension", UID: "uid-extension", Controller: ptr.To(true)}}
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: simTaintKey, Operator: v1.TolerationOpExists}}
	return []*v1.Pod{mirror, daemon, tolerating}
}

// wrongEviction records an eviction attempt on a pod a drain must leave, for
// the next compare to report with the trace, and refuses it, so that the pod
// stays as the run goes on to that compare.
func (s *simulation) wrongEviction(pod *v1.Pod, why string) error {
	s.wrongEvictions = append(s.wrongEvictions, fmt.Sprintf("t=%s: the controller tried to evict %s, %s (invariant)", s.at(), pod.Name, why))
	return apierrors.NewForbidden(podsGVR.GroupResource(), pod.Name, fmt.Errorf("sim: %s must stay", pod.Name))
}
