package updater_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	updater "nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Images the kwok stages know (test/framework/kwok-stages.yaml): a Job's pod
// completes, unless its image is the failing one.
const (
	hookImage        = "nodehealth.test/hook"
	failingHookImage = "nodehealth.test/failing-hook"
	hookSA           = "hook-runner"
)

// hookOptions are baseOptions with deadlines a hook's minimal timeout (1m)
// fits in, and hooks run in a namespace of the test's with a service
// account of its own; a kwok node runs the hooks' pods.
func hookOptions(t *testing.T, ctx context.Context, ns string) updater.Options {
	t.Helper()
	env := testenv.Env(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: hookSA}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.CreateReadyNode(t, ns+"-runner", nil)
	opts := baseOptions(t)
	opts.Deadlines.RebootedIntoUpdate, opts.Deadlines.MonitoringUpdate = 3*time.Minute, 2*time.Minute
	opts.Drain.Timeout = time.Minute
	opts.Hooks = updater.HookOptions{Namespace: ns, ServiceAccountName: hookSA}
	return opts
}

// awaitDrain puts the node where its agent waits for the drain (spec
// RebootedIntoUpdate, status StagedAndPerformedUpdate, boot-0) and gates it
// with the readiness taint, as the agent's Lease release makes the
// node-health controller do.
func awaitDrain(t *testing.T, ctx context.Context, node, policy string) {
	t.Helper()
	patchNodeStatus(t, ctx, node, map[string]any{"nodeInfo": map[string]any{"bootID": "boot-0"}})
	setShadow(t, ctx, node, policy, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, oldVersion)
	taintNode(t, ctx, node)
}

// setShadow writes the shadow's spec (with the policy that started it) and
// its agent's status.
func setShadow(t *testing.T, ctx context.Context, node, policy string, spec, status updatesv1alpha1.ShadowState, running string) {
	t.Helper()
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec = updatesv1alpha1.BottlerocketShadowSpec{State: spec, Version: newVersion, StateTransitionTimestamp: &metav1.Time{Time: time.Now()}}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[updatesv1alpha1.PolicyAnnotation] = policy
		if s, err = c.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.Status = updatesv1alpha1.BottlerocketShadowStatus{CurrentState: status, CurrentVersion: running, TargetVersion: newVersion}
		_, err = c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// hookJob waits for the one Job of the hook and returns it.
func hookJob(t *testing.T, ctx context.Context, ns, hook string, done func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var last *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := testenv.Env(t).Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: updater.HookLabel + "=" + hook})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		if len(list.Items) > 1 {
			t.Fatalf("%d Jobs of hook %s, want one", len(list.Items), hook)
		}
		last = &list.Items[0]
		return done(last), nil
	})
	if err != nil {
		t.Fatalf("Job of hook %s: %v; last %+v", hook, err, last)
	}
	return last
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// index is the position of the first Event with this reason whose message
// contains what, or -1.
func index(events []string, reason, what string) int {
	return slices.IndexFunc(events, func(e string) bool {
		f := strings.Fields(e)
		return len(f) > 1 && f[1] == reason && strings.Contains(e, what)
	})
}

// eventually waits for an Event with this reason whose message contains
// what, and returns the Events recorded by then.
func eventually(t *testing.T, ctx context.Context, op *operator, reason, what string) []string {
	t.Helper()
	var events []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events = op.events()
		return index(events, reason, what) >= 0, nil
	}); err != nil {
		t.Fatalf("no %s Event: %q", reason, events)
	}
	return events
}

// A policy with both hooks, on the real control plane (docs/updater.md,
// "Hooks"): the beforeDrain Job runs in the configured namespace under the
// configured service account with NODE_NAME, the Job controller and kwok
// complete it, and only then is the node drained; after the reboot the
// afterReboot Job completes before the update passes its health gate.
func TestHooksRunBeforeTheDrainAndBeforeTheUpdateEndsHealthy(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	const node, ns = "hooks-ok-1", "hooks-ok"
	createNodes(t, node)
	opts := hookOptions(t, ctx, ns)
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.Hooks = &updatesv1alpha1.PolicyHooks{
			BeforeDrain: &updatesv1alpha1.Hook{Image: hookImage, Args: []string{"osd", "set", "noout"}, Timeout: &metav1.Duration{Duration: time.Minute}},
			AfterReboot: &updatesv1alpha1.Hook{Image: hookImage, Args: []string{"osd", "unset", "noout"}, Timeout: &metav1.Duration{Duration: time.Minute}},
		}
	})
	op := startOperator(t, opts)
	waitShadow(t, ctx, node, "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })
	awaitDrain(t, ctx, node, pol.Name)

	before := hookJob(t, ctx, ns, updatesv1alpha1.HookBeforeDrain, func(*batchv1.Job) bool { return true })
	pod := before.Spec.Template.Spec
	if pod.ServiceAccountName != hookSA || len(pod.Containers) != 1 || !slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "NODE_NAME", Value: node}) {
		t.Errorf("the beforeDrain Job's pod runs as %q with %+v; want %s and NODE_NAME=%s", pod.ServiceAccountName, pod.Containers, hookSA, node)
	}
	s := waitShadow(t, ctx, node, "drained", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Annotations[updatesv1alpha1.DrainedAnnotation] == "boot-0"
	})
	if s.Annotations[updatesv1alpha1.FailedAnnotation] != "" {
		t.Fatalf("the update failed: %s", s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	}
	before = hookJob(t, ctx, ns, updatesv1alpha1.HookBeforeDrain, jobFinished)
	if !slices.ContainsFunc(before.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == batchv1.JobComplete }) {
		t.Fatalf("the beforeDrain Job did not complete: %+v", before.Status)
	}
	// The Event follows the annotation's write.
	events := eventually(t, ctx, op, updater.ReasonDrained, node)
	succeeded, drained := index(events, updater.ReasonHookSucceeded, "beforeDrain"), index(events, updater.ReasonDrained, node)
	if succeeded < 0 || succeeded > drained {
		t.Fatalf("Events %q: want HookSucceeded of beforeDrain before Drained", events)
	}

	// The reboot: the node runs the new version in another boot and its
	// extensions are ready again.
	patchNodeStatus(t, ctx, node, map[string]any{"nodeInfo": map[string]any{"bootID": "boot-1"}})
	setShadow(t, ctx, node, pol.Name, updatesv1alpha1.StateMonitoringUpdate, updatesv1alpha1.StateMonitoringUpdate, newVersion)
	setReady(t, ctx, node, true)
	s = waitShadow(t, ctx, node, "back at Idle", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle
	})
	if s.Annotations[updatesv1alpha1.FailedAnnotation] != "" {
		t.Fatalf("the update failed: %s", s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	}
	after := hookJob(t, ctx, ns, updatesv1alpha1.HookAfterReboot, jobFinished)
	if !slices.ContainsFunc(after.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == batchv1.JobComplete }) {
		t.Fatalf("the afterReboot Job did not complete: %+v", after.Status)
	}
	events = eventually(t, ctx, op, "UpdateSucceeded", "")
	succeeded, healthy := index(events, updater.ReasonHookSucceeded, "afterReboot"), index(events, "UpdateSucceeded", "")
	if succeeded < 0 || succeeded > healthy {
		t.Fatalf("Events %q: want HookSucceeded of afterReboot before UpdateSucceeded", events)
	}
}

// A hook whose Job fails (kwok fails its pod) fails the update before the
// drain: the policy halts, and the failure names the Job and how to read
// its logs.
func TestAFailingHookHaltsItsPolicyNamingTheJob(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	const node, ns = "hooks-fail-1", "hooks-fail"
	createNodes(t, node)
	opts := hookOptions(t, ctx, ns)
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.Hooks = &updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: failingHookImage, Timeout: &metav1.Duration{Duration: time.Minute}}}
	})
	op := startOperator(t, opts)
	waitShadow(t, ctx, node, "created", func(*updatesv1alpha1.BottlerocketShadow) bool { return true })
	awaitDrain(t, ctx, node, pol.Name)

	s := waitShadow(t, ctx, node, "failed", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Annotations[updatesv1alpha1.FailedAnnotation] != ""
	})
	job := hookJob(t, ctx, ns, updatesv1alpha1.HookBeforeDrain, jobFinished)
	msg := s.Annotations[updatesv1alpha1.FailureReasonAnnotation]
	for _, want := range []string{"HookFailed:", "Job " + ns + "/" + job.Name, "kubectl logs -n " + ns + " job/" + job.Name} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure reason %q does not say %q", msg, want)
		}
	}
	if s.Annotations[updatesv1alpha1.DrainedAnnotation] != "" {
		t.Errorf("the node was drained although its beforeDrain hook failed")
	}
	waitPolicy(t, ctx, pol.Name, "halted", func(p *updatesv1alpha1.UpdatePolicy) bool { return slices.Contains(p.Status.HaltedBy, node) })
	eventually(t, ctx, op, updater.ReasonHookFailed, "job/"+job.Name)
}
