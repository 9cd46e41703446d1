package nodehealth_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// A planned release (reason Updating) gates at once but never escalates to
// eviction and does not count toward the blast radius: with three of four
// nodes in planned maintenance and a 50% threshold, an unplanned failure on
// the fourth is still tainted and evicted.
func TestPlannedReleaseNeitherEvictsNorCounts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "planned")
	opts := h.options(h.rule("agent", nil))
	// Force: the nodes' pods declare no controller.
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 2 * time.Second, NodesPerSecond: 10, Force: true}
	opts.BlastRadius.ClusterThreshold = 0.5
	run := h.startController(t, opts)
	ns := testenv.NewNamespace(t, "planned")

	names := []string{"planned-p1", "planned-p2", "planned-p3", "planned-u1"}
	renewers := map[string]*renewer{}
	for _, n := range names {
		h.createNode(t, n)
		renewers[n] = h.startRenewer(t, "agent", n)
	}
	for _, n := range names {
		h.nodes.wait(t, n, "ready", readyNode)
		h.createRunningPod(t, ns, newPod("pod-"+n, n, nil))
	}

	for _, n := range names[:3] {
		renewers[n].release(t, nodev1alpha1.ReasonUpdating, "updating to 1.2.3")
	}
	for _, n := range names[:3] {
		h.nodes.wait(t, n, "gated for planned maintenance",
			framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "PlannedMaintenance", "agent (LeaseReleased", "Updating")))
	}

	renewers["planned-u1"].release(t, "Crashed", "agent crashed")
	h.nodes.wait(t, "planned-u1", "tainted: planned nodes do not count toward the blast radius",
		framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady")))
	// The unplanned failure came last; once its pod is evicted, the planned
	// nodes' eviction clocks would long have run out too.
	if err := framework.WaitForDeletion[*v1.Pod](testenv.Context(t), framework.NamedListWatch(h.env.Client.CoreV1().RESTClient(), "pods", ns, "pod-planned-u1"),
		ns, "pod-planned-u1"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "planned-u1", nodehealth.EventEvictingPods)
	for _, n := range names[:3] {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(testenv.Context(t), "pod-"+n, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod of planned node %s was evicted: %v", n, err)
		}
		if hasEvent(h.nodeEvents(t, n), nodehealth.EventEvictingPods) {
			t.Errorf("planned node %s was escalated", n)
		}
	}
	// The blast radius's scopes only: on a loaded machine the API server
	// can be slow enough for the own-view guard to fire (scope own-view,
	// CI 2026-11-30), which says nothing about how planned nodes count.
	for _, scope := range []string{"cluster", "zone"} {
		if s := run.Metric("nodehealth_suspensions_total", map[string]string{"scope": scope}); s != 0 {
			t.Errorf("suspensions_total{scope=%q} = %v, want 0: the planned nodes counted toward the blast radius", scope, s)
		}
	}

	// Back from maintenance: renewing again ungates.
	h.startRenewer(t, "agent", "planned-p1")
	h.nodes.wait(t, "planned-p1", "ungated after maintenance", readyNode)
}

// Evict mode uses the Eviction API: a PodDisruptionBudget that allows no
// disruption blocks it (named in an Event), and it proceeds once the budget
// allows it. Pods tolerating the readiness taint stay.
func TestEvictModeHonoursPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "evict")
	opts := h.options(h.rule("agent", nil))
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 2 * time.Second, NodesPerSecond: 10}
	run := h.startController(t, opts)
	ns := testenv.NewNamespace(t, "evict")
	node := h.createNode(t, "evict-n1")
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)
	h.nodes.wait(t, node, "schedulable", framework.NodeSchedulable)

	app := map[string]string{"app": "guarded"}
	ctx := testenv.Context(t)
	_, err := h.env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: v1.PodSpec{
					NodeSelector: map[string]string{v1.LabelHostname: node},
					Containers:   []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := h.waitPods(t, ns, "app=guarded", "2 running on the node", func(pods []*v1.Pod) bool {
		n := 0
		for _, p := range pods {
			if p.Spec.NodeName == node && p.Status.Phase == v1.PodRunning {
				n++
			}
		}
		return n == 2
	})
	tolerant := h.createRunningPod(t, ns, tolerateReadinessTaint(newPod("tolerant", node, nil)))

	pdb, err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-budget"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromString("100%")),
			Selector:     &metav1.LabelSelector{MatchLabels: app},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdbLW := framework.NamedListWatch(h.env.Client.PolicyV1().RESTClient(), "poddisruptionbudgets", ns, pdb.Name)
	if _, err := framework.WaitFor(ctx, pdbLW, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2 && p.Status.DisruptionsAllowed == 0
	}); err != nil {
		t.Fatal(err)
	}

	r.stop()
	h.nodes.wait(t, node, "tainted", gated)
	h.waitEvent(t, node, nodehealth.EventEvictingPods, "evicting 2 pods")
	h.waitEvent(t, node, nodehealth.EventEvictionBlocked, pdb.Name)
	for _, p := range running {
		if cur, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || cur.DeletionTimestamp != nil {
			t.Errorf("pod %s evicted against its PodDisruptionBudget: %v", p.Name, err)
		}
	}

	if _, err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, pdb.Name, types.MergePatchType,
		[]byte(`{"spec":{"minAvailable":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPods(t, ns, "app=guarded", "evicted from the node once the budget allows it", func(pods []*v1.Pod) bool {
		for _, p := range pods {
			if p.Spec.NodeName == node {
				return false
			}
		}
		return true
	})
	if p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, tolerant.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod tolerating the readiness taint was evicted: %v", err)
	}
	if got := run.Metric("nodehealth_evictions_total", map[string]string{"result": "blocked"}); got < 1 {
		t.Errorf("evictions_total{result=blocked} = %v, want >= 1", got)
	}
	if got := run.Metric("nodehealth_evictions_total", map[string]string{"result": "evicted"}); got < 2 {
		t.Errorf("evictions_total{result=evicted} = %v, want >= 2", got)
	}
}

// Issue 9 defect 5 on the real API server: a pod that two
// PodDisruptionBudgets select cannot be evicted (the API server answers 500).
// That failure is named in an EvictionFailed Event and backs off only that
// pod: the node's other pod is evicted meanwhile, and the failing one once a
// budget is deleted.
func TestFailingEvictionDoesNotBlockTheNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "evictfail")
	opts := h.options(h.rule("agent", nil))
	// Force: the pods declare no controller.
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 2 * time.Second, NodesPerSecond: 10, Force: true}
	run := h.startController(t, opts)
	ns := testenv.NewNamespace(t, "evictfail")
	node := h.createNode(t, "evictfail-n1")
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)

	ctx := testenv.Context(t)
	twoBudgets := map[string]string{"app": "two-budgets"}
	// Created first so that it is listed (and fails) before the other pod.
	stuck := h.createRunningPod(t, ns, newPod("a-two-budgets", node, twoBudgets))
	plain := h.createRunningPod(t, ns, newPod("b-plain", node, nil))
	for _, name := range []string{"budget-1", "budget-2"} {
		if _, err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(0)),
				Selector:     &metav1.LabelSelector{MatchLabels: twoBudgets},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	r.stop()
	h.nodes.wait(t, node, "tainted", gated)
	h.waitEvent(t, node, nodehealth.EventEvictionFailed, "pod "+ns+"/"+stuck.Name, "more than one PodDisruptionBudget")
	if err := framework.WaitForDeletion[*v1.Pod](ctx, framework.NamedListWatch(h.env.Client.CoreV1().RESTClient(), "pods", ns, plain.Name),
		ns, plain.Name); err != nil {
		t.Fatalf("the other pod was not evicted while one eviction failed: %v", err)
	}
	if p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, stuck.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the pod selected by two budgets was evicted: %v", err)
	}

	if err := h.env.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "budget-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForDeletion[*v1.Pod](ctx, framework.NamedListWatch(h.env.Client.CoreV1().RESTClient(), "pods", ns, stuck.Name),
		ns, stuck.Name); err != nil {
		t.Fatalf("the backed-off pod was not evicted once one budget was left: %v", err)
	}
	if got := run.Metric("nodehealth_evictions_total", map[string]string{"result": "error"}); got < 1 {
		t.Errorf("evictions_total{result=error} = %v, want >= 1", got)
	}
	if got := run.Metric("nodehealth_evictions_total", map[string]string{"result": "evicted"}); got < 2 {
		t.Errorf("evictions_total{result=evicted} = %v, want >= 2", got)
	}
}

// Evict mode selects pods as kubectl drain does: without eviction.force and
// eviction.deleteEmptyDirData it evicts a Deployment's pod, but leaves a pod
// that declares no controller and a Deployment's pod with emptyDir data, and
// names both in an EvictionSkipped Event and in the node's condition.
func TestEvictModeLeavesWhatKubectlDrainWouldNotRemove(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "evictleft")
	opts := h.options(h.rule("agent", nil))
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 2 * time.Second, NodesPerSecond: 10}
	h.startController(t, opts)
	ns := testenv.NewNamespace(t, "evictleft")
	node := h.createNode(t, "evictleft-n1")
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)
	h.nodes.wait(t, node, "schedulable", framework.NodeSchedulable)

	ctx := testenv.Context(t)
	deploy := func(name string, volumes ...v1.Volume) {
		t.Helper()
		app := map[string]string{"app": name}
		_, err := h.env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: app},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: app},
					Spec: v1.PodSpec{
						NodeSelector: map[string]string{v1.LabelHostname: node},
						Containers:   []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
						Volumes:      volumes,
					},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	onNode := func(pods []*v1.Pod) int {
		n := 0
		for _, p := range pods {
			if p.Spec.NodeName == node && p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	deploy("web")
	deploy("scratch", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	h.waitPods(t, ns, "app=web", "running on the node", func(pods []*v1.Pod) bool { return onNode(pods) == 1 })
	scratch := h.waitPods(t, ns, "app=scratch", "running on the node", func(pods []*v1.Pod) bool { return onNode(pods) == 1 })
	bare := h.createRunningPod(t, ns, newPod("bare", node, nil))
	var scratchPod string
	for _, p := range scratch {
		if p.Spec.NodeName == node {
			scratchPod = p.Name
		}
	}

	r.stop()
	h.nodes.wait(t, node, "tainted", gated)
	h.waitPods(t, ns, "app=web", "evicted from the node", func(pods []*v1.Pod) bool { return onNode(pods) == 0 })
	h.waitEvent(t, node, nodehealth.EventEvictionSkipped, ns+"/bare (pod declares no controller", ns+"/"+scratchPod+" (pod with local storage")
	h.nodes.wait(t, node, "the condition names the pods left", framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady",
		"Pods left on the node by the eviction: ", ns+"/bare", ns+"/"+scratchPod))
	for _, name := range []string{bare.Name, scratchPod} {
		if p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was evicted without force / deleteEmptyDirData: %v", name, err)
		}
	}

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated on recovery, the pods no longer named",
		framework.AllOf(readyNode, framework.ExtensionsConditionIs(v1.ConditionTrue, "", "!Pods left")))
}

// NoExecute mode adds the NoExecute variant of the taint after the eviction
// timeout; kube-controller-manager's taint-eviction controller removes the
// pods that do not tolerate it. Recovery removes both taints.
func TestNoExecuteModeWithTaintEvictionController(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "noexec")
	opts := h.options(h.rule("agent", nil))
	opts.Eviction = nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeNoExecute, Timeout: 2 * time.Second, NodesPerSecond: 10}
	h.startController(t, opts)
	ns := testenv.NewNamespace(t, "noexec")
	node := h.createNode(t, "noexec-n1")
	r := h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ready", readyNode)
	victim := h.createRunningPod(t, ns, newPod("victim", node, nil))
	tolerant := h.createRunningPod(t, ns, tolerateReadinessTaint(newPod("tolerant", node, nil)))

	r.stop()
	h.nodes.wait(t, node, "tainted", gated)
	n := h.nodes.wait(t, node, "NoExecute added after the eviction timeout", func(n *v1.Node) bool {
		return gated(n) && framework.TaintCount(n, taintKey, v1.TaintEffectNoExecute) == 1
	})
	for _, tn := range n.Spec.Taints {
		if tn.Key == taintKey && tn.Effect == v1.TaintEffectNoExecute && tn.TimeAdded == nil {
			t.Errorf("NoExecute taint without timeAdded: %+v", tn)
		}
	}
	if err := framework.WaitForDeletion[*v1.Pod](testenv.Context(t), framework.NamedListWatch(h.env.Client.CoreV1().RESTClient(), "pods", ns, victim.Name),
		ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	if p, err := h.env.Client.CoreV1().Pods(ns).Get(testenv.Context(t), tolerant.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod tolerating the readiness taint was evicted: %v", err)
	}
	h.waitEvent(t, node, nodehealth.EventEvictingPods, "NoExecute")

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "both taints removed on recovery", readyNode)
	h.nodes.checkHistory(t, node, 0, "one readiness taint per effect at most", noDuplicateTaint)
}

// Blast radius: with 6 nodes and a 50% threshold, the third failing node is
// not tainted (GatingSuspended); when the share falls below the threshold
// minus the hysteresis, it is.
func TestBlastRadiusSuspendsAndRecovers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "blast")
	opts := h.options(h.rule("agent", nil))
	opts.BlastRadius.ClusterThreshold = 0.5
	run := h.startController(t, opts)

	var names []string
	renewers := map[string]*renewer{}
	for i := 1; i <= 6; i++ {
		n := fmt.Sprintf("blast-n%d", i)
		names = append(names, n)
		h.createNode(t, n)
		renewers[n] = h.startRenewer(t, "agent", n)
	}
	for _, n := range names {
		h.nodes.wait(t, n, "ready", readyNode)
	}

	// Two failing nodes never suspend anything.
	for _, n := range names[:2] {
		renewers[n].stop()
		h.nodes.wait(t, n, "tainted", gated)
	}
	third := names[2]
	mark := h.nodes.mark(third)
	renewers[third].stop()
	h.nodes.wait(t, third, "not tainted: 3 of 6 failing reaches the threshold",
		framework.ExtensionsConditionIs(v1.ConditionFalse, "GatingSuspended", "3 of 6 nodes", "agent (LeaseExpired"))
	h.waitEvent(t, third, nodehealth.EventGatingSuspended)
	waitCounter(t, "gating_suspended{scope=cluster}", 1, func() float64 {
		return run.Metric("nodehealth_gating_suspended", map[string]string{"scope": "cluster"})
	})
	h.nodes.checkHistory(t, third, mark, "not tainted while suspended", ungated)
	for _, n := range names[:2] {
		if !gated(h.nodes.latest(n)) {
			t.Errorf("node %s lost its taint during the suspension", n)
		}
	}

	// 2 of 6 is below 50% - 5 points: resume, and the third node is tainted.
	h.startRenewer(t, "agent", names[0])
	h.nodes.wait(t, names[0], "ungated", readyNode)
	h.nodes.wait(t, third, "tainted once gating resumed", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady")))
	waitCounter(t, "gating_suspended{scope=cluster} back to 0", 0, func() float64 {
		return -run.Metric("nodehealth_gating_suspended", map[string]string{"scope": "cluster"})
	})
	for _, n := range names[1:3] {
		h.startRenewer(t, "agent", n)
	}
	for _, n := range names {
		h.nodes.wait(t, n, "ready again", readyNode)
	}
}

// kube-scheduler does not place a pod on a gated node, and does once the
// node is ungated.
func TestTheSchedulerPlacesNoPodOnAGatedNodeAndDoesOnceItIsUngated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "sched")
	h.startController(t, h.options(h.rule("agent", nil)))
	ns := testenv.NewNamespace(t, "sched")
	node := h.createNode(t, "sched-n1")
	h.nodes.wait(t, node, "Ready for kwok and gated for nodehealth", func(n *v1.Node) bool {
		return gated(n) && framework.NodeSchedulable(n)
	})

	pod := newPod("waits", "", nil)
	pod.Spec.NodeSelector = map[string]string{v1.LabelHostname: node}
	p, err := h.env.Client.CoreV1().Pods(ns).Create(testenv.Context(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitForPod(t, ns, p.Name, func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "untolerated taint") {
				return true
			}
		}
		return false
	})

	h.startRenewer(t, "agent", node)
	h.nodes.wait(t, node, "ungated", readyNode)
	p = testenv.WaitForPod(t, ns, p.Name, framework.PodRunning)
	if p.Spec.NodeName != node {
		t.Errorf("pod runs on %q, want %s", p.Spec.NodeName, node)
	}
}
