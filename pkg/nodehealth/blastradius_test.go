package nodehealth

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Every threshold validation accepts (1–100 %) has a resume point a cluster
// can reach, and the band between suspend and resume holds at its edges.
func TestBlastRadiusResumeBoundaries(t *testing.T) {
	cases := []struct {
		threshold float64
		total     int
		// suspendAt is the fewest failing nodes that suspend; resumeAt the
		// most failing nodes at which the suspension ends.
		suspendAt, resumeAt int
	}{
		// 1 %: resume below 0.5 %, or at 2 failing nodes.
		{threshold: 0.01, total: 1000, suspendAt: 10, resumeAt: 4},
		// 5 %: threshold − 5 points is 0; resume below 2.5 %.
		{threshold: 0.05, total: 1000, suspendAt: 50, resumeAt: 24},
		// 5 % of a small cluster: the "2 or fewer" rule ends it.
		{threshold: 0.05, total: 20, suspendAt: 3, resumeAt: 2},
		// 10 %: both rules give 5 %.
		{threshold: 0.10, total: 100, suspendAt: 10, resumeAt: 4},
		// 30 %: threshold − 5 points (25 %) is above half (15 %).
		{threshold: 0.30, total: 100, suspendAt: 30, resumeAt: 24},
		// 100 %: every node failing suspends; resume below 95 %.
		{threshold: 1, total: 40, suspendAt: 40, resumeAt: 37},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v%%of%d", 100*tc.threshold, tc.total), func(t *testing.T) {
			b := newBlastRadius(BlastRadiusOptions{ClusterThreshold: tc.threshold})
			for i := range tc.total {
				b.update(fmt.Sprint(i), "", true, false)
			}
			suspended := func() bool { s, _ := b.suspended(""); return s }
			for i := range tc.suspendAt - 1 {
				b.update(fmt.Sprint(i), "", true, true)
			}
			if suspended() {
				t.Fatalf("suspended at %d failing", tc.suspendAt-1)
			}
			b.update(fmt.Sprint(tc.suspendAt-1), "", true, true)
			if !suspended() {
				t.Fatalf("not suspended at %d failing", tc.suspendAt)
			}
			for i := tc.suspendAt - 1; i > tc.resumeAt; i-- {
				b.update(fmt.Sprint(i), "", true, false)
				if !suspended() {
					t.Fatalf("resumed at %d failing, above the resume point", i)
				}
			}
			b.update(fmt.Sprint(tc.resumeAt), "", true, false)
			if suspended() {
				t.Fatalf("still suspended at %d failing", tc.resumeAt)
			}
		})
	}
}

// A controller restarted during an incident finds the failing nodes
// untainted (their taints were suspended). It must count all of them before
// it syncs the first: counting node by node, the first failing nodes it syncs
// would be judged alone and tainted.
func TestRestartDuringAnIncidentDoesNotTaintBeforeCounting(t *testing.T) {
	var objs []runtime.Object
	for i := range 6 {
		objs = append(objs, readyNode(fmt.Sprintf("n%d", i)))
	}
	f := newFixture(t, testOptions(), objs...)
	// n4 and n5 renew; n0–n3 (4 of 6, over the 50 % threshold) do not.
	f.renew("kube-proxy", "n4")
	f.renew("kube-proxy", "n5")
	f.c.primeBlastRadius(f.ctx)
	for i := range 6 {
		f.sync(fmt.Sprintf("n%d", i))
	}
	for i := range 6 {
		if f.tainted(fmt.Sprintf("n%d", i)) {
			t.Errorf("n%d tainted although 4 of 6 nodes fail (cluster threshold 50%%)", i)
		}
	}
	if c := f.condition("n0"); c.Reason != nodev1alpha1.ReasonGatingSuspended {
		t.Errorf("condition of a failing node: %+v, want reason %s", c, nodev1alpha1.ReasonGatingSuspended)
	}
}

// A restarted controller remembers no suspension: it judges the blast radius
// on the count of all the nodes it lists. Counting them one by one, with the
// hysteresis of a running suspension, made the answer depend on the order
// the cache lists them in: 3 failing nodes among the first 18 of 20 suspend
// at a 16 % threshold (3 of 18), and the two healthy nodes after them did
// not lift it (3 of 20 is above the 11 % resume point). Seed
// 13756747834182287697 of the simulation met it at a restart. The order is
// the cache's, so the test starts ten controllers: each lists in an order of
// its own, and before the fix some 7 in 10 of them suspended.
func TestARestartedControllerJudgesTheBlastRadiusOnAllTheNodesItLists(t *testing.T) {
	opts := testOptions()
	opts.BlastRadius.ClusterThreshold = 0.16
	for run := range 10 {
		var objs []runtime.Object
		for i := range 20 {
			objs = append(objs, readyNode(fmt.Sprintf("n%d", i)))
		}
		f := newFixture(t, opts, objs...)
		// n0–n2 (3 of 20, 15 %) do not renew: below the threshold.
		for i := 3; i < 20; i++ {
			f.renew("kube-proxy", fmt.Sprintf("n%d", i))
		}
		f.c.primeBlastRadius(f.ctx)
		if s, why := f.c.blast.suspended(""); s {
			t.Fatalf("start %d: suspended at 3 of 20 failing (threshold 16 %%): %s", run, why)
		}
		f.sync("n0")
		if !f.tainted("n0") {
			t.Fatalf("start %d: n0 fails and is not tainted; condition %+v", run, f.condition("n0"))
		}
	}
}
