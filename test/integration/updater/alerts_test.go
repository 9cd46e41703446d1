package updater_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/pkg/kubectlplugin"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
	updater "nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// A policy's spec.gates.alerts against a real Alertmanager on loopback
// (docs/updater.md, "Alerts"): a matching alert holds every start until it
// is resolved; an alert naming a node that fires during the node's soak
// fails its health gate; with Alertmanager stopped, starts are held
// (GateUnavailable) and a node in its soak waits past its MonitoringUpdate
// deadline instead of failing.
func TestAFiringAlertHoldsStartsAndANodesAlertFailsItsSoak(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	binDir, err := framework.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	am, err := framework.StartAlertmanager(ctx, binDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = am.Stop() })

	// Two policies with the same gate: "soak" rolls am-a, am-b and am-c
	// one at a time; "start" (am-d) stays paused until Alertmanager is
	// down, to show a start held while a source cannot answer.
	soakNodes, startNodes := []string{"am-a", "am-b", "am-c"}, []string{"am-d"}
	createNodes(t, append(soakNodes, startNodes...)...)
	labelNodes(t, ctx, "soak", soakNodes...)
	labelNodes(t, ctx, "start", startNodes...)
	startAgent(t, ctx, append(soakNodes, startNodes...)...)
	test := policyName(t)
	soak := createRolePolicy(t, "soak", test, false)
	start := createRolePolicy(t, "start", test, true)

	client, err := alertmanager.New(alertmanager.Options{URL: am.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opts := baseOptions(t)
	opts.Deadlines.MonitoringUpdate = 8 * time.Second
	opts.AlertSources = map[string]updater.AlertSource{"it": client}

	fleetAlert := map[string]string{"alertname": "Maintenance", "test": test}
	if err := am.Fire(ctx, fleetAlert); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opts)
	waitPolicy(t, ctx, soak.Name, "Blocked by the firing alert", blockedBy("FiringAlerts", "Maintenance (source it)"))
	// kubectl nodehealth update status says so, naming the alert and its
	// source, from the condition the operator wrote.
	if out := updateStatus(t, ctx); !strings.Contains(out, soak.Name+": BLOCKED: Alerts of spec.gates.alerts fire and hold back every start: Maintenance (source it)\n") {
		t.Errorf("kubectl nodehealth update status lacks the BLOCKED line of %s:\n%s", soak.Name, out)
	}
	idle(t, ctx, "am-a")

	if err := am.Resolve(ctx, fleetAlert); err != nil {
		t.Fatal(err)
	}
	waitShadow(t, ctx, "am-a", "updated once the alert resolved", updated)

	// Fired once am-b has started, so that it fires all through the soak.
	waitShadow(t, ctx, "am-b", "started", func(s *updatesv1alpha1.BottlerocketShadow) bool { return s.Spec.State != updatesv1alpha1.StateIdle })
	nodeAlert := map[string]string{"alertname": "NodeUnhealthy", "test": test, "node": "am-b"}
	if err := am.Fire(ctx, nodeAlert); err != nil {
		t.Fatal(err)
	}
	b := waitShadow(t, ctx, "am-b", "failed by the alert naming it", failed)
	if r := b.Annotations[updatesv1alpha1.FailureReasonAnnotation]; !strings.HasPrefix(r, "FiringAlert: alert NodeUnhealthy{node=am-b} (source it)") {
		t.Errorf("failure reason %q, want the alert named", r)
	}
	if err := am.Resolve(ctx, nodeAlert); err != nil {
		t.Fatal(err)
	}

	// Alertmanager goes away once am-c has started: its soak waits.
	resume(t, ctx, "am-b")
	waitShadow(t, ctx, "am-c", "started", func(s *updatesv1alpha1.BottlerocketShadow) bool { return s.Spec.State != updatesv1alpha1.StateIdle })
	if err := am.Stop(); err != nil {
		t.Fatal(err)
	}
	c := waitShadow(t, ctx, "am-c", "its soak paused", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		_, ok := s.Annotations[updatesv1alpha1.SoakPausedSinceAnnotation]
		return ok && s.Spec.State == updatesv1alpha1.StateMonitoringUpdate
	})
	editPolicy(t, ctx, start.Name, func(s *updatesv1alpha1.UpdatePolicySpec) { s.Paused = false })
	waitPolicy(t, ctx, start.Name, "Blocked while Alertmanager is down", blockedBy("GateUnavailable", "querying alert source it"))

	// Past the MonitoringUpdate deadline: still soaking, not failed.
	deadline := c.Spec.StateTransitionTimestamp.Add(opts.Deadlines.MonitoringUpdate + 3*time.Second)
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(deadline)):
	}
	c, err = shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, "am-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, bad := c.Annotations[updatesv1alpha1.FailedAnnotation]; bad || c.Spec.State != updatesv1alpha1.StateMonitoringUpdate {
		t.Errorf("am-c past its deadline with Alertmanager down: spec %s, failure %q; want it still soaking", c.Spec.State,
			c.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	}
	idle(t, ctx, "am-d")
}

// labelNodes gives nodes the label gate-role=role, which the test's
// policies select by.
func labelNodes(t *testing.T, ctx context.Context, role string, names ...string) {
	t.Helper()
	for _, n := range names {
		patch := `{"metadata":{"labels":{"gate-role":"` + role + `"}}}`
		if _, err := testenv.Env(t).Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createRolePolicy is a policy of the test's nodes of one role, one at a
// time, a soak of two seconds, gated on the alerts labelled test=test of
// the source "it".
func createRolePolicy(t *testing.T, role, test string, paused bool) *updatesv1alpha1.UpdatePolicy {
	t.Helper()
	k, v := testLabel(t)
	return createPolicyObject(t, &updatesv1alpha1.UpdatePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: test + "-" + role},
		Spec: updatesv1alpha1.UpdatePolicySpec{
			NodeSelector:         &metav1.LabelSelector{MatchLabels: map[string]string{k: v, "gate-role": role}},
			MaxConcurrentUpdates: intstr.FromInt32(1), PostRebootSoak: &metav1.Duration{Duration: 2 * time.Second}, Paused: paused,
			Gates: &updatesv1alpha1.PolicyGates{Alerts: []updatesv1alpha1.AlertGate{{Source: "it",
				Matchers: []updatesv1alpha1.AlertMatcher{{Name: "test", Value: test, IsEqual: ptr.To(true)}}}}},
		},
	})
}

// updateStatus is what `kubectl nodehealth update status` prints.
func updateStatus(t *testing.T, ctx context.Context) string {
	t.Helper()
	var out bytes.Buffer
	o := kubectlplugin.NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	o.NewClient = func() (kubernetes.Interface, error) { return kubernetes.NewForConfig(testenv.Env(t).Config) }
	o.NewShadowClient = func() (versioned.Interface, error) { return shadows(t), nil }
	cmd := kubectlplugin.NewCommandWithOptions(o)
	cmd.SetArgs([]string{"update", "status"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("kubectl nodehealth update status: %v\n%s", err, out.String())
	}
	return out.String()
}

// blockedBy: the policy's Blocked condition is True for reason, its
// message mentioning mentions.
func blockedBy(reason, mentions string) func(*updatesv1alpha1.UpdatePolicy) bool {
	return func(p *updatesv1alpha1.UpdatePolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyBlocked)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && strings.Contains(c.Message, mentions)
	}
}

// idle fails the test unless the node's spec is Idle.
func idle(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	s, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.State != updatesv1alpha1.StateIdle {
		t.Fatalf("%s started while the alerts gate holds it: spec %s", name, s.Spec.State)
	}
}
