package nodeutil

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func TestLeavingJudgesEachSignalAtTheGivenInstant(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	taints := sets.New(nodev1alpha1.DefaultLeavingNodeTaints()...)
	cond := func(kind, reason string, age time.Duration) v1.NodeCondition {
		return v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: v1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-age))}
	}
	for _, tc := range []struct {
		name string
		node v1.Node
		want string
	}{
		{name: "a node with nothing is not leaving"},
		{name: "a deleted node is leaving", node: v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now}}}, want: "deletionTimestamp set"},
		{name: "a leaving taint", node: v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: nodev1alpha1.TaintKarpenterDisrupted}}}},
			want: "taint " + nodev1alpha1.TaintKarpenterDisrupted},
		{name: "another taint is not leaving", node: v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/other"}}}}},
		{name: "a fresh foreign drain", node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{cond(nodev1alpha1.LifecycleConditionDrainInProgress, "AdminRequested", time.Hour)}}},
			want: "condition DrainInProgress=True, reason AdminRequested, since 2026-01-01T11:00:00Z"},
		{name: "a stale foreign drain on a schedulable node is not leaving",
			node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{cond(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", 3*time.Hour)}}}},
		{name: "a stale foreign drain on an unschedulable node is leaving",
			node: v1.Node{Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{cond(nodev1alpha1.LifecycleConditionDrained, "AdminRequested", 3*time.Hour)}}},
			want: "condition Drained=True, reason AdminRequested, node unschedulable"},
		{name: "our own condition is not leaving",
			node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{cond(nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleReasonBottlerocketUpdate, time.Minute)}}}},
		{name: "MaintenancePlanned is not leaving",
			node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{cond(nodev1alpha1.LifecycleConditionMaintenancePlanned, "AdminRequested", time.Minute)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Leaving(&tc.node, taints, 2*time.Hour, now); got != tc.want {
				t.Errorf("Leaving = %q, want %q", got, tc.want)
			}
		})
	}
}
