package nodehealth_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"

	"nodehealth.io/nodehealth/pkg/nodehealth/model"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/sim"
)

// The simulation's leaving nodes: cluster-autoscaler and Karpenter take
// nodes away (one at a time, or a scale-down of 30 % at once), sometimes
// change their mind and take the taint off again, and someone else drains
// nodes with a KEP-5683 lifecycle condition. kube-proxy's /healthz fails on
// a node carrying ToBeDeletedByClusterAutoscaler, so its heartbeat releases
// the Lease there (heartbeats).

// heartbeatProbeFailed is the reason the heartbeat releases with when its
// probe fails.
const heartbeatProbeFailed = "ProbeFailed"

// karpenterFinalizer holds the deletion of a Node Karpenter disrupts until it
// has terminated the instance: the Node has a deletionTimestamp meanwhile.
const karpenterFinalizer = "karpenter.sh/termination"

// leavingInputs is what the model reads of a Node's leaving signals: the keys
// of its taints other than the readiness taint, whether it is being deleted,
// whether it is unschedulable, and its lifecycle conditions.
func leavingInputs(node *v1.Node) (taints []string, deleting, unschedulable bool, conds []model.LifecycleCondition) {
	for _, t := range node.Spec.Taints {
		if t.Key != simTaintKey {
			taints = append(taints, t.Key)
		}
	}
	for _, c := range node.Status.Conditions {
		switch string(c.Type) {
		case nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleConditionDrained,
			nodev1alpha1.LifecycleConditionMaintenanceInProgress, nodev1alpha1.LifecycleConditionMaintenancePlanned:
			conds = append(conds, model.LifecycleCondition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
				LastTransitionTime: c.LastTransitionTime.Time})
		}
	}
	return taints, node.DeletionTimestamp != nil, node.Spec.Unschedulable, conds
}

// leavingKey changes when what the model reads of the Node's leaving signals
// does.
func leavingKey(node *v1.Node) string {
	taints, deleting, unschedulable, conds := leavingInputs(node)
	return fmt.Sprint(taints, deleting, unschedulable, conds)
}

// leavingFaults draws this second's leaving nodes from the leaving stream and
// carries out what earlier draws scheduled.
func (s *simulation) leavingFaults(now time.Time) {
	s.checkLeavingSignals()
	r := s.lrng
	var gone []*simNode
	for _, n := range s.nodes {
		switch {
		case !n.finalizeAt.IsZero() && !now.Before(n.finalizeAt):
			s.finalize(n)
			gone = append(gone, n)
			continue
		case !n.removeAt.IsZero() && !now.Before(n.removeAt):
			if s.removeNode(n) {
				gone = append(gone, n)
			}
			continue
		case !n.leaveUntil.IsZero() && !now.Before(n.leaveUntil):
			s.stopLeaving(n, now, true)
			s.trace.Add("t=%s %s: the autoscaler takes its taint off again", s.at(), n.name)
		case !n.drainedSince.IsZero() && now.Sub(n.drainedSince) > time.Duration(60+hash(n.name, n.drainedSince)%120)*time.Second:
			s.setDrained(n, false, false)
		}
		if n.leavingTaint != "" || !n.removeAt.IsZero() || !n.finalizeAt.IsZero() {
			continue
		}
		switch {
		case r.Chance(0.0006):
			key := nodev1alpha1.TaintToBeDeletedByClusterAutoscaler
			if r.Chance(0.3) {
				key = nodev1alpha1.TaintKarpenterDisrupted
			}
			s.startLeaving(n, now, key)
		case n.drainedSince.IsZero() && r.Chance(0.0004):
			// Someone drains the node by hand and says so; half the time
			// the node stays cordoned, otherwise the condition grows
			// stale (LifecycleConditionMaxAge 90 s) while nobody clears it.
			s.setDrained(n, true, r.Chance(0.5))
		}
	}
	if r.Chance(0.001) {
		// A scale-down of 30 % of the nodes at once.
		var cands []*simNode
		for _, n := range s.nodes {
			if n.leavingTaint == "" && n.removeAt.IsZero() && n.finalizeAt.IsZero() {
				cands = append(cands, n)
			}
		}
		k := (len(s.nodes)*3 + 9) / 10
		for i := 0; i < k && len(cands) > 0; i++ {
			j := r.Intn(len(cands))
			s.startLeaving(cands[j], now, nodev1alpha1.TaintToBeDeletedByClusterAutoscaler)
			cands = append(cands[:j], cands[j+1:]...)
		}
		s.trace.Add("t=%s scale-down of %d nodes", s.at(), k)
	}
	for _, n := range gone {
		s.nodes = slices.DeleteFunc(s.nodes, func(m *simNode) bool { return m == n })
	}
}

// checkLeavingSignals is the other writers' invariant for the leaving
// signals this schedule writes: the autoscaler's or Karpenter's taint and a
// foreign Drained=True stay on the Node until their writer takes them off,
// whatever the controller wrote since (docs/controller.md, "Other writers").
// The model cannot see one lost: it reads them from the same Node as the
// controller.
func (s *simulation) checkLeavingSignals() {
	var lost []string
	for _, n := range s.nodes {
		if n.leavingTaint == "" && n.drainedSince.IsZero() {
			continue
		}
		node, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatalf("reading node %s: %v", n.name, err)
		}
		if n.leavingTaint != "" && !nodeutil.HasTaint(node, n.leavingTaint, v1.TaintEffectNoSchedule) {
			lost = append(lost, fmt.Sprintf("%s: taint %s gone", n.name, n.leavingTaint))
		}
		if c := nodeutil.Condition(node, nodev1alpha1.LifecycleConditionDrained); !n.drainedSince.IsZero() && (c == nil || c.Status != v1.ConditionTrue) {
			lost = append(lost, fmt.Sprintf("%s: condition %s is %v, want True", n.name, nodev1alpha1.LifecycleConditionDrained, c))
		}
	}
	if len(lost) > 0 {
		s.t.Fatalf("t=%s a leaving signal another writer wrote was lost (invariant):\n  %s\nrecent trace:\n%s", s.at(), strings.Join(lost, "\n  "), s.trace.Tail(40))
	}
}

// startLeaving puts a leaving taint on the node; it is taken off again, or the
// node deleted, a while later.
func (s *simulation) startLeaving(n *simNode, now time.Time, key string) {
	r := s.lrng
	n.leavingTaint = key
	s.mutateNode(n, false, func(node *v1.Node) {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
		if key == nodev1alpha1.TaintKarpenterDisrupted && !slices.Contains(node.Finalizers, karpenterFinalizer) {
			node.Finalizers = append(node.Finalizers, karpenterFinalizer)
		}
	})
	after := time.Duration(15+r.Intn(90)) * time.Second
	staying := 0
	for _, m := range s.nodes {
		if m.removeAt.IsZero() && m.finalizeAt.IsZero() {
			staying++
		}
	}
	if r.Chance(0.6) && staying > 4 {
		n.removeAt = now.Add(after)
	} else {
		n.leaveUntil = now.Add(after)
	}
	if !n.removeAt.IsZero() {
		s.trace.Add("t=%s %s gets taint %s, deleted at %s", s.at(), n.name, key, n.removeAt.Sub(sim.Epoch))
	} else {
		s.trace.Add("t=%s %s gets taint %s, taken off at %s", s.at(), n.name, key, n.leaveUntil.Sub(sim.Epoch))
	}
}

// stopLeaving takes the leaving taint off (write: on the Node; a re-created
// Node never had it), and kube-proxy's /healthz answers again.
func (s *simulation) stopLeaving(n *simNode, now time.Time, write bool) {
	if n.leavingTaint == "" {
		return
	}
	key := n.leavingTaint
	n.leavingTaint, n.leaveUntil = "", time.Time{}
	if write {
		s.mutateNode(n, false, func(node *v1.Node) {
			node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
			node.Finalizers = slices.DeleteFunc(node.Finalizers, func(f string) bool { return f == karpenterFinalizer })
		})
	}
	for _, a := range n.agents {
		if a.released == heartbeatProbeFailed {
			s.reviveAt(now.Add(time.Duration(1+s.lrng.Intn(5))*time.Second), a)
		}
	}
}

// removeNode deletes a leaving node: at once, or, held by Karpenter's
// finalizer, with a deletionTimestamp for a few seconds first. It reports
// whether the node is gone.
func (s *simulation) removeNode(n *simNode) bool {
	n.removeAt = time.Time{}
	if err := s.kube.CoreV1().Nodes().Delete(s.ctx, n.name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatalf("deleting node %s: %v", n.name, err)
	}
	if n.leavingTaint == nodev1alpha1.TaintKarpenterDisrupted {
		n.finalizeAt = s.clk.Now().Add(time.Duration(3+s.lrng.Intn(20)) * time.Second)
		s.trace.Add("t=%s %s deleted, held by its finalizer until %s", s.at(), n.name, n.finalizeAt.Sub(sim.Epoch))
		return false
	}
	s.forgetNode(n)
	s.trace.Add("t=%s %s deleted", s.at(), n.name)
	return true
}

// finalize lets a node held by its finalizer go.
func (s *simulation) finalize(n *simNode) {
	s.mutateNode(n, false, func(node *v1.Node) {
		node.Finalizers = slices.DeleteFunc(node.Finalizers, func(f string) bool { return f == karpenterFinalizer })
	})
	s.forgetNode(n)
	s.trace.Add("t=%s %s finalized and gone", s.at(), n.name)
}

// forgetNode removes what goes with a deleted Node: its pods and, garbage
// collected, its Leases.
func (s *simulation) forgetNode(n *simNode) {
	s.deletePods(n)
	for _, a := range n.agents {
		err := s.kube.CoordinationV1().Leases(simNS).Delete(s.ctx, a.leaseName(n), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Fatalf("deleting lease %s.%s: %v", a.ext, n.name, err)
		}
	}
}

// setDrained writes (on) or takes off someone else's Drained=True lifecycle
// condition, cordoning the node with it when cordon is set.
func (s *simulation) setDrained(n *simNode, on, cordon bool) {
	now := s.clk.Now()
	if on {
		n.drainedSince = now
	} else {
		n.drainedSince = time.Time{}
	}
	s.mutateNode(n, false, func(node *v1.Node) { node.Spec.Unschedulable = on && cordon })
	s.mutateNode(n, true, func(node *v1.Node) {
		node.Status.Conditions = slices.DeleteFunc(node.Status.Conditions, func(c v1.NodeCondition) bool {
			return string(c.Type) == nodev1alpha1.LifecycleConditionDrained
		})
		if on {
			node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: nodev1alpha1.LifecycleConditionDrained,
				Status: v1.ConditionTrue, Reason: "AdminRequested", LastTransitionTime: metav1.NewTime(now)})
		}
	})
	s.trace.Add("t=%s %s: foreign Drained=%v (cordoned %v)", s.at(), n.name, on, on && cordon)
}

// mutateNode changes the Node (its status when status is set) on a fresh
// read, again if the controller wrote it in between.
func (s *simulation) mutateNode(n *simNode, status bool, mutate func(*v1.Node)) {
	nodes := s.kube.CoreV1().Nodes()
	for range 5 {
		node, err := nodes.Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatalf("reading node %s: %v", n.name, err)
		}
		mutate(node)
		if status {
			_, err = nodes.UpdateStatus(s.ctx, node, metav1.UpdateOptions{})
		} else {
			_, err = nodes.Update(s.ctx, node, metav1.UpdateOptions{})
		}
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.t.Fatalf("updating node %s: %v", n.name, err)
		}
	}
	s.t.Fatalf("updating node %s: conflicts", n.name)
}
