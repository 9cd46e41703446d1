package kubectlplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	shadowfake "nodehealth.io/client-go/clientset/versioned/fake"
	"nodehealth.io/nodehealth/pkg/version"
)

func shadowFixture(name string, spec, status updatesv1alpha1.ShadowState, annotations map[string]string) *updatesv1alpha1.BottlerocketShadow {
	return &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, ResourceVersion: "5"},
		Spec:       updatesv1alpha1.BottlerocketShadowSpec{State: spec, StateTransitionTimestamp: &metav1.Time{Time: now.Add(-90 * time.Second)}},
		Status:     updatesv1alpha1.BottlerocketShadowStatus{CurrentState: status, CurrentVersion: "1.19.0", TargetVersion: "1.20.0"},
	}
}

func runUpdate(t *testing.T, client versioned.Interface, args ...string) (string, error) {
	t.Helper()
	o, out := testOptions(kubefake.NewClientset())
	o.NewShadowClient = func() (versioned.Interface, error) { return client, nil }
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func policyFixture(name string, paused bool, status updatesv1alpha1.UpdatePolicyStatus) *updatesv1alpha1.UpdatePolicy {
	return &updatesv1alpha1.UpdatePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2, ResourceVersion: "7"},
		Spec: updatesv1alpha1.UpdatePolicySpec{NodeSelector: &metav1.LabelSelector{}, TargetVersion: "1.20.0", Paused: paused,
			MaxConcurrentUpdates: intstr.FromString("10%")},
		Status: status,
	}
}

func TestUpdateStatusShowsThePoliciesTheNodesInFlightAndWhatHaltsTheRollout(t *testing.T) {
	failedAt := now.Add(-time.Hour)
	client := shadowfake.NewSimpleClientset(
		policyFixture("fleet", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2, Nodes: 3, UpToDate: 1, InFlight: 1, Failed: 1,
			Others: 1, OtherNodes: []updatesv1alpha1.CountedNode{{Name: "n9", Reason: "condition DrainInProgress=True, reason AdminRequested, node unschedulable"}},
			HaltedBy: []string{"n2"}, Conditions: []metav1.Condition{
				{Type: updatesv1alpha1.PolicyWindowOpen, Status: metav1.ConditionFalse, Reason: "OutsideWindow", Message: "The next update window opens at X"},
				{Type: updatesv1alpha1.PolicyHalted, Status: metav1.ConditionTrue, Reason: "UpdateFailed"}}}),
		policyFixture("canary", true, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 1}),
		shadowFixture("n2", updatesv1alpha1.StateIdle, updatesv1alpha1.StateMonitoringUpdate, map[string]string{
			updatesv1alpha1.FailedAnnotation: rfc(failedAt), updatesv1alpha1.FailureReasonAnnotation: "DeadlineExceeded: too slow"}),
		shadowFixture("n1", updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, nil),
		shadowFixture("n3", updatesv1alpha1.StateIdle, updatesv1alpha1.StateIdle, map[string]string{
			updatesv1alpha1.FailedAnnotation: rfc(failedAt), updatesv1alpha1.ResumeAnnotation: rfc(failedAt)}),
	)
	out, err := runUpdate(t, client, "update", "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"POLICY   TARGET   PROGRESS   IN-FLIGHT   OTHERS   FAILED   PAUSED   WINDOW    HALTED BY\n",
		"canary   1.20.0   0/0        0           0        0        true     unknown   -\n",
		"fleet    1.20.0   1/3        1           1        1        false    closed    n2\n",
		"canary: the operator has not acted on its latest edit yet",
		"fleet: the budget also counts n9 (condition DrainInProgress=True, reason AdminRequested, node unschedulable)\n",
		"Rollout HALTED by failed updates on: n2\n",
		"n2 failed at " + rfc(failedAt) + ": DeadlineExceeded: too slow",
		"kubectl nodehealth update resume NODE",
		"NODE   POLICY   DESIRED              STATE                      SINCE   CURRENT   TARGET   VERSION   CRASH   NOTE",
		"n1     -        RebootedIntoUpdate   StagedAndPerformedUpdate   1m30s   1.19.0    1.20.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "n3 ") {
		t.Errorf("an Idle node not in flight is listed without -o wide:\n%s", out)
	}
	if strings.Index(out, "n1  ") > strings.Index(out, "n2  ") {
		t.Errorf("rows not sorted by node:\n%s", out)
	}

	// -o wide: every node, and the policies' limits and selectors.
	out, err = runUpdate(t, client, "update", "status", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LIMIT   SELECTOR", "10%     <every managed node>", "n3", "(resumed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, out)
		}
	}
	out, err = runUpdate(t, client, "update", "status", "-o", "yaml")
	if err != nil || !strings.Contains(out, "policies:\n") || !strings.Contains(out, "name: canary") {
		t.Errorf("-o yaml: %v\n%s", err, out)
	}
	if _, err := runUpdate(t, client, "update", "status", "-o", "table"); err == nil {
		t.Error("-o table accepted")
	}

	out, err = runUpdate(t, client, "update", "status", "n3", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r UpdateReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) != 1 || r.Nodes[0].Halting || len(r.HaltedBy) != 0 {
		t.Errorf("report %+v", r)
	}
	if _, err := runUpdate(t, client, "update", "status", "missing"); err == nil || !strings.Contains(err.Error(), "no BottlerocketShadow") {
		t.Errorf("missing node: %v", err)
	}
}

// pause and unpause write spec.paused of the policy, nothing else, with a
// merge patch: no read-modify-write that could undo a concurrent edit.
func TestUpdatePauseAndUnpause(t *testing.T) {
	client := shadowfake.NewSimpleClientset(policyFixture("fleet", false, updatesv1alpha1.UpdatePolicyStatus{}))
	out, err := runUpdate(t, client, "update", "pause", "fleet")
	if err != nil || !strings.Contains(out, "UpdatePolicy fleet paused") {
		t.Fatalf("%v: %s", err, out)
	}
	out, err = runUpdate(t, client, "update", "unpause", "fleet")
	if err != nil || !strings.Contains(out, "UpdatePolicy fleet unpaused") {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := runUpdate(t, client, "update", "pause", "missing"); err == nil || !strings.Contains(err.Error(), "no UpdatePolicy missing") {
		t.Errorf("missing policy: %v", err)
	}
	var got []string
	for _, a := range client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			got = append(got, fmt.Sprintf("patch %s %s %s", p.GetResource().Resource, p.GetName(), p.GetPatch()))
		} else {
			got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	want := []string{
		`patch updatepolicies fleet {"spec":{"paused":true}}`,
		`patch updatepolicies fleet {"spec":{"paused":false}}`,
		`patch updatepolicies missing {"spec":{"paused":true}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUpdateResumeCopiesTheFailureTimeAndComparesNoClock(t *testing.T) {
	failedAt := now.Add(-time.Hour)
	client := shadowfake.NewSimpleClientset(
		shadowFixture("n1", updatesv1alpha1.StateIdle, updatesv1alpha1.StateIdle, map[string]string{
			updatesv1alpha1.FailedAnnotation: rfc(failedAt), updatesv1alpha1.FailureReasonAnnotation: "WrongVersion"}),
		shadowFixture("n2", updatesv1alpha1.StateIdle, updatesv1alpha1.StateIdle, nil),
		// A failure stamped by a clock ahead of ours.
		shadowFixture("n3", updatesv1alpha1.StateIdle, updatesv1alpha1.StateIdle, map[string]string{
			updatesv1alpha1.FailedAnnotation: rfc(now.Add(time.Minute))}),
	)
	out, err := runUpdate(t, client, "update", "resume", "n1")
	if err != nil || !strings.Contains(out, "n1 resumed") {
		t.Fatalf("%v: %s", err, out)
	}
	out, err = runUpdate(t, client, "update", "resume", "n2")
	if err != nil || !strings.Contains(out, "nothing to resume") {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := runUpdate(t, client, "update", "resume", "n3"); err != nil {
		t.Fatal(err)
	}
	var patches []string
	for _, a := range client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patches = append(patches, p.GetName()+" "+string(p.GetPatch()))
		}
	}
	want := []string{
		// The failed value, repeated: no clock is compared.
		`n1 {"metadata":{"annotations":{"updates.nodehealth.io/resume":"` + rfc(failedAt) + `"},"resourceVersion":"5"}}`,
		`n3 {"metadata":{"annotations":{"updates.nodehealth.io/resume":"` + rfc(now.Add(time.Minute)) + `"},"resourceVersion":"5"}}`,
	}
	if strings.Join(patches, "\n") != strings.Join(want, "\n") {
		t.Errorf("patches:\n%s\nwant:\n%s", strings.Join(patches, "\n"), strings.Join(want, "\n"))
	}
	for _, n := range []string{"n1", "n3"} {
		obj, _ := client.Tracker().Get(updatesv1alpha1.SchemeGroupVersion.WithResource("bottlerocketshadows"), "", n)
		s := obj.(*updatesv1alpha1.BottlerocketShadow)
		if updatesv1alpha1.Halting(s.Annotations) {
			t.Errorf("%s still halts after resume: %v", n, s.Annotations)
		}
	}
	if _, err := runUpdate(t, client, "update", "resume"); err == nil {
		t.Error("resume without a node accepted")
	}
}

// -o json and -o yaml print a typed object; -o wide adds the failure's
// reason, its resume and the agent's problem.
func TestUpdateStatusFormats(t *testing.T) {
	failedAt := now.Add(-time.Hour)
	client := shadowfake.NewSimpleClientset(
		shadowFixture("n1", updatesv1alpha1.StateIdle, updatesv1alpha1.StateMonitoringUpdate, map[string]string{
			updatesv1alpha1.FailedAnnotation: rfc(failedAt), updatesv1alpha1.FailureReasonAnnotation: "DeadlineExceeded"}),
	)
	for _, format := range []string{"json", "yaml"} {
		out, err := runUpdate(t, client, "update", "status", "-o", format)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"apiVersion", ReportAPIVersion, "kind", "UpdateStatusReport"} {
			if !strings.Contains(out, want) {
				t.Errorf("-o %s lacks %q:\n%s", format, want, out)
			}
		}
	}
	out, err := runUpdate(t, client, "update", "status", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "FAILURE-REASON") || !strings.Contains(out, "DeadlineExceeded") {
		t.Errorf("-o wide:\n%s", out)
	}
	if _, err := runUpdate(t, client, "update", "status", "-o", "xml"); err == nil {
		t.Error("-o xml accepted")
	}
}

// Node names complete from the cluster: nodes for status and the first
// argument of register, shadows for update status and resume; names
// already given are not offered again.
func TestNodeNamesCompleteFromTheClusterAndAreNotOfferedTwice(t *testing.T) {
	nodes := kubefake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-b"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "infra-1"}},
	)
	shadows := shadowfake.NewSimpleClientset(shadowFixture("worker-a", updatesv1alpha1.StateIdle, updatesv1alpha1.StateIdle, nil))
	complete := func(args ...string) string {
		t.Helper()
		o, out := testOptions(nodes)
		o.NewShadowClient = func() (versioned.Interface, error) { return shadows, nil }
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(append([]string{cobra.ShellCompRequestCmd}, args...))
		if err := cmd.ExecuteContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The candidates, one a line, then ":<directive>".
		return strings.Join(strings.Split(strings.TrimSpace(out.String()), "\n"), " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "worker"}, "worker-a worker-b :4"},
		{[]string{"status", "worker-a", ""}, "infra-1 worker-b :4"},
		{[]string{"explain", ""}, "infra-1 worker-a worker-b :4"},
		{[]string{"explain", "infra-1", ""}, ":4"},
		{[]string{"register", "inf"}, "infra-1 :4"},
		{[]string{"update", "status", ""}, "worker-a :4"},
		{[]string{"update", "resume", "w"}, "worker-a :4"},
		{[]string{"status", "-o", ""}, "wide json yaml :4"},
	} {
		if got := complete(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("completing %q: %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestTheVersionFlagPrintsTheBuildVersion(t *testing.T) {
	out, err := runUpdate(t, shadowfake.NewSimpleClientset(), "--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := "kubectl-nodehealth " + version.Get().String() + "\n"; out != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}

// TestUpdateStatusSaysWhatPacingHoldsBack: the Paced condition, with the
// release's age and the next start relative to now.
func TestUpdateStatusSaysWhatPacingHoldsBack(t *testing.T) {
	young := policyFixture("fleet", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2,
		OfferedVersions: []updatesv1alpha1.OfferedVersion{{Version: "1.20.0", FirstOffered: metav1.NewTime(now.Add(-2 * time.Hour))}},
		Conditions: []metav1.Condition{{Type: updatesv1alpha1.PolicyPaced, Status: metav1.ConditionTrue, Reason: "ReleaseAge",
			Message: "Waiting for release age (minReleaseAge 24h0m0s): 1.20.0 first offered at " + rfc(now.Add(-2*time.Hour)) + ", rolls out from X"}}})
	young.Spec.MinReleaseAge = &metav1.Duration{Duration: 24 * time.Hour}
	between := policyFixture("canary", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2,
		LastUpdateSucceeded: &metav1.Time{Time: now.Add(-4 * time.Minute)},
		Conditions:          []metav1.Condition{{Type: updatesv1alpha1.PolicyPaced, Status: metav1.ConditionTrue, Reason: "DelayBetweenNodes", Message: "Waiting between nodes"}}})
	between.Spec.DelayBetweenNodes = &metav1.Duration{Duration: 10 * time.Minute}
	out, err := runUpdate(t, shadowfake.NewSimpleClientset(young, between), "update", "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fleet: waiting for release age: 1.20.0 offered 2h0m0s ago, needs 24h0m0s\n",
		"canary: waiting between nodes: the last update passed its health gate 4m0s ago, next start at " + rfc(now.Add(6*time.Minute)) + " (delayBetweenNodes 10m0s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestUpdateStatusSaysWhatTheGatesBlock: the Blocked condition's message,
// on a line of the policy's own, while it is True; nothing while False.
func TestUpdateStatusSaysWhatTheGatesBlock(t *testing.T) {
	blocked := policyFixture("fleet", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2,
		Conditions: []metav1.Condition{{Type: updatesv1alpha1.PolicyBlocked, Status: metav1.ConditionTrue, Reason: "BlockingPods",
			Message: "Pods of spec.gates.blockingPods.anywhere hold back every start: batch/backup-1"}}})
	free := policyFixture("canary", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2,
		Conditions: []metav1.Condition{{Type: updatesv1alpha1.PolicyBlocked, Status: metav1.ConditionFalse, Reason: "NotBlocked", Message: "No gate holds back a start"}}})
	out, err := runUpdate(t, shadowfake.NewSimpleClientset(blocked, free), "update", "status")
	if err != nil {
		t.Fatal(err)
	}
	if want := "fleet: BLOCKED: Pods of spec.gates.blockingPods.anywhere hold back every start: batch/backup-1\n"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "canary: BLOCKED") || strings.Contains(out, "No gate holds back") {
		t.Errorf("a policy nothing blocks is said to be blocked:\n%s", out)
	}
}

// TestUpdateStatusNamesTheAlertsAndTheSourceThatBlockAPolicy: each reason
// of the alerts gate, with the message the operator writes, is a BLOCKED
// line naming the alert or the source.
func TestUpdateStatusNamesTheAlertsAndTheSourceThatBlockAPolicy(t *testing.T) {
	blocked := func(name, reason, message string) *updatesv1alpha1.UpdatePolicy {
		return policyFixture(name, false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2,
			Conditions: []metav1.Condition{{Type: updatesv1alpha1.PolicyBlocked, Status: metav1.ConditionTrue, Reason: reason, Message: message}}})
	}
	lines := []string{
		"fleet: BLOCKED: Alerts of spec.gates.alerts fire and hold back every start: KubePersistentVolumeFillingUp (source prod), NodeDown{node=n1} (source prod)\n",
		"canary: BLOCKED: No node starts while a gate cannot be read (fail closed): querying alert source prod: dial tcp 10.0.0.9:9093: connect: connection refused\n",
		"staging: BLOCKED: No node starts: spec.gates.alerts names alert sources the operator's configuration does not define (alertSources): staging-am\n",
	}
	out, err := runUpdate(t, shadowfake.NewSimpleClientset(
		blocked("fleet", "FiringAlerts", strings.TrimSuffix(strings.TrimPrefix(lines[0], "fleet: BLOCKED: "), "\n")),
		blocked("canary", "GateUnavailable", strings.TrimSuffix(strings.TrimPrefix(lines[1], "canary: BLOCKED: "), "\n")),
		blocked("staging", "UnknownAlertSource", strings.TrimSuffix(strings.TrimPrefix(lines[2], "staging: BLOCKED: "), "\n")),
	), "update", "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range lines {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A node whose drain waits for its policy's beforeDrain hook names the
// hook's Job and how long it has run; a finished Job, or one of an earlier
// step, is no wait. A user who may not list the hooks' Jobs is told so,
// and the rest of the status stands.
func TestUpdateStatusNamesTheHookJobANodeWaitsOn(t *testing.T) {
	pol := policyFixture("storage", false, updatesv1alpha1.UpdatePolicyStatus{ObservedGeneration: 2})
	pol.Spec.Hooks = &updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "ceph"}, AfterReboot: &updatesv1alpha1.Hook{Image: "ceph"}}
	policy := map[string]string{updatesv1alpha1.PolicyAnnotation: "storage"}
	shadows := shadowfake.NewSimpleClientset(pol,
		// Each entered its state 90 s ago.
		shadowFixture("node-a", updatesv1alpha1.StateMonitoringUpdate, updatesv1alpha1.StateMonitoringUpdate, policy),
		shadowFixture("node-b", updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, policy),
		shadowFixture("node-c", updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, policy))
	job := func(name, node, hook string, created time.Time, conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultHooksNamespace, Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{updatesv1alpha1.HookLabel: hook}, Annotations: map[string]string{updatesv1alpha1.HookNodeAnnotation: node}},
			Status: batchv1.JobStatus{Conditions: conds}}
	}
	kube := kubefake.NewClientset(
		job("before-drain-node-b-4f1c2a9e07", "node-b", updatesv1alpha1.HookBeforeDrain, now.Add(-2*time.Minute+30*time.Second)),
		// node-a's afterReboot Job succeeded: its health gate no longer waits on it.
		job("after-reboot-node-a-1b2c3d4e5f", "node-a", updatesv1alpha1.HookAfterReboot, now.Add(-time.Minute),
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
		// node-c's running Job is an earlier attempt's, created before its step began.
		job("before-drain-node-c-0a0b0c0d0e", "node-c", updatesv1alpha1.HookBeforeDrain, now.Add(-time.Hour)),
		// A beforeDrain Job of node-a: not the hook of its step.
		job("before-drain-node-a-9f8e7d6c5b", "node-a", updatesv1alpha1.HookBeforeDrain, now.Add(-time.Minute)),
	)
	run := func(kube *kubefake.Clientset, args ...string) string {
		t.Helper()
		o, out := testOptions(kube)
		o.NewShadowClient = func() (versioned.Interface, error) { return shadows, nil }
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	out := run(kube, "update", "status")
	want := "node-b  waiting for hook beforeDrain: Job nodehealth-update-hooks/before-drain-node-b-4f1c2a9e07 running for 1m30s\n"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if n := strings.Count(out, "waiting for hook"); n != 1 {
		t.Errorf("%d nodes waiting for a hook, want node-b only:\n%s", n, out)
	}
	var r UpdateReport
	if err := json.Unmarshal([]byte(run(kube, "update", "status", "-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	if w := r.Nodes[1].WaitingForHook; w == nil || w.Hook != updatesv1alpha1.HookBeforeDrain || w.Running != "1m30s" {
		t.Errorf("-o json: node-b waits for %+v", w)
	}

	// The hooks live in another namespace: --hooks-namespace says which.
	if out := run(kube, "update", "status", "--hooks-namespace", "elsewhere"); strings.Contains(out, "waiting for hook") {
		t.Errorf("Jobs of another namespace were read:\n%s", out)
	}

	forbidden := kubefake.NewClientset()
	forbidden.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(batchv1.Resource("jobs"), "", errors.New("no RBAC"))
	})
	out = run(forbidden, "update", "status")
	if !strings.Contains(out, "Hooks: cannot list the hooks' Jobs in namespace nodehealth-update-hooks") || !strings.Contains(out, "node-b   storage") {
		t.Errorf("a refused list of Jobs is not said, or hides the rest:\n%s", out)
	}
}

// A rollout without hooks reads no Jobs: its status needs no permission on
// them.
func TestUpdateStatusOfPoliciesWithoutHooksListsNoJobs(t *testing.T) {
	shadows := shadowfake.NewSimpleClientset(policyFixture("fleet", false, updatesv1alpha1.UpdatePolicyStatus{}),
		shadowFixture("n1", updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateStagedAndPerformedUpdate, nil))
	kube := kubefake.NewClientset()
	o, out := testOptions(kube)
	o.NewShadowClient = func() (versioned.Interface, error) { return shadows, nil }
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs([]string{"update", "status"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a := kube.Actions(); len(a) != 0 {
		t.Errorf("the status of a rollout without hooks called the API: %v\n%s", a, out)
	}
}
