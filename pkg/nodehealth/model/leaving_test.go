package model

import (
	"testing"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func leavingConfig() Config {
	cfg := defaultConfig()
	cfg.ClusterThreshold = 0.2
	cfg.LeavingNodeTaints = []string{"ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "node.kubernetes.io/out-of-service"}
	cfg.LifecycleConditionMaxAge = 2 * time.Hour
	return cfg
}

func leavingView(rec string) NodeView { return gated(nodev1alpha1.ReasonNodeLeaving, rec) }

// A scale-down of 6 of 20 nodes whose kube-proxy heartbeat releases its
// Lease (kube-proxy's /healthz fails on a node the autoscaler removes)
// suspends nothing and escalates nothing; a real failure of another node is
// tainted and escalated as usual.
func TestAScaleDownOfThirtyPercentOfTheNodesTripsNothing(t *testing.T) {
	st := newStory(t, leavingConfig())
	nodes := names(20)
	var ws []Node
	for _, n := range nodes {
		ws = append(ws, worker(n, gating("kube-proxy")))
	}
	st.inService(ws...)
	st.keep(leasesOf("kube-proxy", nodes...)...)
	st.run(5 * sec)
	for _, w := range ws[:6] {
		w.Taints = []string{"ToBeDeletedByClusterAutoscaler"}
		st.update(6*sec, w)
		st.drop(w.Name + "/kube-proxy")
		st.release(6*sec, w.Name+"/kube-proxy", "ProbeFailed")
	}
	st.run(10 * minute)
	st.expectSuspended("six leaving", "", false)
	st.expect("leaving, past the eviction timeout", leavingView(boot1), nodes[:6]...)
	st.drop("n7/kube-proxy")
	st.run(11 * minute)
	st.expect("another node fails", gated(notReady, boot1), "n7")
	st.run(17 * minute)
	st.expect("its eviction clock ran out", evicted(gated(notReady, boot1)), "n7")
	st.expect("still leaving, never escalated", leavingView(boot1), nodes[:6]...)
}

// A foreign lifecycle condition counts while the node is unschedulable or it
// is recent; one nobody cleared stops exempting a schedulable node after
// LifecycleConditionMaxAge; one with nodehealth's own reason never exempts.
func TestAStaleForeignLifecycleConditionStopsExemptingASchedulableNode(t *testing.T) {
	st := newStory(t, leavingConfig())
	drained := func(reason string, since time.Duration) []LifecycleCondition {
		return []LifecycleCondition{{Type: "Drained", Status: "True", Reason: reason, LastTransitionTime: at(since)}}
	}
	recent := worker("recent", gating("a"))
	recent.LifecycleConditions = drained("AdminRequested", -time.Hour-50*minute)
	cordoned := worker("cordoned", gating("a"))
	cordoned.LifecycleConditions, cordoned.Unschedulable = drained("AdminRequested", -3*time.Hour), true
	own := worker("own", gating("a"))
	own.LifecycleConditions = drained("ExtensionFailed", 0)
	st.inService(recent, cordoned, own)
	st.advance(60 * sec)
	st.expect("failed while leaving", leavingView(boot1), "recent", "cordoned")
	st.expect("our own condition exempts nothing", gated(notReady, boot1), "own")
	st.advance(10*minute + sec)
	st.expect("the foreign condition is 2 h old", gated(notReady, boot1), "recent")
	st.expect("cordoned: counts while True", leavingView(boot1), "cordoned")
	st.advance(16 * minute)
	st.expect("escalated once no longer leaving", evicted(gated(notReady, boot1)), "recent")
	st.expect("never escalated", leavingView(boot1), "cordoned")
}
