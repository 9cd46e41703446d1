package agent_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/drain"
	drainclient "nodehealth.io/nodehealth/pkg/drain/clientset"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// runWorkload runs replicas pods of a Deployment on node (tolerating only
// the tolerations given, so by default not the readiness taint) and waits
// until they run.
func runWorkload(t *testing.T, ns, node, name string, replicas int32, tolerations ...corev1.Toleration) {
	t.Helper()
	ctx := testenv.Context(t)
	labels := map[string]string{"app": name}
	_, err := testenv.Env(t).Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node},
					Tolerations:                   tolerations,
					Containers:                    []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := testenv.Env(t).Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == replicas, nil
	})
	if err != nil {
		t.Fatalf("deployment %s/%s never ran %d pods on %s: %v", ns, name, replicas, node, err)
	}
}

// recorder keeps, in the single etcd's order (resourceVersions are its
// revisions), when the node's readiness taint appeared, when each of the
// namespace's pods was deleted, and whether the node was ever cordoned (the
// agent never cordons: the taint is the one mechanism).
type recorder struct {
	mu         sync.Mutex
	taintRV    uint64
	cordonRV   uint64
	deletedRVs map[string]uint64
}

func rv(o metav1.Object) uint64 {
	v, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return v
}

func record(t *testing.T, node, ns string) *recorder {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	r := &recorder{deletedRVs: map[string]uint64{}}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := env.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node, ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nw.Stop)
	t.Cleanup(pw.Stop)
	go func() {
		for ev := range nw.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			r.mu.Lock()
			if framework.HasReadinessTaint(n) && r.taintRV == 0 {
				r.taintRV = rv(n)
			}
			if n.Spec.Unschedulable && r.cordonRV == 0 {
				r.cordonRV = rv(n)
			}
			r.mu.Unlock()
		}
	}()
	go func() {
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName != node {
				continue
			}
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				r.mu.Lock()
				if _, seen := r.deletedRVs[p.Name]; !seen {
					r.deletedRVs[p.Name] = rv(p)
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *recorder) check(t *testing.T, wantDeleted int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taintRV == 0 {
		t.Fatal("the readiness taint was never seen on the node")
	}
	if r.cordonRV != 0 {
		t.Errorf("the node was cordoned at revision %d: the agent must rely on the readiness taint alone", r.cordonRV)
	}
	if len(r.deletedRVs) < wantDeleted {
		t.Fatalf("%d pods were evicted, want %d", len(r.deletedRVs), wantDeleted)
	}
	for pod, v := range r.deletedRVs {
		if v <= r.taintRV {
			t.Errorf("pod %s was deleted at revision %d, before the taint was written at %d", pod, v, r.taintRV)
		} else {
			t.Logf("taint at revision %d, then pod %s deleted at %d", r.taintRV, pod, v)
		}
	}
}

// updateNode drives spec like the operator, from Idle to RebootedIntoUpdate,
// drains the node as the operator does once the agent released its Lease
// and the node is tainted, and returns once the agent reported
// RebootedIntoUpdate.
func updateNode(t *testing.T, node, version string) *updatesv1alpha1.BottlerocketShadow {
	t.Helper()
	setSpec(t, node, updatesv1alpha1.StateStagedAndPerformedUpdate, version)
	waitShadow(t, node, "StagedAndPerformedUpdate", stateIs(updatesv1alpha1.StateStagedAndPerformedUpdate))
	setSpec(t, node, updatesv1alpha1.StateRebootedIntoUpdate, version)
	operatorDrains(t, node)
	return waitShadow(t, node, "RebootedIntoUpdate", stateIs(updatesv1alpha1.StateRebootedIntoUpdate))
}

// operatorDrains plays the operator's drain (pkg/updater/operator, docs/updater.md):
// once the node carries the readiness taint it evicts, through the real
// Eviction API, every pod but DaemonSet and mirror pods and those that
// tolerate the taint, then records the drained annotation with the node's
// bootID. The agent, which holds no pod permission, reboots only then; the
// operator's own drain is tested against the real API server in
// test/integration/updater.
func operatorDrains(t *testing.T, node string) {
	t.Helper()
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	var n *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		n, err = env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && framework.HasReadinessTaint(n), nil
	})
	if err != nil {
		t.Fatalf("node %s was never tainted: %v", node, err)
	}
	sh, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sh.Status.RebootFromBootID != "" {
		t.Fatalf("the agent asked for the reboot before the drain: %+v", sh.Status)
	}
	var gate []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if taint.Key == "nodehealth.io/not-ready" {
			gate = append(gate, taint)
		}
	}
	d := drain.New(drainclient.New(env.Client.CoreV1(), env.Client.PolicyV1()), node, clock.RealClock{},
		drain.Options{Filter: drain.All(drain.SkipDaemonSetAndMirrorPods, drain.SkipTolerating(gate...)), PollInterval: 200 * time.Millisecond})
	dctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if _, err := d.Drain(dctx); err != nil {
		t.Fatalf("draining %s: %v", node, err)
	}
	annotateShadow(t, node, map[string]string{updatesv1alpha1.DrainedAnnotation: n.Status.NodeInfo.BootID})
}

func testFullUpdate(t *testing.T, node string, sig syscall.Signal) {
	ns := testenv.NewNamespace(t, "web")
	s := startUpdatableNode(t, framework.SimNodeOptions{Name: node, Offered: []string{"1.21.0"}, KillSignal: sig},
		func(s *updatesv1alpha1.BottlerocketShadow) bool {
			return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == "1.20.0" && s.Status.TargetVersion == "1.21.0"
		})
	runWorkload(t, ns, node, "web", 2)
	rec := record(t, node, ns)

	sh := updateNode(t, node, "1.21.0")
	if sh.Status.CurrentVersion != "1.21.0" || sh.Status.RebootFromBootID != framework.BootID(node, 0) {
		t.Errorf("after the reboot status = %+v, want currentVersion 1.21.0 and rebootFromBootID %s", sh.Status, framework.BootID(node, 0))
	}
	n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(testenv.Context(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.NodeInfo.BootID; got != framework.BootID(node, 1) {
		t.Errorf("bootID = %q, want %q", got, framework.BootID(node, 1))
	}
	rec.check(t, 2)

	// The node-health controller re-gated the node at the reboot and
	// ungates it once every extension (here the updater) renewed.
	waitUngated(t, node)
	setSpec(t, node, updatesv1alpha1.StateMonitoringUpdate, "1.21.0")
	waitShadow(t, node, "MonitoringUpdate", stateIs(updatesv1alpha1.StateMonitoringUpdate))
	setSpec(t, node, updatesv1alpha1.StateIdle, "")
	sh = waitShadow(t, node, "Idle after the update", stateIs(updatesv1alpha1.StateIdle))
	if sh.Status.CrashCount != 0 || sh.Status.RebootFromBootID != "" || sh.Status.CurrentVersion != "1.21.0" {
		t.Errorf("after the update status = %+v", sh.Status)
	}
	if st := s.Emulator.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Errorf("reboots %d, reboot requests %d; want exactly one", st.Reboots, st.RebootRequests)
	}
	if err := s.RebootError(); err != nil {
		t.Errorf("simulated reboot: %v", err)
	}
}

// A whole update on a simulated node: the agent is killed by the reboot
// (SIGKILL, as a host going down) and started again after it.
func TestFullUpdateSIGKILL(t *testing.T) { testFullUpdate(t, "upd-kill", syscall.SIGKILL) }

// The same with SIGTERM: the agent shuts down during the update and must
// release only with reason Updating.
func TestFullUpdateSIGTERM(t *testing.T) { testFullUpdate(t, "upd-term", syscall.SIGTERM) }

// TestARefusedRebootIsAskedAgainAndTheNodeBootsOnce: Bottlerocket answers the
// reboot 500 (its shutdown inhibitor check refused it). The agent asks again
// after a back-off instead of leaving the drained node for the operator's
// deadline, and the node boots once.
func TestARefusedRebootIsAskedAgainAndTheNodeBootsOnce(t *testing.T) {
	const node = "upd-refused"
	s := startUpdatableNode(t, framework.SimNodeOptions{Name: node, Offered: []string{"1.21.0"}, Faults: emulator.Faults{RefuseRebootNext: 1}},
		stateIs(updatesv1alpha1.StateIdle))

	sh := updateNode(t, node, "1.21.0")
	if sh.Status.CurrentVersion != "1.21.0" {
		t.Errorf("after the reboot status = %+v, want currentVersion 1.21.0", sh.Status)
	}
	if st := s.Emulator.State(); st.RebootsRefused != 1 || st.RebootRequests != 1 || st.Reboots != 1 {
		t.Errorf("refused %d, accepted %d, reboots %d; want 1, 1, 1", st.RebootsRefused, st.RebootRequests, st.Reboots)
	}
	// The agent records Events about its own Pod, in its namespace (the
	// one its Role allows), naming the shadow.
	evs, err := testenv.Env(t).Client.CoreV1().Events(agentNamespace).List(testenv.Context(t), metav1.ListOptions{
		FieldSelector: "reason=RebootRefused,involvedObject.kind=Pod"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		found = found || (e.Related != nil && e.Related.Name == node && strings.Contains(e.Message, "BottlerocketShadow "+node+":"))
	}
	if !found {
		t.Errorf("no RebootRefused Event about the agent's Pod naming shadow %s: %+v", node, evs.Items)
	}
}
