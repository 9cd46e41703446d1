package operator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func blockingPods(anywhere, onNode map[string]string) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		b := &updatesv1alpha1.BlockingPods{}
		if anywhere != nil {
			b.Anywhere = &metav1.LabelSelector{MatchLabels: anywhere}
		}
		if onNode != nil {
			b.OnNode = &metav1.LabelSelector{MatchLabels: onNode}
		}
		p.Spec.Gates = &updatesv1alpha1.PolicyGates{BlockingPods: b}
	}
}

func maxConcurrent(n int32) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.MaxConcurrentUpdates = intstr.FromInt32(n) }
}

// gatePod is a pod in namespace ns on node ("": not scheduled).
func gatePod(ns, name, node string, lbls map[string]string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: phase}}
}

var (
	backup    = map[string]string{"app": "backup"}
	migration = map[string]string{"app": "migration"}
)

// podActions renders the gates' calls on the pod client: "list pods
// LABELS FIELDS NAMESPACE".
func (f *fixture) podActions() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if l, ok := a.(clienttesting.ListActionImpl); ok && a.GetResource().Resource == "pods" {
			out = append(out, fmt.Sprintf("list pods %s %s ns=%q", l.ListOptions.LabelSelector, l.ListOptions.FieldSelector, a.GetNamespace()))
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	f.kube.ClearActions()
	return out
}

const listBackup = `list pods app=backup status.phase!=Succeeded,status.phase!=Failed ns=""`
const listMigration = `list pods app=migration status.phase!=Succeeded,status.phase!=Failed ns=""`

// TestTheBlockingPodsGateHoldsBackTheStartsItsPodsSelect: the gates are
// read only when the policy would start a node, one LIST per selector
// across namespaces; an unfinished pod anywhere holds every start, one on a
// node holds that node only, and a LIST that fails holds every start. The
// policy's Blocked condition names what blocks, and the pass looks again
// after DefaultGateRecheck.
func TestTheBlockingPodsGateHoldsBackTheStartsItsPodsSelect(t *testing.T) {
	many := []*v1.Pod{}
	for i := range 5 {
		many = append(many, gatePod("batch", fmt.Sprintf("backup-%d", i), "", backup, v1.PodRunning))
	}
	for _, tc := range []struct {
		name   string
		policy *updatesv1alpha1.UpdatePolicy
		pods   []*v1.Pod
		// shadows are the Idle nodes (default a and b).
		shadows []string
		// listErr makes every pod LIST fail.
		listErr error
		// want are the client's actions, podLists the pod client's.
		want, podLists []string
		// blocked is the Blocked condition, "Status/Reason: message".
		blocked string
		// wake is the start pass's timer (0: none); events those sent.
		wake   time.Duration
		events []string
	}{
		{name: "a policy without gates lists no pod",
			policy: fleet(), want: []string{"status fleet", "list", "list policies", "update a StagedAndPerformedUpdate 1.20.0"},
			blocked: "False/NotBlocked: No gate holds back a start", events: []string{"Normal UpdateStarted"}},
		{name: "no matching pod: the node starts after one LIST per selector",
			policy: fleet(blockingPods(backup, migration)), pods: []*v1.Pod{gatePod("batch", "other", "a", map[string]string{"app": "other"}, v1.PodRunning)},
			podLists: []string{listBackup, listMigration},
			want:     []string{"status fleet", "list", "list policies", "update a StagedAndPerformedUpdate 1.20.0"},
			blocked:  "False/NotBlocked: No gate holds back a start", events: []string{"Normal UpdateStarted"}},
		{name: "a finished pod blocks nothing",
			policy: fleet(blockingPods(backup, nil)), pods: []*v1.Pod{gatePod("batch", "done", "", backup, v1.PodSucceeded), gatePod("batch", "failed", "", backup, v1.PodFailed)},
			podLists: []string{listBackup},
			want:     []string{"status fleet", "list", "list policies", "update a StagedAndPerformedUpdate 1.20.0"},
			blocked:  "False/NotBlocked: No gate holds back a start", events: []string{"Normal UpdateStarted"}},
		{name: "a pod anywhere holds every start",
			policy: fleet(blockingPods(backup, nil)), pods: []*v1.Pod{gatePod("batch", "backup-1", "", backup, v1.PodPending)},
			podLists: []string{listBackup}, want: []string{"status fleet"},
			blocked: "True/BlockingPods: Pods of spec.gates.blockingPods.anywhere hold back every start: batch/backup-1",
			wake:    DefaultGateRecheck, events: []string{"Normal StartBlocked"}},
		{name: "the condition names three pods and counts the others",
			policy: fleet(blockingPods(backup, nil)), pods: many, podLists: []string{listBackup}, want: []string{"status fleet"},
			blocked: "True/BlockingPods: Pods of spec.gates.blockingPods.anywhere hold back every start: batch/backup-0, batch/backup-1, batch/backup-2 and 2 more",
			wake:    DefaultGateRecheck, events: []string{"Normal StartBlocked"}},
		{name: "a pod on a node holds that node; the next takes the slot",
			policy: fleet(blockingPods(nil, migration)),
			pods:   []*v1.Pod{gatePod("db", "migrate-a", "a", migration, v1.PodRunning), gatePod("db", "migrate-pending", "", migration, v1.PodPending)},
			// The cache's plan read the gates: the confirmation reuses
			// them.
			podLists: []string{listMigration},
			want:     []string{"status fleet", "list", "list policies", "update b StagedAndPerformedUpdate 1.20.0"},
			blocked:  "True/BlockingPods: Pods of spec.gates.blockingPods.onNode hold back the start of their nodes; other nodes may start: a (db/migrate-a)",
			wake:     DefaultGateRecheck, events: []string{"Normal StartBlocked", "Normal UpdateBlocked", "Normal UpdateStarted"}},
		{name: "pods on every candidate hold every start",
			policy:   fleet(blockingPods(nil, migration), maxConcurrent(2)),
			pods:     []*v1.Pod{gatePod("db", "migrate-b", "b", migration, v1.PodRunning), gatePod("db", "migrate-a", "a", migration, v1.PodRunning)},
			podLists: []string{listMigration}, want: []string{"status fleet"},
			blocked: "True/BlockingPods: Pods of spec.gates.blockingPods.onNode hold back the start of their nodes; other nodes may start: a (db/migrate-a); b (db/migrate-b)",
			wake:    DefaultGateRecheck, events: []string{"Normal StartBlocked", "Normal UpdateBlocked"}},
		{name: "the condition names three held nodes and counts the others",
			policy:  fleet(blockingPods(nil, migration)),
			shadows: []string{"a", "b", "c", "d", "e"},
			pods: []*v1.Pod{gatePod("db", "m-a", "a", migration, v1.PodRunning), gatePod("db", "m-b", "b", migration, v1.PodRunning),
				gatePod("db", "m-c", "c", migration, v1.PodRunning), gatePod("db", "m-d", "d", migration, v1.PodRunning)},
			podLists: []string{listMigration},
			want:     []string{"status fleet", "list", "list policies", "update e StagedAndPerformedUpdate 1.20.0"},
			blocked:  "True/BlockingPods: Pods of spec.gates.blockingPods.onNode hold back the start of their nodes; other nodes may start: a (db/m-a); b (db/m-b); c (db/m-c) and 1 more nodes",
			wake:     DefaultGateRecheck, events: []string{"Normal StartBlocked", "Normal UpdateBlocked", "Normal UpdateStarted"}},
		{name: "a LIST that fails holds every start (fail closed)",
			policy: fleet(blockingPods(backup, nil)), listErr: errors.New("etcdserver: request timed out"),
			podLists: []string{listBackup}, want: []string{"status fleet"},
			blocked: "True/GateUnavailable: No node starts while a gate cannot be read (fail closed): listing the pods of spec.gates.blockingPods.anywhere (app=backup): etcdserver: request timed out",
			wake:    DefaultGateRecheck, events: []string{"Normal StartBlocked"}},
		{name: "a policy that would start nothing reads no gate",
			policy: fleet(blockingPods(backup, migration), paused), pods: []*v1.Pod{gatePod("batch", "backup-1", "", backup, v1.PodRunning)},
			want: []string{"status fleet"}, blocked: "False/NotBlocked: No gate holds back a start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := tc.shadows
			if names == nil {
				names = []string{"a", "b"}
			}
			var shadows []*updatesv1alpha1.BottlerocketShadow
			var nodes []*v1.Node
			for _, n := range names {
				shadows = append(shadows, mkShadow(n, idle, idle))
				nodes = append(nodes, mkNode(n))
			}
			f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{tc.policy}, nodes, shadows)
			for _, p := range tc.pods {
				if err := f.kube.Tracker().Add(p); err != nil {
					t.Fatal(err)
				}
			}
			if tc.listErr != nil {
				f.kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.listErr })
			}
			f.kube.ClearActions()
			if err := f.c.syncStart(f.ctx); err != nil {
				t.Fatal(err)
			}
			f.expect(tc.want)
			if got := f.podActions(); !slices.Equal(got, tc.podLists) {
				t.Errorf("pod client:\n  got  %q\n  want %q", got, tc.podLists)
			}
			got, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, updatesv1alpha1.PolicyBlocked)
			if c == nil {
				t.Fatalf("no %s condition in %+v", updatesv1alpha1.PolicyBlocked, got.Status.Conditions)
			}
			if s := string(c.Status) + "/" + c.Reason + ": " + c.Message; s != tc.blocked {
				t.Errorf("Blocked:\n  got  %s\n  want %s", s, tc.blocked)
			}
			var wake time.Duration
			if timers := f.timers[startKey]; len(timers) > 0 {
				wake = timers[len(timers)-1]
			}
			if wake != tc.wake {
				t.Errorf("start pass again in %v, want %v", wake, tc.wake)
			}
			if got := distinct(f.events()); strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %q, want %q", got, tc.events)
			}
		})
	}
}

// TestARolloutHeldByAPodGoesOnWhenThePodIsGone: the pass that runs after
// DefaultGateRecheck lists again and starts the node; the condition turns False,
// and a second pass with nothing changed writes nothing.
func TestARolloutHeldByAPodGoesOnWhenThePodIsGone(t *testing.T) {
	shadows := []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)}
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(blockingPods(backup, nil))}, []*v1.Node{mkNode("a")}, shadows)
	pod := gatePod("batch", "backup-1", "a", backup, v1.PodRunning)
	if err := f.kube.Tracker().Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet"})
	written, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.policies.Update(written); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	// Still there ten seconds later: the same status, not written again.
	f.clock.Step(DefaultGateRecheck)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
	if err := f.kube.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "batch", "backup-1"); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(DefaultGateRecheck)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The generation was observed already: the status follows the start.
	f.expect([]string{"list", "list policies", "update a StagedAndPerformedUpdate 1.20.0", "status fleet"})
	got, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, updatesv1alpha1.PolicyBlocked); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Blocked %+v, want False", c)
	}
}

// TestAnEmptyBlockingPodsSelectorIsRefused: it would match every pod and
// hold the policy for good; the CRD refuses it, and an older CRD's policy is
// refused by the operator.
func TestAnEmptyBlockingPodsSelectorIsRefused(t *testing.T) {
	for name, gates := range map[string]*updatesv1alpha1.PolicyGates{
		"an empty anywhere":   {BlockingPods: &updatesv1alpha1.BlockingPods{Anywhere: &metav1.LabelSelector{}}},
		"an empty onNode":     {BlockingPods: &updatesv1alpha1.BlockingPods{OnNode: &metav1.LabelSelector{MatchLabels: map[string]string{}}}},
		"neither selector":    {BlockingPods: &updatesv1alpha1.BlockingPods{}},
		"an invalid operator": {BlockingPods: &updatesv1alpha1.BlockingPods{Anywhere: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}},
	} {
		p := fleet(func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.Gates = gates })
		if pol := parsePolicy(p, defaultOptions().Deadlines); pol.invalid == "" || !strings.Contains(pol.invalid, "spec.gates.blockingPods") {
			t.Errorf("%s: invalid %q, want a refusal naming spec.gates.blockingPods", name, pol.invalid)
		}
	}
	if pol := parsePolicy(fleet(blockingPods(backup, migration)), defaultOptions().Deadlines); pol.invalid != "" {
		t.Errorf("both selectors: refused: %s", pol.invalid)
	}
}
