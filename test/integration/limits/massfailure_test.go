package limits_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Mass extension failure (issue 13, item 7): kube-proxy's Leases released on
// every one of 200 nodes at once, then on 60 % of one zone. The controller
// must see a broken extension rollout rather than 200 broken nodes: suspend
// failure taints and evictions (cluster-wide, then only in that zone), say so
// in the condition, an Event and the metrics, and recover when the extension
// returns. The eviction clock is short (evictionTimeout), so an eviction
// that was not held back would show within the test.
func TestAMassExtensionFailureSuspendsGatingInsteadOfTaintingEveryNode(t *testing.T) {
	const (
		zones           = 4
		perZone         = 50
		total           = zones * perZone
		evictionTimeout = 8 * time.Second
	)
	w := newWorld(t, "mass")
	var all []string
	byZone := map[string][]string{}
	for z := range zones {
		zone := fmt.Sprintf("z-%c", 'a'+z)
		for i := range perZone {
			n := fmt.Sprintf("mass-%s-%d", zone, i)
			all = append(all, n)
			byZone[zone] = append(byZone[zone], n)
		}
	}
	zoneOf := func(n string) map[string]string {
		for z, names := range byZone {
			if slices.Contains(names, n) {
				return map[string]string{v1.LabelTopologyZone: z}
			}
		}
		return nil
	}
	w.createNodes(t, all, zoneOf, nil)
	w.renew(t, all)

	opts := w.options()
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeNoExecute, Timeout: evictionTimeout, NodesPerSecond: 100}
	run := w.startController(t, opts)
	w.waitNodes(t, all, "every node adopted as ready", ready)

	// suspendedOrTainted: a failing node is either tainted (its failure was
	// judged before the share reached the threshold) or withheld with the
	// suspension's reason in its condition.
	// The condition names the scope that withheld the taint when the node
	// was judged: released zone by zone, a zone may reach its threshold
	// before the cluster does.
	suspendedOrTainted := func(scopes ...string) func(*v1.Node) bool {
		return func(n *v1.Node) bool {
			if tainted(n) {
				return framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonExtensionsNotReady, extension)(n)
			}
			for _, scope := range scopes {
				if framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonGatingSuspended, scope, extension+" (LeaseReleased")(n) {
					return true
				}
			}
			return false
		}
	}
	countTainted := func(names []string) (n int, withheld string) {
		for _, name := range names {
			if tainted(w.node(name)) {
				n++
			} else {
				withheld = name
			}
		}
		return n, withheld
	}

	if !t.Run("every node at once", func(t *testing.T) {
		start := time.Now()
		w.release(t, all)
		run.WaitMetric(t, testenv.Context(t), "nodehealth_gating_suspended", map[string]string{"scope": "cluster"}, 1)
		w.waitNodes(t, all, "tainted before the suspension or withheld by it", suspendedOrTainted("nodes in the cluster are failing", "nodes in zone "))
		// The suspension begins when the failing share reaches 20 %: 40
		// of 200. Nodes judged before that are tainted, never more.
		n, withheld := countTainted(all)
		t.Logf("released %d Leases; %d nodes were tainted before the suspension began, %d withheld (%s)", total, n, total-n, time.Since(start).Round(time.Millisecond))
		if limit := total/5 - 1; n > limit {
			t.Errorf("%d nodes tainted, more than the %d a 20%% threshold allows", n, limit)
		}
		if withheld == "" {
			t.Fatal("no node was withheld")
		}
		w.waitEvent(t, withheld, nodehealth.EventGatingSuspended, "Not tainting the node although kube-proxy not ready", "are failing")
		if got := run.Metric("nodehealth_suspensions_total", map[string]string{"scope": "cluster"}); got != 1 {
			t.Errorf("suspensions_total{scope=cluster} = %v, want 1", got)
		}

		// Let more than the eviction timeout pass: the clocks are paused,
		// nothing escalates.
		time.Sleep(evictionTimeout + 2*time.Second)
		if _, _, nx := w.counts(); len(nx) > 0 {
			t.Errorf("nodes got the NoExecute taint during the suspension: %v", nx)
		}
		if got := run.Metric("nodehealth_evictions_total", nil); got != 0 {
			t.Errorf("evictions_total = %v during the suspension, want 0", got)
		}

		w.renew(t, all)
		w.waitNodes(t, all, "every node ready again", ready)
		run.WaitMetric(t, testenv.Context(t), "nodehealth_gating_suspended", map[string]string{"scope": "cluster"}, 0)
		_, adds, nx := w.counts()
		for _, name := range all {
			if adds[name] > 1 {
				t.Errorf("node %s was tainted %d times", name, adds[name])
			}
		}
		if len(nx) > 0 || run.Metric("nodehealth_evictions_total", nil) != 0 {
			t.Errorf("escalations during the recovery: NoExecute on %v, evictions_total %v", nx, run.Metric("nodehealth_evictions_total", nil))
		}
	}) {
		return
	}

	t.Run("60 percent of one zone", func(t *testing.T) {
		_, before, _ := w.counts()
		zoneA := byZone["z-a"][:perZone*6/10]
		w.release(t, zoneA)
		run.WaitMetric(t, testenv.Context(t), "nodehealth_gating_suspended", map[string]string{"scope": "zones"}, 1)
		w.waitNodes(t, zoneA, "tainted before the zone's suspension or withheld by it", suspendedOrTainted("nodes in zone z-a are failing"))
		if got := run.Metric("nodehealth_gating_suspended", map[string]string{"scope": "cluster"}); got != 0 {
			t.Errorf("cluster suspended (%v) for a zone's failure", got)
		}
		// 28 of 50 is 56 %, past the zone's 55 %.
		n, withheld := countTainted(zoneA)
		t.Logf("zone z-a: %d of %d released nodes tainted before its suspension began", n, len(zoneA))
		if n > 27 {
			t.Errorf("%d nodes of zone z-a tainted, more than the 27 a 55%% threshold allows", n)
		}
		w.waitEvent(t, withheld, nodehealth.EventGatingSuspended, "nodes in zone z-a are failing")

		// Gating goes on in the other zones: a node of zone z-b that fails
		// now is tainted, and its eviction clock runs while zone z-a's
		// are paused.
		other := byZone["z-b"][0]
		w.release(t, []string{other})
		w.waitNode(t, other, "tainted outside the suspended zone", func(n *v1.Node) bool {
			return tainted(n) && framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonExtensionsNotReady)(n)
		})
		w.waitNode(t, other, "escalated (NoExecute) after the eviction timeout", func(n *v1.Node) bool { return framework.ReadinessTaints(n, v1.TaintEffectNoExecute) > 0 })
		// Zone z-a failed before, but its clocks are paused.
		if _, _, nx := w.counts(); !slices.Equal(nx, []string{other}) {
			t.Errorf("nodes with the NoExecute taint: %v, want only %s", nx, other)
		}

		recovering := append(slices.Clone(zoneA), other)
		w.renew(t, recovering)
		w.waitNodes(t, recovering, "ready again", ready)
		run.WaitMetric(t, testenv.Context(t), "nodehealth_gating_suspended", map[string]string{"scope": "zones"}, 0)
		_, after, _ := w.counts()
		for _, name := range all {
			if d := after[name] - before[name]; d > 1 {
				t.Errorf("node %s was tainted %d times", name, d)
			}
		}
		// Nodes outside the failure were never touched.
		for _, name := range byZone["z-c"] {
			if after[name] != before[name] {
				t.Errorf("node %s of an unaffected zone was tainted", name)
			}
		}
	})
}
