package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// agentClient returns a shadow client authenticated as the update agent with
// a token bound to its DaemonSet pod on node (as the kubelet's projected
// token), or an unbound token when node is "".
func agentClient(t *testing.T, node string) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(agentConfig(t, node))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agentConfig is agentClient's client configuration.
func agentConfig(t *testing.T, node string) *rest.Config {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if node != "" {
		var pod *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			pods, err := env.Client.CoreV1().Pods(agentNamespace).List(ctx, metav1.ListOptions{
				LabelSelector: "app.kubernetes.io/name=update-agent", FieldSelector: "spec.nodeName=" + node})
			if err != nil || len(pods.Items) == 0 {
				return false, nil
			}
			pod = &pods.Items[0]
			return true, nil
		})
		if err != nil {
			t.Fatalf("no update-agent DaemonSet pod on %s: %v", node, err)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := env.Client.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, agentSA, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// writeStatus updates the shadow's status as c, retrying only while RBAC
// has not reached the authorizer's cache yet.
func writeStatus(t *testing.T, c versioned.Interface, name string) error {
	t.Helper()
	ctx := testenv.Context(t)
	var err error
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var s *updatesv1alpha1.BottlerocketShadow
		s, err = shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s.Status.CurrentState = updatesv1alpha1.StateIdle
		s.Status.CurrentVersion = "1.20.0"
		s.Status.TargetVersion = "1.20." + time.Now().Format("150405")
		_, err = c.UpdatesV1alpha1().BottlerocketShadows().UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return !apierrors.IsForbidden(err) && !apierrors.IsConflict(err), nil
	})
	return err
}

func wantDenied(t *testing.T, what string, err error, contains ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), agentPolicy) {
		t.Errorf("%s: want a denial by %s, got %v", what, agentPolicy, err)
		return
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("%s: denial %q does not say %q", what, err, c)
		}
	}
}

// An agent's pod-bound token may write the status of its own node's shadow
// and of no other: not another node's, not a dotted name that ends in its
// node's; an unbound token of the agent's ServiceAccount writes none; and no
// agent token may write a shadow's spec.
func TestAgentWritesOnlyItsOwnShadowStatus(t *testing.T) {
	installAgent(t)
	for _, n := range []string{"sec-n1", "b.sec-n1"} {
		testenv.CreateNode(t, n, managedLabels)
		createShadow(t, n)
	}
	onN1, onBN1 := agentClient(t, "sec-n1"), agentClient(t, "b.sec-n1")

	// The policy is loaded through an informer; wait until it denies.
	ctx := testenv.Context(t)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		err := writeStatus(t, onN1, "b.sec-n1")
		return apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatalf("the admission policy was never enforced: %v", err)
	}

	if err := writeStatus(t, onN1, "sec-n1"); err != nil {
		t.Errorf("agent on sec-n1 writes its own shadow's status: %v", err)
	}
	if err := writeStatus(t, onBN1, "b.sec-n1"); err != nil {
		t.Errorf("agent on b.sec-n1 writes its own shadow's status: %v", err)
	}
	wantDenied(t, "agent on sec-n1 writes shadow b.sec-n1 (whose name ends in .sec-n1)", writeStatus(t, onN1, "b.sec-n1"),
		"on node sec-n1", "not b.sec-n1")
	wantDenied(t, "agent on b.sec-n1 writes shadow sec-n1", writeStatus(t, onBN1, "sec-n1"), "on node b.sec-n1")
	wantDenied(t, "an unbound agent token writes shadow sec-n1", writeStatus(t, agentClient(t, ""), "sec-n1"), "carries no node name")

	// The spec is the operator's: RBAC gives the agent no write of it.
	s, err := onN1.UpdatesV1alpha1().BottlerocketShadows().Get(ctx, "sec-n1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("agent reads its shadow: %v", err)
	}
	s.Spec.State = updatesv1alpha1.StateStagedAndPerformedUpdate
	if _, err := onN1.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, s, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("agent writes its shadow's spec: want Forbidden, got %v", err)
	}
}

// The operator drains (docs/updater.md): the agent's pod-bound token, with
// the shipped RBAC, holds no pod permission. A stolen agent token lists no
// pods — not cluster-wide, not its own node's — evicts none, and records
// Events only in the agent's own namespace; it still reads its Node.
func TestTheAgentsTokenCanNeitherListNorEvictPods(t *testing.T) {
	installAgent(t)
	const node = "sec-pods"
	testenv.CreateNode(t, node, managedLabels)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	victim, err := env.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sec-pods-victim"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Pods(metav1.NamespaceDefault).Delete(context.Background(), victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	agent, err := kubernetes.NewForConfig(agentConfig(t, node))
	if err != nil {
		t.Fatal(err)
	}
	// As the agent records them: about its Pod, in the Pod's namespace (an
	// Event about the cluster-scoped shadow must be in "default").
	event := func(namespace string) error {
		_, err := agent.CoreV1().Events(namespace).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: node + "."},
			InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: "update-agent-" + node},
			Related:        &corev1.ObjectReference{APIVersion: updatesv1alpha1.SchemeGroupVersion.String(), Kind: "BottlerocketShadow", Name: node},
			Reason:         "Test", Message: "sec", Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		return err
	}
	// What the agent needs works, once its RBAC reached the authorizer.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last = event(agentNamespace)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the agent records no Event in its namespace %s: %v", agentNamespace, last)
	}
	if _, err := agent.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		t.Errorf("the agent reads its Node: %v", err)
	}

	for what, err := range map[string]error{
		"list every pod": func() error { _, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }(),
		"list its node's pods": func() error {
			_, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			return err
		}(),
		"list the pods of namespace default": func() error {
			_, err := agent.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			return err
		}(),
		"evict a pod on its node": agent.PolicyV1().Evictions(metav1.NamespaceDefault).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: metav1.NamespaceDefault}}),
		"record an Event in namespace default": event(metav1.NamespaceDefault),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the agent's token may %s: want Forbidden, got %v", what, err)
		}
	}
	if _, err := env.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, victim.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the victim pod: %v", err)
	}
}

// impersonating returns a shadow client acting as user (in system:masters,
// so that RBAC allows everything and only admission decides).
func impersonating(t *testing.T, user string) versioned.Interface {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Env(t).Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setShadowStatus writes the shadow's status as the admin: the state and
// the agent's record of the lock it pinned over.
func setShadowStatus(t *testing.T, name string, state updatesv1alpha1.ShadowState, previousLock string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s.Status.CurrentState, s.Status.PreviousVersionLock = state, previousLock
		s.Status.CurrentVersion, s.Status.TargetVersion = "1.20.0", "1.21.0"
		_, err = c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("writing the status of %s: %v", name, err)
	}
}

// annotateShadow merges annotations into the shadow, as a person would.
func annotateShadow(t *testing.T, name string, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Patch(testenv.Context(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating shadow %s: %v", name, err)
	}
}

// A person may not delete a shadow mid-update (spec or status not Idle, or
// the agent's previousVersionLock set): the shadow controller would create a
// fresh one and the host would stay pinned. The denial says why and what to
// do. At rest the shadow may go, unless it records a failed update nobody
// resumed (deleted, that record would no longer halt the rollout); the
// operator, by its ServiceAccount (deleting the shadow of a Node that is
// gone), may always delete it.
func TestAShadowMidUpdateCannotBeDeletedByAPerson(t *testing.T) {
	installAgent(t)
	ctx := testenv.Context(t)
	user := impersonating(t, "jane").UpdatesV1alpha1().BottlerocketShadows()
	operator := impersonating(t, "system:serviceaccount:nodehealth-system:update-operator").UpdatesV1alpha1().BottlerocketShadows()
	deletePolicy := framework.ShadowDeletePolicy
	for _, n := range []string{"del-staged", "del-pinned", "del-idle", "del-failed", "del-by-operator"} {
		testenv.CreateNode(t, n, managedLabels)
		createShadow(t, n)
	}
	setSpec(t, "del-staged", updatesv1alpha1.StateStagedAndPerformedUpdate, "1.21.0")
	setShadowStatus(t, "del-pinned", updatesv1alpha1.StateIdle, "latest") // spec back to Idle, the agent not yet aborted
	setShadowStatus(t, "del-idle", updatesv1alpha1.StateIdle, "")
	setSpec(t, "del-by-operator", updatesv1alpha1.StateRebootedIntoUpdate, "1.21.0")
	setShadowStatus(t, "del-by-operator", updatesv1alpha1.StateStagedAndPerformedUpdate, "latest")

	// The policy is loaded through an informer; wait until it denies.
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		err = user.Delete(ctx, "del-staged", metav1.DeleteOptions{})
		if err == nil {
			t.Fatal("a person deleted shadow del-staged mid-update")
		}
		return apierrors.IsInvalid(err), nil
	}); werr != nil {
		t.Fatalf("the admission policy was never enforced: %v (last: %v)", werr, err)
	}
	for _, want := range []string{deletePolicy, "shadow del-staged is mid-update (spec StagedAndPerformedUpdate, status Idle)",
		"would lose the version lock the agent pinned", "kubectl nodehealth update pause POLICY", "kubectl nodehealth update status del-staged"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the denial %q does not say %q", err, want)
		}
	}
	err = user.Delete(ctx, "del-pinned", metav1.DeleteOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "shadow del-pinned is mid-update (spec Idle, status Idle, version lock pinned over latest)") {
		t.Errorf("a person deletes a shadow whose agent has not restored the lock yet: want the denial, got %v", err)
	}
	if err := user.Delete(ctx, "del-idle", metav1.DeleteOptions{}); err != nil {
		t.Errorf("a person deletes a shadow at rest: %v", err)
	}
	// At rest, but its failed update halts the rollout until resumed: the
	// deletion would erase that record. A resume of an earlier failure does
	// not count; the resume of this one lets the shadow go.
	const failedAt = "2026-11-24T10:00:00Z"
	annotateShadow(t, "del-failed", map[string]string{updatesv1alpha1.FailedAnnotation: failedAt})
	err = user.Delete(ctx, "del-failed", metav1.DeleteOptions{})
	for _, want := range []string{"shadow del-failed records a failed update (updates.nodehealth.io/failed=" + failedAt + ")",
		"kubectl nodehealth update resume del-failed"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("a person deletes a shadow whose failure halts the rollout: want a denial saying %q, got %v", want, err)
		}
	}
	annotateShadow(t, "del-failed", map[string]string{updatesv1alpha1.ResumeAnnotation: "2026-11-23T10:00:00Z"})
	if err := user.Delete(ctx, "del-failed", metav1.DeleteOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a person deletes a failed shadow whose resume names an earlier failure: want the denial, got %v", err)
	}
	annotateShadow(t, "del-failed", map[string]string{updatesv1alpha1.ResumeAnnotation: failedAt})
	if err := user.Delete(ctx, "del-failed", metav1.DeleteOptions{}); err != nil {
		t.Errorf("a person deletes a failed shadow once resumed: %v", err)
	}
	if err := operator.Delete(ctx, "del-by-operator", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the operator deletes a shadow mid-update: %v", err)
	}
	// Both denied shadows are still there; the test's own cleanup moves
	// them to rest first.
	for _, n := range []string{"del-staged", "del-pinned"} {
		if _, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("shadow %s: %v", n, err)
		}
		setSpec(t, n, updatesv1alpha1.StateIdle, "")
		setShadowStatus(t, n, updatesv1alpha1.StateIdle, "")
		if err := user.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Errorf("a person deletes shadow %s once at rest: %v", n, err)
		}
	}
}
