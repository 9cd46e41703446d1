package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Extras the apiserver adds to a service-account user whose token is bound to a pod.
const (
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraNodeUID  = "authentication.kubernetes.io/node-uid"
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraPodUID   = "authentication.kubernetes.io/pod-uid"
)

// warningRecorder collects the apiserver's warning headers (HTTP 299).
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warnings)
}

// The KEP's Node.spec.systemExtensions does not exist in v1.37, which is why nodehealth
// keeps the list in an annotation: a real apiserver prunes the field and warns.
func TestUnknownNodeFieldIsDroppedWithWarning(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)

	rec := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rec
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	const name = "unknown-field-node"
	t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"spec":{"systemExtensions":[{"name":"cni"}]}}`, name)
	created, err := client.CoreV1().RESTClient().Post().Resource("nodes").
		SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").
		// Do, not DoRaw: DoRaw never passes warning headers to the WarningHandler.
		Body([]byte(body)).Do(ctx).Raw()
	if err != nil {
		t.Fatalf("creating node with an unknown field: %v", err)
	}

	warnings := rec.all()
	if !slices.ContainsFunc(warnings, func(w string) bool {
		return strings.Contains(w, "unknown field") && strings.Contains(w, "spec.systemExtensions")
	}) {
		t.Errorf(`warnings = %q, want one about unknown field "spec.systemExtensions"`, warnings)
	}
	stored, err := client.CoreV1().RESTClient().Get().Resource("nodes").Name(name).
		SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	for what, raw := range map[string][]byte{"create response": created, "stored node": stored} {
		if strings.Contains(string(raw), "systemExtensions") {
			t.Errorf("%s still has spec.systemExtensions: %s", what, raw)
		}
	}
}

func TestRBACDeniesUnprivilegedServiceAccount(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "rbac")

	sa, err := env.ClientForServiceAccount(ctx, ns, "unprivileged")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sa.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing nodes as an unprivileged ServiceAccount: err = %v, want 403 Forbidden", err)
	}
	if want := fmt.Sprintf("system:serviceaccount:%s:unprivileged", ns); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the user %q", err, want)
	}
	// The token itself is valid (authentication succeeds); only authorization says no.
	if _, err := sa.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		t.Errorf("SelfSubjectReview with the same token: %v", err)
	}
}

func TestPodBoundTokenCarriesNodeName(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "token")
	node := testenv.CreateNode(t, "n1", nil)

	bound, err := env.ClientForPodServiceAccount(ctx, ns, "agent", "agent-n1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	review, err := bound.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo
	if want := fmt.Sprintf("system:serviceaccount:%s:agent", ns); user.Username != want {
		t.Errorf("username = %q, want %q", user.Username, want)
	}
	for key, want := range map[string]string{
		extraNodeName: "n1",
		extraNodeUID:  string(node.UID),
		extraPodName:  "agent-n1",
		extraPodUID:   string(bound.Pod.UID),
	} {
		if got := user.Extra[key]; !slices.Equal(got, authenticationv1.ExtraValue{want}) {
			t.Errorf("extra %s = %q, want [%q]", key, got, want)
		}
	}

	// A token bound to nothing carries no node.
	unbound, err := env.ClientForServiceAccount(ctx, ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	review, err = unbound.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := review.Status.UserInfo.Extra[extraNodeName]; ok {
		t.Errorf("unbound token has extra %s = %q, want none", extraNodeName, got)
	}
}

// nodehealth's extension Leases may be owned by their Node; the garbage collector must
// remove them when the Node goes.
func TestObjectsOwnedByNodeAreGarbageCollected(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "gc")
	node := testenv.CreateNode(t, "gc-owner", nil)

	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	lease, err := env.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "cni.gc-owner", OwnerReferences: owner},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("cni"), LeaseDurationSeconds: ptr.To[int32](40)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owned-by-node", OwnerReferences: owner},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := env.DeleteNode(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForDeletion[*coordinationv1.Lease](ctx,
		framework.NamedListWatch(env.Client.CoordinationV1().RESTClient(), "leases", ns, lease.Name), ns, lease.Name); err != nil {
		t.Fatalf("Lease owned by a deleted Node was not garbage-collected: %v", err)
	}
	if err := framework.WaitForDeletion[*corev1.ConfigMap](ctx,
		framework.NamedListWatch(env.Client.CoreV1().RESTClient(), "configmaps", ns, "owned-by-node"), ns, "owned-by-node"); err != nil {
		t.Fatalf("ConfigMap owned by a deleted Node was not garbage-collected: %v", err)
	}
}

// nodehealth escalates to eviction, which a PodDisruptionBudget must be able to stop:
// that only works when disruption-controller fills the PDB's status.
func TestPodDisruptionBudgetStatusAndEviction(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "pdb")
	testenv.CreateReadyNode(t, "pdb-node", nil)

	labels := map[string]string{"app": "guarded"}
	var pods []string
	for i := range 3 {
		p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guarded-%d", i), Labels: labels},
			Spec: corev1.PodSpec{
				NodeName:   "pdb-node",
				Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}
	for _, p := range pods {
		testenv.WaitForPod(t, ns, p, framework.PodRunning)
	}

	pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = framework.WaitFor(ctx, framework.NamedListWatch(env.Client.PolicyV1().RESTClient(), "poddisruptionbudgets", ns, pdb.Name),
		func(p *policyv1.PodDisruptionBudget) bool {
			s := p.Status
			return s.ObservedGeneration == p.Generation && s.ExpectedPods == 3 && s.CurrentHealthy == 3 &&
				s.DesiredHealthy == 2 && s.DisruptionsAllowed == 1
		})
	if err != nil {
		t.Fatalf("PodDisruptionBudget status never matched 3 running pods: %v", err)
	}

	evict := func(pod string) error {
		return env.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
	}
	if err := evict(pods[0]); err != nil {
		t.Fatalf("first eviction (1 disruption allowed): %v", err)
	}
	if err := evict(pods[1]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: err = %v, want 429 TooManyRequests from the PodDisruptionBudget", err)
	}
}

func TestSchedulerPlacesPodOnKwokNode(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "sched")
	// A pool label only this test uses, so the pod cannot land on another test's node.
	pool := map[string]string{"test.nodehealth.io/pool": "sched"}
	testenv.CreateReadyNode(t, "sched-node", pool)

	pod, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduled"},
		Spec: corev1.PodSpec{
			NodeSelector: pool,
			Containers:   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod = testenv.WaitForPod(t, ns, pod.Name, framework.PodRunning)
	if pod.Spec.NodeName != "sched-node" {
		t.Errorf("pod runs on %q, want sched-node", pod.Spec.NodeName)
	}
	if !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue
	}) {
		t.Errorf("pod has no PodScheduled=True condition: %v", pod.Status.Conditions)
	}
}

// kwok must behave like a kubelet where nodehealth looks: Ready condition, the
// not-ready taint removed by node-lifecycle-controller, a renewing Lease in
// kube-node-lease, and a bootID that stays what it was set to.
func TestKwokNodeBecomesReadyAndRenewsLease(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	const name = "lease-node"
	node := testenv.CreateReadyNode(t, name, nil)

	lease, err := env.WaitForLease(ctx, corev1.NamespaceNodeLease, name, func(l *coordinationv1.Lease) bool {
		return l.Spec.RenewTime != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Like the kubelet's, the Lease is owned by its Node and lasts 40s. Unlike the
	// kubelet's, its holderIdentity is kwok's own controller ID, not the node name.
	if got := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); got != 40 {
		t.Errorf("lease duration = %ds, want 40s", got)
	}
	if !slices.ContainsFunc(lease.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "Node" && o.Name == name && o.UID == node.UID
	}) {
		t.Errorf("lease ownerReferences = %v, want the Node %s", lease.OwnerReferences, name)
	}

	if _, err := env.SetBootID(ctx, name, "boot-1"); err != nil {
		t.Fatal(err)
	}
	first := lease.Spec.RenewTime.Time
	renewed, err := env.WaitForLease(ctx, corev1.NamespaceNodeLease, name, func(l *coordinationv1.Lease) bool {
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first)
	})
	if err != nil {
		t.Fatalf("node Lease was not renewed: %v", err)
	}
	t.Logf("lease renewed after %s", renewed.Spec.RenewTime.Sub(first).Round(time.Millisecond))

	node, err = env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.BootID; got != "boot-1" {
		t.Errorf("bootID after a lease renewal = %q, want boot-1 (kwok overwrote it)", got)
	}
	if !framework.NodeSchedulable(node) {
		t.Errorf("node not schedulable after SetBootID: %s", node.Spec.Taints)
	}
}

func TestKubectlVersionIsV1371(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)

	cmd := exec.CommandContext(ctx, env.Binary(framework.Kubectl), "version", "--output=json", "--kubeconfig="+env.Kubeconfig)
	cmd.Env = []string{"HOME=" + t.TempDir()} // no ~/.kube of the developer's
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("parsing kubectl version output: %v\n%s", err, out)
	}
	if v.ClientVersion.GitVersion != "v1.37.1" || v.ServerVersion.GitVersion != "v1.37.1" {
		t.Errorf("client %q, server %q; want v1.37.1 for both", v.ClientVersion.GitVersion, v.ServerVersion.GitVersion)
	}
}

// nodehealth ships Validating and Mutating AdmissionPolicies; both must be served as
// admissionregistration.k8s.io/v1 and enforced.
func TestAdmissionPoliciesAreEnforced(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	ns := testenv.NewNamespace(t, "policy")

	resources, err := env.Client.Discovery().ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			t.Errorf("admissionregistration.k8s.io/v1 does not serve %s", want)
		}
	}

	configMaps := &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}}},
	}
	policyName := "deny-forbidden-" + ns
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: configMaps,
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.data) || !('forbidden' in object.data)`,
				Message:    "the forbidden key is forbidden",
			}},
		},
	}
	vapBinding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    configMaps,
		},
	}
	mapName := "label-" + ns
	mutating := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: mapName},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			MatchConstraints:   configMaps,
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"nodehealth.io/mutated": "true"}}}`,
				},
			}},
		},
	}
	mapBinding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: mapName},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: mapName, MatchResources: configMaps},
	}
	ar := env.Client.AdmissionregistrationV1()
	// Register cleanup first: a failed create still leaves the earlier objects behind.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, metav1.DeleteOptions{})
		_ = ar.ValidatingAdmissionPolicies().Delete(ctx, policyName, metav1.DeleteOptions{})
		_ = ar.MutatingAdmissionPolicyBindings().Delete(ctx, mapName, metav1.DeleteOptions{})
		_ = ar.MutatingAdmissionPolicies().Delete(ctx, mapName, metav1.DeleteOptions{})
	})
	_, err = ar.ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{})
	if err == nil {
		_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, vapBinding, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = ar.MutatingAdmissionPolicies().Create(ctx, mutating, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = ar.MutatingAdmissionPolicyBindings().Create(ctx, mapBinding, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("creating admission policies: %v", err)
	}

	// The admission plugins learn about new policies through informers; there is no
	// API that says "now enforced", so probe with dry-run requests until both act.
	cms := env.Client.CoreV1().ConfigMaps(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, denyErr := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}, Data: map[string]string{"forbidden": "x"},
		}, dryRun)
		allowed, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, dryRun)
		if err != nil {
			return false, err
		}
		denied := denyErr != nil && strings.Contains(denyErr.Error(), "the forbidden key is forbidden")
		return denied && allowed.Labels["nodehealth.io/mutated"] == "true", nil
	})
	if err != nil {
		t.Fatalf("admission policies were not enforced: %v", err)
	}
}

// ServesResource, which compat tests skip on, answers from discovery for the
// core group, a named group, a resource a served group lacks and a group the
// server does not serve at all.
func TestServesResourceAnswersFromDiscovery(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	for _, tc := range []struct {
		groupVersion, resource string
		want                   bool
	}{
		{"v1", "nodes", true},
		{"coordination.k8s.io/v1", "leases", true},
		{"admissionregistration.k8s.io/v1", "validatingadmissionpolicies", true},
		{"coordination.k8s.io/v1", "no-such-resource", false},
		{"v1", "no-such-resource", false},
		{"no-such-group.nodehealth.io/v1", "leases", false},
	} {
		got, err := env.ServesResource(ctx, tc.groupVersion, tc.resource)
		if err != nil {
			t.Errorf("ServesResource(%s, %s): %v", tc.groupVersion, tc.resource, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ServesResource(%s, %s) = %v, want %v", tc.groupVersion, tc.resource, got, tc.want)
		}
	}
}
