package deploy_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const policyDir = "deploy/admission/mutating-taint-on-create/"

// The optional MutatingAdmissionPolicy adds the readiness taint to a Node at
// creation, keeps the taints the Node registers with, never adds a second
// copy, leaves excluded nodes alone, and does not touch later updates (the
// controller must be able to remove the taint).
//
// MutatingAdmissionPolicy is admissionregistration.k8s.io/v1 from Kubernetes
// v1.36; on an older API server (make test-compat) this test skips, by discovery.
func TestMutatingTaintOnCreate(t *testing.T) {
	testenv.SkipUnlessServed(t, admissionregistrationv1.SchemeGroupVersion.String(), "mutatingadmissionpolicies")
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)

	objs := render(t, policyDir)
	policy := find[*admissionregistrationv1.MutatingAdmissionPolicy](t, objs, "nodehealth-readiness-taint-on-create")
	binding := find[*admissionregistrationv1.MutatingAdmissionPolicyBinding](t, objs, "nodehealth-readiness-taint-on-create")
	if binding.Spec.PolicyName != policy.Name {
		t.Fatalf("binding names policy %q, want %q", binding.Spec.PolicyName, policy.Name)
	}
	if len(objs) != 2 {
		t.Errorf("%d objects in %s, want the policy and its binding", len(objs), policyDir)
	}

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, _ = kubectl(t, ctx, "delete", "-k", policyDir, "--ignore-not-found")
	})
	mustKubectl(t, ctx, "apply", "--server-side", "-k", policyDir)

	// The admission plugin learns about policies through an informer; probe
	// with dry-run creates until the policy acts.
	nodes := env.Client.CoreV1().Nodes()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := nodes.Create(ctx, framework.NewUnmanagedNode("mutating-probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return framework.ReadinessTaints(n, "") == 1, nil
	})
	if err != nil {
		t.Fatalf("the policy was not enforced: %v", err)
	}

	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	ours := corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoSchedule}
	bottlerocket := corev1.Taint{Key: taintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		taints  []corev1.Taint
		want    int            // readiness taints after creation
		keep    []corev1.Taint // taints that must still be there
		noValue bool           // the readiness taint has no value
	}{
		{name: "mutating-bare", want: 1, noValue: true},
		{name: "mutating-other-taint", taints: []corev1.Taint{other}, want: 1, keep: []corev1.Taint{other}, noValue: true},
		{name: "mutating-already-tainted", taints: []corev1.Taint{ours, other}, want: 1, keep: []corev1.Taint{ours, other}},
		{name: "mutating-bottlerocket", taints: []corev1.Taint{bottlerocket}, want: 1, keep: []corev1.Taint{bottlerocket}},
		{name: "mutating-excluded", labels: map[string]string{excludeLabel: "true"}, taints: []corev1.Taint{other}, want: 0, keep: []corev1.Taint{other}},
		{name: "mutating-exclude-false", labels: map[string]string{excludeLabel: "false"}, want: 1, noValue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := framework.NewUnmanagedNode(tc.name, tc.labels)
			node.Spec.Taints = tc.taints
			created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.DeleteNode(context.Background(), tc.name) })
			if got := framework.ReadinessTaints(created, ""); got != tc.want {
				t.Errorf("%d readiness taints, want %d: %v", got, tc.want, created.Spec.Taints)
			}
			for _, k := range tc.keep {
				if !slices.ContainsFunc(created.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&k) && t.Value == k.Value }) {
					t.Errorf("taint %s was lost: %v", k.ToString(), created.Spec.Taints)
				}
			}
			if tc.noValue {
				for _, taint := range created.Spec.Taints {
					if taint.Key == taintKey && (taint.Value != "" || taint.Effect != corev1.TaintEffectNoSchedule) {
						t.Errorf("added %s, want %s:NoSchedule", taint.ToString(), taintKey)
					}
				}
			}
			if tc.want == 1 {
				testUpdateLeftAlone(t, ctx, tc.name)
			}
		})
	}
}

// testUpdateLeftAlone removes the readiness taint the way the controller does
// (a merge patch of the whole list, guarded by resourceVersion): updates are
// not mutated, so it stays removed and the other taints stay.
func testUpdateLeftAlone(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	nodes := testenv.Env(t).Client.CoreV1().Nodes()
	var patched *corev1.Node
	var kept []corev1.Taint
	// Other controllers (node lifecycle) write new Nodes too: on a conflict,
	// read again and recompute, as nodehealth-controller does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept = []corev1.Taint{}
		for _, taint := range n.Spec.Taints {
			if taint.Key != taintKey {
				kept = append(kept, taint)
			}
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
			"spec":     map[string]any{"taints": kept},
		})
		if err != nil {
			return err
		}
		patched, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if framework.ReadinessTaints(patched, "") != 0 || len(patched.Spec.Taints) != len(kept) {
		t.Errorf("after removing the readiness taint: %v, want %v", patched.Spec.Taints, kept)
	}
}
