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
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
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
// and returns once the agent reported RebootedIntoUpdate.
func updateNode(t *testing.T, node, version string) *updatesv1alpha1.BottlerocketShadow {
	t.Helper()
	setSpec(t, node, updatesv1alpha1.StateStagedAndPerformedUpdate, version)
	waitShadow(t, node, "StagedAndPerformedUpdate", stateIs(updatesv1alpha1.StateStagedAndPerformedUpdate))
	setSpec(t, node, updatesv1alpha1.StateRebootedIntoUpdate, version)
	return waitShadow(t, node, "RebootedIntoUpdate", stateIs(updatesv1alpha1.StateRebootedIntoUpdate))
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

// A PodDisruptionBudget that blocks the drain is named in the shadow's
// DrainBlocked condition and in an Event; the update goes on once the
// budget allows the eviction.
func TestDrainBlockedByPDB(t *testing.T) {
	const node = "upd-pdb"
	ns := testenv.NewNamespace(t, "pdb")
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	s := startUpdatableNode(t, framework.SimNodeOptions{Name: node, Offered: []string{"1.21.0"}}, stateIs(updatesv1alpha1.StateIdle))
	runWorkload(t, ns, node, "db", 1)
	_, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	setSpec(t, node, updatesv1alpha1.StateStagedAndPerformedUpdate, "1.21.0")
	waitShadow(t, node, "StagedAndPerformedUpdate", stateIs(updatesv1alpha1.StateStagedAndPerformedUpdate))
	setSpec(t, node, updatesv1alpha1.StateRebootedIntoUpdate, "1.21.0")
	waitShadow(t, node, "DrainBlocked naming db-pdb", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, updatesv1alpha1.ConditionDrainBlocked)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "db-pdb")
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		evs, err := env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + node + ",reason=DrainBlocked"})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "db-pdb") && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no DrainBlocked Event naming db-pdb: %v", err)
	}
	if s.Emulator.State().RebootRequests != 0 {
		t.Fatal("rebooted while a pod was left")
	}

	// The budget allows it now.
	if err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "db-pdb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sh := waitShadow(t, node, "RebootedIntoUpdate", stateIs(updatesv1alpha1.StateRebootedIntoUpdate))
	if sh.Status.CurrentVersion != "1.21.0" || s.Emulator.State().Reboots != 1 {
		t.Errorf("status %+v, reboots %d", sh.Status, s.Emulator.State().Reboots)
	}
}

// TestTheDrainLeavesAPodThatToleratesTheReadinessTaintToTheLastPass: a
// Deployment that tolerates the readiness taint, as the controller's and the
// operator's do, under a PodDisruptionBudget of minAvailable 1. The agent
// does not cordon, so an evicted pod would be scheduled straight back onto
// the node, and the budget refuses its eviction: the drain leaves it, and the
// update completes. The last pass before the reboot tries it once and names
// the refusal in a Warning Event.
func TestTheDrainLeavesAPodThatToleratesTheReadinessTaintToTheLastPass(t *testing.T) {
	const node = "upd-tolerating"
	ns := testenv.NewNamespace(t, "tolerating")
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	s := startUpdatableNode(t, framework.SimNodeOptions{Name: node, Offered: []string{"1.21.0"}}, stateIs(updatesv1alpha1.StateIdle))
	runWorkload(t, ns, node, "ctl", 1,
		corev1.Toleration{Key: "nodehealth.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: "nodehealth.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	_, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "ctl-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ctl"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	sh := updateNode(t, node, "1.21.0")
	if sh.Status.CurrentVersion != "1.21.0" {
		t.Errorf("after the reboot status = %+v, want currentVersion 1.21.0", sh.Status)
	}
	if st := s.Emulator.State(); st.Reboots != 1 || st.RebootRequests != 1 {
		t.Errorf("reboots %d, reboot requests %d; want exactly one", st.Reboots, st.RebootRequests)
	}
	events := func(reason string) []corev1.Event {
		evs, err := env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		return evs.Items
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range events("NotEvictedBeforeReboot") {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, ns+"/ctl-") && strings.Contains(e.Message, "ctl-pdb") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning NotEvictedBeforeReboot Event naming the pod and ctl-pdb: %v", err)
	}
	if evs := events("DrainBlocked"); len(evs) != 0 {
		t.Errorf("the drain was blocked: %s", evs[0].Message)
	}
}

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
	evs, err := testenv.Env(t).Client.CoreV1().Events(metav1.NamespaceDefault).List(testenv.Context(t), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + node + ",reason=RebootRefused"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Error("no RebootRefused Event")
	}
}
