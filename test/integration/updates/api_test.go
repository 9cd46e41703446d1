package updates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	updatesapply "nodehealth.io/client-go/applyconfiguration/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/client-go/informers/externalversions"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func shadowClient(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(testenv.Env(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newShadow returns a shadow for node as the operator creates it: the node's
// UID in an annotation, no ownerReference (docs/updater.md).
func newShadow(node *corev1.Node) *updatesv1alpha1.BottlerocketShadow {
	return &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{
			Name:        node.Name,
			Annotations: map[string]string{updatesv1alpha1.NodeUIDAnnotation: string(node.UID)},
		},
		Spec: updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle},
	}
}

func createUnmanagedNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	env := testenv.Env(t)
	n, err := env.Client.CoreV1().Nodes().Create(testenv.Context(t), framework.NewUnmanagedNode(name, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
	return n
}

func TestSpecAndStatusAreSeparateEndpoints(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	node := createUnmanagedNode(t, "api-split")

	created, err := c.Create(ctx, newShadow(node), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating shadow: %v", err)
	}

	// The agent writes status through the subresource; a spec change in the
	// same request is dropped.
	s := created.DeepCopy()
	s.Status = updatesv1alpha1.BottlerocketShadowStatus{
		CurrentState:   updatesv1alpha1.StateIdle,
		CurrentVersion: "1.20.0",
		TargetVersion:  "1.21.0",
	}
	s.Spec.State = updatesv1alpha1.StateMonitoringUpdate
	got, err := c.UpdateStatus(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating status: %v", err)
	}
	if got.Status.TargetVersion != "1.21.0" || got.Spec.State != updatesv1alpha1.StateIdle {
		t.Fatalf("after UpdateStatus: spec.state=%q status.targetVersion=%q, want Idle and 1.21.0", got.Spec.State, got.Status.TargetVersion)
	}

	// The operator writes spec through the main endpoint; a status change in
	// the same request is dropped.
	s = got.DeepCopy()
	s.Spec.State = updatesv1alpha1.StateStagedAndPerformedUpdate
	s.Spec.Version = "1.21.0"
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	s.Spec.StateTransitionTimestamp = &now
	s.Status.CurrentVersion = "9.9.9"
	got, err = c.Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating spec: %v", err)
	}
	if got.Spec.State != updatesv1alpha1.StateStagedAndPerformedUpdate || got.Spec.Version != "1.21.0" || got.Status.CurrentVersion != "1.20.0" {
		t.Fatalf("after Update: spec=%+v status.currentVersion=%q, want StagedAndPerformedUpdate 1.21.0 and 1.20.0", got.Spec, got.Status.CurrentVersion)
	}
	if !got.Spec.StateTransitionTimestamp.Equal(&now) {
		t.Errorf("stateTransitionTimestamp = %v, want %v", got.Spec.StateTransitionTimestamp, now)
	}
}

func TestValidationRejectsWhatTheContractForbids(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	node := createUnmanagedNode(t, "api-validation")

	for name, mutate := range map[string]func(*updatesv1alpha1.BottlerocketShadow){
		"ErrorReset is never desired": func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.State = updatesv1alpha1.StateErrorReset },
		"unknown state":               func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.State = "Rebooting" },
		"empty state":                 func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.State = "" },
		"version too long":            func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.Version = strings.Repeat("1", 65) },
	} {
		s := newShadow(node)
		mutate(s)
		_, err := c.Create(ctx, s, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: create error = %v, want Invalid", name, err)
		}
	}

	created, err := c.Create(ctx, newShadow(node), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The agent may report ErrorReset; it may not report a negative crash count.
	s := created.DeepCopy()
	s.Status.CurrentState = updatesv1alpha1.StateErrorReset
	s.Status.CrashCount = 1
	if s, err = c.UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status ErrorReset rejected: %v", err)
	}
	s.Status.CrashCount = -1
	if _, err := c.UpdateStatus(ctx, s, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("negative crashCount: error = %v, want Invalid", err)
	}
}

// TestStateDefaultsToIdle: a shadow written without spec.state (as a user's
// kubectl apply of a bare object would be) is Idle.
func TestStateDefaultsToIdle(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	node := createUnmanagedNode(t, "api-default")
	cs := shadowClient(t)

	// An apply configuration without spec leaves state unset on the wire.
	applied, err := cs.UpdatesV1alpha1().BottlerocketShadows().Apply(ctx,
		updatesapply.BottlerocketShadow(node.Name).
			WithAnnotations(map[string]string{updatesv1alpha1.NodeUIDAnnotation: string(node.UID)}).
			WithSpec(updatesapply.BottlerocketShadowSpec().WithVersion("")),
		metav1.ApplyOptions{FieldManager: "test", Force: true})
	if err != nil {
		t.Fatalf("applying: %v", err)
	}
	if applied.Spec.State != updatesv1alpha1.StateIdle {
		t.Errorf("spec.state = %q, want defaulted Idle", applied.Spec.State)
	}

	// Status is applied through its own subresource with its own manager.
	st, err := cs.UpdatesV1alpha1().BottlerocketShadows().ApplyStatus(ctx,
		updatesapply.BottlerocketShadow(node.Name).WithStatus(updatesapply.BottlerocketShadowStatus().
			WithCurrentState(updatesv1alpha1.StateIdle).WithCurrentVersion("1.20.0").WithTargetVersion("1.20.0").
			WithConditions(applymetav1.Condition().WithType(updatesv1alpha1.ConditionDrainBlocked).
				WithStatus(metav1.ConditionFalse).WithReason("NotDraining").WithMessage("").
				WithLastTransitionTime(metav1.Now()))),
		metav1.ApplyOptions{FieldManager: "agent", Force: true})
	if err != nil {
		t.Fatalf("applying status: %v", err)
	}
	if st.Status.CurrentVersion != "1.20.0" || len(st.Status.Conditions) != 1 {
		t.Errorf("status after apply = %+v", st.Status)
	}
}

func TestInformerAndListerSeeShadows(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	cs := shadowClient(t)
	node := createUnmanagedNode(t, "api-informer")

	factory := externalversions.NewSharedInformerFactory(cs, 0)
	informer := factory.Updates().V1alpha1().BottlerocketShadows()
	lister := informer.Lister()
	seen := make(chan struct{}, 1)
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*updatesv1alpha1.BottlerocketShadow); ok && s.Name == node.Name && s.Status.CurrentVersion == "1.21.0" {
				select {
				case seen <- struct{}{}:
				default:
				}
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	// The informers stop when the test ends, not when its context times out:
	// Shutdown waits for them.
	informerCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer stopInformers()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("cache did not sync")
	}

	created, err := cs.UpdatesV1alpha1().BottlerocketShadows().Create(ctx, newShadow(node), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.CurrentVersion = "1.21.0"
	if _, err := cs.UpdatesV1alpha1().BottlerocketShadows().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("the informer never delivered the status update")
	}
	got, err := lister.Get(node.Name)
	if err != nil || got.Status.CurrentVersion != "1.21.0" {
		t.Fatalf("lister.Get = %+v, %v", got, err)
	}
}

// TestShadowOutlivesItsNode: without an ownerReference the garbage collector
// leaves the shadow of a deleted node alone — it may be the record of a
// failed update that halts the rollout; the operator deletes shadows itself.
func TestShadowOutlivesItsNode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	node := createUnmanagedNode(t, "api-gc")
	if _, err := c.Create(ctx, newShadow(node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	if err := env.DeleteNode(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	// The garbage collector acts within a second or two of a deletion.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err == nil {
		t.Fatal("the shadow of a deleted node was deleted by the API server")
	}
}

// TestKubectlGetBrsShowsTheRollout: the short name and printer columns make
// `kubectl get brs` the at-a-glance view of a rollout.
func TestKubectlGetBrsShowsTheRollout(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	node := createUnmanagedNode(t, "api-kubectl")
	s, err := c.Create(ctx, newShadow(node), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Status = updatesv1alpha1.BottlerocketShadowStatus{
		CurrentState: updatesv1alpha1.StateIdle, CurrentVersion: "1.20.0", TargetVersion: "1.21.0", CrashCount: 2,
	}
	if _, err := c.UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, env.Binary(framework.Kubectl), "get", "brs", node.Name, "--kubeconfig="+env.Kubeconfig)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get brs: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get brs printed %d lines, want header and one row:\n%s", len(lines), out)
	}
	if got, want := strings.Fields(lines[0]), []string{"NAME", "STATE", "DESIRED", "CURRENT", "TARGET", "VERSION", "CRASH", "AGE"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("header = %v, want %v", got, want)
	}
	row := strings.Fields(lines[1])
	// VERSION is empty while Idle, so the row has one field fewer than the header.
	if len(row) < 7 || row[0] != node.Name || row[1] != "Idle" || row[2] != "Idle" || row[3] != "1.20.0" || row[4] != "1.21.0" || row[5] != "2" {
		t.Errorf("row = %v, want %s Idle Idle 1.20.0 1.21.0 2 <age>", row, node.Name)
	}
}

// The UpdatePolicy CRD rejects what its schema and CEL rules can see: a
// limit that is neither a count of at least 1 nor a percentage from 1% to
// 100%, an @every schedule (no instants: a window built on it is never or
// always open), a TZ= prefix instead of timeZone, a window of no duration,
// ignoreWaves without a targetVersion (only a pinned version is taken ahead
// of its wave).
// What CEL cannot check (an IANA time zone name) the operator reports in
// the policy's status.
func TestUpdatePolicyValidation(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().UpdatePolicies()
	valid := func(name string) *updatesv1alpha1.UpdatePolicy {
		return &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: updatesv1alpha1.UpdatePolicySpec{
			// A selector of its own: deploy/update-operator/policy.yaml,
			// while another test has it installed, refuses a twin.
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"updates-it/none": name}}, MaxConcurrentUpdates: intstr.FromString("10%"),
			Windows: []updatesv1alpha1.UpdateWindow{{Schedule: "0 2 * * mon-fri", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}}}}
	}
	p, err := c.Create(ctx, valid("validation-ok"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a valid policy was rejected: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p.Name, metav1.DeleteOptions{}) })
	if p.Spec.OnHealthGateFailure != updatesv1alpha1.HealthGateFailureHalt {
		t.Errorf("onHealthGateFailure defaulted to %q, want Halt", p.Spec.OnHealthGateFailure)
	}
	pinned := valid("validation-ignore-waves-pinned")
	pinned.Spec.TargetVersion, pinned.Spec.IgnoreWaves = "1.21.0", true
	if _, err := c.Create(ctx, pinned, metav1.CreateOptions{}); err != nil {
		t.Errorf("ignoreWaves with a targetVersion was rejected: %v", err)
	} else {
		t.Cleanup(func() { _ = c.Delete(context.Background(), pinned.Name, metav1.DeleteOptions{}) })
	}
	for _, tc := range []struct {
		name string
		mod  func(*updatesv1alpha1.UpdatePolicySpec)
		want string
	}{
		{"limit-zero", func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromInt32(0) }, "count of at least 1"},
		{"limit-0-percent", func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromString("0%") }, "percentage"},
		{"limit-150-percent", func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromString("150%") }, "percentage"},
		{"limit-words", func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromString("ten") }, "percentage"},
		{"zone-limit", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.MaxConcurrentUpdatesPerZone = ptr.To(intstr.FromInt32(-1))
		}, "count of at least 1"},
		{"every", func(s *updatesv1alpha1.UpdatePolicySpec) { s.Windows[0].Schedule = "@every 1h" }, "@every"},
		{"tz-prefix", func(s *updatesv1alpha1.UpdatePolicySpec) { s.Windows[0].Schedule = "TZ=UTC 0 2 * * *" }, "timeZone"},
		{"no-duration", func(s *updatesv1alpha1.UpdatePolicySpec) { s.Windows[0].Duration = metav1.Duration{} }, "positive"},
		{"eight-days", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Windows[0] = updatesv1alpha1.UpdateWindow{Schedule: "* * * * *", Duration: metav1.Duration{Duration: 8760 * time.Hour}}
		}, "at most 7 days"},
		{"version-words", func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "latest" }, "spec.targetVersion"},
		{"version-four-parts", func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "1.20.3.1" }, "spec.targetVersion"},
		{"version-leading-zero", func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "1.020.3" }, "spec.targetVersion"},
		{"version-space", func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = " 1.20.3" }, "spec.targetVersion"},
		{"negative-soak", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.PostRebootSoak = &metav1.Duration{Duration: -time.Second}
		}, "negative"},
		{"ignore-waves-unpinned", func(s *updatesv1alpha1.UpdatePolicySpec) { s.IgnoreWaves = true }, "ignoreWaves needs targetVersion"},
		{"negative-release-age", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.MinReleaseAge = &metav1.Duration{Duration: -time.Second}
		}, "must not be negative"},
		{"release-age-31-days", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.MinReleaseAge = &metav1.Duration{Duration: 31 * 24 * time.Hour}
		}, "at most 30 days"},
		{"negative-delay", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.DelayBetweenNodes = &metav1.Duration{Duration: -time.Second}
		}, "must not be negative"},
		{"delay-25-hours", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.DelayBetweenNodes = &metav1.Duration{Duration: 25 * time.Hour}
		}, "at most 24 hours"},
		{"drain-zero-timeout", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Drain = &updatesv1alpha1.PolicyDrain{Timeout: &metav1.Duration{}}
		}, "must be positive"},
		{"drain-negative-grace", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Drain = &updatesv1alpha1.PolicyDrain{GracePeriodSeconds: ptr.To[int64](-1)}
		}, "gracePeriodSeconds"},
		{"gates-empty", func(s *updatesv1alpha1.UpdatePolicySpec) { s.Gates = &updatesv1alpha1.PolicyGates{} }, "spec.gates"},
		{"blocking-pods-empty", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: &updatesv1alpha1.BlockingPods{}}
		}, "set anywhere, onNode or both"},
		{"blocking-pods-every-pod", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: &updatesv1alpha1.BlockingPods{Anywhere: &metav1.LabelSelector{}}}
		}, "an empty selector matches every pod"},
		{"blocking-pods-on-node-every-pod", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: &updatesv1alpha1.BlockingPods{OnNode: &metav1.LabelSelector{MatchLabels: map[string]string{}}}}
		}, "an empty selector matches every pod"},
		{"alerts-no-matcher", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "prod"}}}
		}, "spec.gates.alerts[0].matchers"},
		{"alerts-source-not-a-name", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "http://am:9093",
				Matchers: []updatesv1alpha1.AlertMatcher{{Name: "severity", Value: "critical"}}}}}
		}, "spec.gates.alerts[0].source"},
		{"alerts-matcher-label-name", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "prod",
				Matchers: []updatesv1alpha1.AlertMatcher{{Name: "not a label", Value: "x"}}}}}
		}, "spec.gates.alerts[0].matchers[0].name"},
		{"alerts-empty-regex", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "prod",
				Matchers: []updatesv1alpha1.AlertMatcher{{Name: "alertname", IsRegex: true}}}}}
		}, "a regular expression must not be empty"},
		{"on-health-gate-failure-retry", func(s *updatesv1alpha1.UpdatePolicySpec) { s.OnHealthGateFailure = "Retry" }, "spec.onHealthGateFailure"},
		{"release-age-ignoring-waves", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.TargetVersion, s.IgnoreWaves = "1.21.0", true
			s.MinReleaseAge = &metav1.Duration{Duration: time.Hour}
		}, "set one of them"},
		// NODE_NAME is the operator's: a policy cannot make a hook lie
		// about its node.
		{"hook-node-name", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Hooks = &updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "x", Env: []updatesv1alpha1.HookEnvVar{{Name: "NODE_NAME", Value: "other"}}}}
		}, "NODE_NAME is set by the operator"},
		{"hook-timeout-short", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Hooks = &updatesv1alpha1.PolicyHooks{AfterReboot: &updatesv1alpha1.Hook{Image: "x", Timeout: &metav1.Duration{Duration: 30 * time.Second}}}
		}, "must be at least 1 minute"},
		{"hook-timeout-long", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Hooks = &updatesv1alpha1.PolicyHooks{AfterReboot: &updatesv1alpha1.Hook{Image: "x", Timeout: &metav1.Duration{Duration: 3 * time.Hour}}}
		}, "must be at most 2 hours"},
		{"hook-without-image", func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Hooks = &updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{}}
		}, "spec.hooks.beforeDrain.image"},
		{"hooks-empty", func(s *updatesv1alpha1.UpdatePolicySpec) { s.Hooks = &updatesv1alpha1.PolicyHooks{} }, "spec.hooks"},
	} {
		p := valid("validation-" + tc.name)
		tc.mod(&p.Spec)
		_, err := c.Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			_ = c.Delete(context.Background(), p.Name, metav1.DeleteOptions{})
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid mentioning %q", tc.name, err, tc.want)
		}
	}
	// What Bottlerocket versions look like (pkg/updater/brapi ParseVersion),
	// and the longest window: accepted.
	for name, mod := range map[string]func(*updatesv1alpha1.UpdatePolicySpec){
		"version":       func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "1.20.3" },
		"version-v":     func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "v1.20.3" },
		"version-two":   func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "1.20" },
		"version-pre":   func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "v1.21.0-rc.1+build.7" },
		"version-empty": func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = "" },
		"rollback": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.OnHealthGateFailure = updatesv1alpha1.HealthGateFailureRollback
		},
		"seven-day-window": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Windows[0].Duration = metav1.Duration{Duration: 7 * 24 * time.Hour}
		},
		"pacing-limits": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.MinReleaseAge = &metav1.Duration{Duration: 30 * 24 * time.Hour}
			s.DelayBetweenNodes = &metav1.Duration{Duration: 24 * time.Hour}
		},
		"drain-every-field": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Drain = &updatesv1alpha1.PolicyDrain{Timeout: &metav1.Duration{Duration: 5 * time.Minute}, GracePeriodSeconds: ptr.To[int64](0),
				DeleteEmptyDirData: ptr.To(false), Force: ptr.To(true),
				SkipPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keep"}}}
		},
		"blocking-pods": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: &updatesv1alpha1.BlockingPods{
				Anywhere: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db-migration"}},
				OnNode: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "backup", Operator: metav1.LabelSelectorOpExists}}}}}
		},
		"alerts": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Gates = &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "prod", Matchers: []updatesv1alpha1.AlertMatcher{
				{Name: "severity", Value: "critical"}, {Name: "alertname", Value: "Watchdog|InfoInhibitor", IsRegex: true, IsEqual: ptr.To(false)}}}}}
		},
		// docs/updater.md's example, "Hooks".
		"hooks": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.Hooks = &updatesv1alpha1.PolicyHooks{
				BeforeDrain: &updatesv1alpha1.Hook{Image: "quay.io/ceph/ceph:v19", Command: []string{"ceph"}, Args: []string{"osd", "set", "noout"},
					Env: []updatesv1alpha1.HookEnvVar{{Name: "CEPH_ARGS", Value: "--id update-hooks"}}, Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
				AfterReboot: &updatesv1alpha1.Hook{Image: "quay.io/ceph/ceph:v19", Command: []string{"ceph"}, Args: []string{"osd", "unset", "noout"},
					Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
			}
		},
		"pacing-zero-ignoring-waves": func(s *updatesv1alpha1.UpdatePolicySpec) {
			s.TargetVersion, s.IgnoreWaves = "1.21.0", true
			s.MinReleaseAge, s.DelayBetweenNodes = &metav1.Duration{}, &metav1.Duration{}
		},
	} {
		p := valid("validation-ok-" + name)
		mod(&p.Spec)
		if _, err := c.Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}

// The CRD's rules on a schedule's prefix (@every, TZ=) ignore whitespace
// around it exactly as the operator's parser does: the rows of
// pkg/updater/window/testdata/schedule-rules.json, which the parser's unit
// test reads too, are accepted or refused alike.
func TestTheCRDsScheduleRulesAgreeWithTheOperatorsParser(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "pkg/updater/window/testdata/schedule-rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Schedule string `json:"schedule"`
		Accepted bool   `json:"accepted"`
		What     string `json:"what"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	c := shadowClient(t).UpdatesV1alpha1().UpdatePolicies()
	for i, r := range rows {
		name := fmt.Sprintf("schedule-rule-%d", i)
		p := &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: updatesv1alpha1.UpdatePolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"updates-it/none": name}}, MaxConcurrentUpdates: intstr.FromInt32(1),
			Windows: []updatesv1alpha1.UpdateWindow{{Schedule: r.Schedule, Duration: metav1.Duration{Duration: time.Minute}}}}}
		_, err := c.Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case r.Accepted && err != nil:
			t.Errorf("%s (%q): refused: %v", r.What, r.Schedule, err)
		case !r.Accepted && err == nil:
			t.Errorf("%s (%q): accepted", r.What, r.Schedule)
		case !r.Accepted && !apierrors.IsInvalid(err):
			t.Errorf("%s (%q): %v, want Invalid", r.What, r.Schedule, err)
		}
	}
}

// deploy/update-operator/policy.yaml refuses an UpdatePolicy whose
// nodeSelector is that of another policy (a node both select is never
// started), naming the other; a different selector, the policy's own
// rewrite, and an edit of a pair written before the admission policy that
// leaves the selector alone all pass. Not parallel: while it is installed
// it applies to every test's policies.
func TestAPolicyWithTheNodeSelectorOfAnotherIsRefused(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().UpdatePolicies()
	mk := func(name string, labels map[string]string) *updatesv1alpha1.UpdatePolicy {
		return &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: updatesv1alpha1.UpdatePolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: labels}, MaxConcurrentUpdates: intstr.FromInt32(1)}}
	}
	pool := map[string]string{"updates-it/pool": "canary"}
	// A pair written before the admission policy existed.
	for _, name := range []string{"selector-old-a", "selector-old-b"} {
		if _, err := c.Create(ctx, mk(name, map[string]string{"updates-it/pool": "old"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", "deploy/update-operator/policy.yaml"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := env.Kubectl(context.Background(), "delete", "-f", "deploy/update-operator/policy.yaml"); err != nil {
			t.Errorf("removing the admission policy: %v\n%s", err, out)
		}
	})
	if _, err := c.Create(ctx, mk("selector-canary", pool), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), "selector-canary", metav1.DeleteOptions{}) })

	// The policy is loaded through an informer; wait until it denies.
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err = c.Create(ctx, mk("selector-twin", pool), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	}); werr != nil {
		t.Fatalf("a policy with the selector of another was never refused: %v", werr)
	}
	for _, want := range []string{"UpdatePolicy selector-canary has the same nodeSelector", "never started"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %v does not say %q", err, want)
		}
	}
	for name, labels := range map[string]map[string]string{
		"selector-fleet":  {"updates-it/pool": "fleet"},
		"selector-subset": {"updates-it/pool": "canary", "updates-it/zone": "a"}, // overlaps: the operator's condition reports it
	} {
		if _, err := c.Create(ctx, mk(name, labels), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for _, name := range []string{"selector-canary", "selector-old-a"} {
		p, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.Paused = true
		if _, err := c.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Errorf("pausing %s: %v", name, err)
		}
	}
	// Editing one of the old pair onto a selector of its own is allowed;
	// editing it onto another's is not.
	p, err := c.Get(ctx, "selector-old-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.NodeSelector.MatchLabels = pool
	if _, err := c.Update(ctx, p, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
		t.Errorf("moving selector-old-b onto selector-canary's selector: %v, want refused", err)
	}
	p.Spec.NodeSelector.MatchLabels = map[string]string{"updates-it/pool": "old-b"}
	if _, err := c.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Errorf("moving selector-old-b to a selector of its own: %v", err)
	}
}
