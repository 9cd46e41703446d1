package updater_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The operator drains (docs/updater.md): against the real API server, a node
// whose agent waits for the drain is tainted, and the operator evicts its
// pods through the Eviction API, leaves the one that tolerates the readiness
// taint to the last pass, names the PodDisruptionBudget that refuses an
// eviction in a Warning Event, and once the budget allows it marks the node
// drained with its bootID. No pod is evicted before the taint.
func TestTheOperatorDrainsTheNodeAndNamesTheBudgetThatBlocksIt(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	env := testenv.Env(t)
	const node = "drain-op-1"
	createNodes(t, node)
	ns := "drain-op"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// Bare pods bound to the node (no kubelet runs them): the operator is
	// configured with force, as kubectl drain --force.
	for _, p := range []struct {
		name       string
		tolerating bool
	}{{"web", false}, {"db", false}, {"ctl", true}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"app": p.name}},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if p.tolerating {
			pod.Spec.Tolerations = []corev1.Toleration{{Key: nodev1alpha1.DefaultReadinessTaintKey, Operator: corev1.TolerationOpExists}}
		}
		created, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Running and ready, as a kubelet would report: the Eviction API
		// ignores budgets for pending pods.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
		if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchNodeStatus(t, ctx, node, map[string]any{"nodeInfo": map[string]any{"bootID": "boot-0"}})

	opts := baseOptions(t)
	opts.Deadlines.RebootedIntoUpdate = 2 * time.Minute
	opts.Drain.Timeout = time.Minute
	opts.Drain.Overrides = drain.Overrides{Force: true, DeleteEmptyDirData: true}
	opts.Drain.Tuning = drain.Options{InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, PollInterval: 200 * time.Millisecond}
	op := startOperator(t, opts)
	waitShadow(t, ctx, node, "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })
	// Where the agent leaves it: spec RebootedIntoUpdate, its status still
	// StagedAndPerformedUpdate, its Lease released.
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec = updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateRebootedIntoUpdate, Version: newVersion,
			StateTransitionTimestamp: &metav1.Time{Time: time.Now()}}
		if s, err = c.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: updatesv1alpha1.StateStagedAndPerformedUpdate,
			CurrentVersion: oldVersion, TargetVersion: newVersion}
		_, err = c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	podsLeft := func() []string {
		list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return names
	}
	// Untainted: the agent's release has not gated the node yet.
	time.Sleep(2 * time.Second)
	if got := podsLeft(); len(got) != 3 {
		t.Fatalf("pods %v left before the node was tainted, want all three", got)
	}

	taintNode(t, ctx, node)
	var events []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, e := range op.events() {
			if strings.HasPrefix(e, "Warning DrainBlocked") && strings.Contains(e, "db-pdb") && strings.Contains(e, ns+"/db") {
				return true, nil
			}
		}
		return false, nil
	})
	events = op.events()
	if err != nil {
		t.Fatalf("no Warning DrainBlocked naming %s/db and db-pdb: %q", ns, events)
	}
	if got := podsLeft(); !slices.Equal(got, []string{"ctl", "db"}) {
		t.Errorf("pods left while the budget blocks: %v, want ctl (left to the last pass) and db", got)
	}
	if s, _ := c.Get(ctx, node, metav1.GetOptions{}); s.Annotations[updatesv1alpha1.DrainedAnnotation] != "" {
		t.Fatalf("marked drained while a budget blocked the drain")
	}

	if err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "db-pdb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitShadow(t, ctx, node, "drained", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Annotations[updatesv1alpha1.DrainedAnnotation] != ""
	})
	if got := s.Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Errorf("drained = %q, want the node's bootID boot-0", got)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(podsLeft()) == 0, nil
	})
	if err != nil {
		t.Errorf("pods %v left after the drain, want none (the last pass evicts the tolerating one)", podsLeft())
	}
}

func taintNode(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule})
		_, err = testenv.Env(t).Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func patchNodeStatus(t *testing.T, ctx context.Context, node string, status map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"status": status})
	if _, err := testenv.Env(t).Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// A policy's drain options reach the real Eviction API (docs/updater.md,
// "UpdatePolicy"): the pod its skipPodSelector selects is neither evicted
// nor waited for — the node is marked drained with it still running — and
// the other pod's eviction carries the policy's gracePeriodSeconds, which
// the API server records on the terminating pod instead of the pod's own.
func TestAPolicysDrainSkipsItsSelectedPodAndEvictsWithItsGracePeriod(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	env := testenv.Env(t)
	const node = "drain-policy-1"
	createNodes(t, node)
	ns := "drain-policy"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for _, name := range []string{"web", "keep"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](30),
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchNodeStatus(t, ctx, node, map[string]any{"nodeInfo": map[string]any{"bootID": "boot-0"}})
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.Drain = &updatesv1alpha1.PolicyDrain{GracePeriodSeconds: ptr.To[int64](7),
			SkipPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keep"}}}
	})

	opts := baseOptions(t)
	opts.Deadlines.RebootedIntoUpdate = 2 * time.Minute
	opts.Drain.Timeout = time.Minute
	// Bare pods (no controller): the configuration forces, as kubectl drain --force.
	opts.Drain.Overrides = drain.Overrides{Force: true, DeleteEmptyDirData: true}
	opts.Drain.Tuning = drain.Options{InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, PollInterval: 200 * time.Millisecond}
	startOperator(t, opts)
	waitShadow(t, ctx, node, "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })
	// Where the policy's start and the agent leave it: spec
	// RebootedIntoUpdate, started by the policy, the agent waiting.
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Annotations[updatesv1alpha1.PolicyAnnotation] = pol.Name
		s.Spec = updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateRebootedIntoUpdate, Version: newVersion,
			StateTransitionTimestamp: &metav1.Time{Time: time.Now()}}
		if s, err = c.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: updatesv1alpha1.StateStagedAndPerformedUpdate,
			CurrentVersion: oldVersion, TargetVersion: newVersion}
		_, err = c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	taintNode(t, ctx, node)

	pods := env.Client.CoreV1().Pods(ns)
	var web *corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p, err := pods.Get(ctx, "web", metav1.GetOptions{})
		web = p
		return err == nil && p.DeletionTimestamp != nil, nil
	}); err != nil {
		t.Fatalf("web was never evicted: %+v", web)
	}
	if g := web.DeletionGracePeriodSeconds; g == nil || *g != 7 {
		t.Errorf("web terminates with a grace period of %v s, want the policy's 7 (its own is 30)", ptr.Deref(g, -1))
	}
	// No kubelet runs here: the test ends web's termination as one would.
	if err := pods.Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	s := waitShadow(t, ctx, node, "drained", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Annotations[updatesv1alpha1.DrainedAnnotation] != ""
	})
	if got := s.Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Errorf("drained = %q, want the node's bootID boot-0", got)
	}
	keep, err := pods.Get(ctx, "keep", metav1.GetOptions{})
	if err != nil || keep.DeletionTimestamp != nil {
		t.Errorf("keep after the drain and its last pass: %v, deleted at %v; want it running", err, keep.GetDeletionTimestamp())
	}
}
