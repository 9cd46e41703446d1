package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	operatorName           = "update-operator"
	operatorServiceAccount = "system:serviceaccount:" + systemNamespace + ":" + operatorName
	operatorDir            = "deploy/update-operator/"
	shadowGroup            = "updates.nodehealth.io"
)

// renderOperator renders deploy/update-operator/ and decodes everything but
// the CRD (apiextensions is not in client-go's scheme), returning the CRD
// names separately.
func renderOperator(t *testing.T) ([]runtime.Object, []string) {
	t.Helper()
	out := mustKubectl(t, testenv.Context(t), "kustomize", operatorDir)
	var rest []string
	var crds []string
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "kind: CustomResourceDefinition") {
			var meta struct {
				Metadata struct{ Name string } `json:"metadata"`
			}
			if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&meta); err != nil {
				t.Fatal(err)
			}
			crds = append(crds, meta.Metadata.Name)
			continue
		}
		rest = append(rest, doc)
	}
	return decodeAll(t, strings.Join(rest, "\n---\n")), crds
}

func TestOperatorManifestsShape(t *testing.T) {
	objs, crds := renderOperator(t)
	if !slices.Equal(crds, []string{"bottlerocketshadows." + shadowGroup, "updatepolicies." + shadowGroup}) {
		t.Errorf("CRDs %v, want the BottlerocketShadow and UpdatePolicy CRDs", crds)
	}
	deploy := find[*appsv1.Deployment](t, objs, operatorName)
	if deploy.Namespace != systemNamespace || deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 {
		t.Errorf("Deployment %s/%s replicas %v, want 2 in %s", deploy.Namespace, deploy.Name, deploy.Spec.Replicas, systemNamespace)
	}
	pod := deploy.Spec.Template.Spec
	if pod.ServiceAccountName != operatorName {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == taintKey && tol.Operator == corev1.TolerationOpExists && tol.Effect == effect && tol.TolerationSeconds == nil
		}) {
			t.Errorf("the readiness taint %s:%s is not tolerated: %v", taintKey, effect, pod.Tolerations)
		}
	}
	pc := find[*schedulingv1.PriorityClass](t, objs, pod.PriorityClassName)
	if pc.Value <= 0 || pc.Value >= 1000000000 || pc.GlobalDefault {
		t.Errorf("PriorityClass %s value %d: want below the controller's nodehealth-critical", pc.Name, pc.Value)
	}
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, operatorName)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v", pdb.Spec.MaxUnavailable)
	}
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--config=/etc/nodehealth/config.yaml") ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}) {
		t.Errorf("container args %v env %v", c.Args, c.Env)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("root filesystem not read-only")
	}

	// The ConfigMap's configuration is accepted by the binary as is.
	cm := find[*corev1.ConfigMap](t, objs, "update-operator-config")
	path := filepath.Join(t.TempDir(), configFileName)
	if err := os.WriteFile(path, []byte(cm.Data[configFileName]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testenv.Context(t), "go", "run", "./cmd/update-operator", "--config", path, "--write-config-to", "-")
	cmd.Dir = repoPath(t)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "resourceName: update-operator") || !strings.Contains(string(out), "resourceNamespace: nodehealth-system") {
		t.Fatalf("update-operator --config: %v\n%s", err, out)
	}
}

// The operator applied the documented way: its ServiceAccount has exactly
// the permissions the operator uses: of Nodes only their status (the
// lifecycle conditions), no shadow status writes, and of pods only what the
// drain needs.
func TestTheDocumentedOperatorInstallGrantsExactlyThePermissionsTheOperatorUses(t *testing.T) {
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _, _ = kubectl(t, ctx, "delete", "-k", operatorDir, "--ignore-not-found", "--wait=false")
		_, _, _ = kubectl(t, ctx, "delete", "-k", "deploy/", "--ignore-not-found", "--wait=false")
	})
	mustKubectl(t, ctx, "apply", "--server-side", "-k", "deploy/")
	mustKubectl(t, ctx, "apply", "--server-side", "-k", operatorDir)
	mustKubectl(t, ctx, "apply", "--server-side", "-k", operatorDir)

	cluster := []rule{
		{shadowGroup, "bottlerocketshadows", "get", ""}, {shadowGroup, "bottlerocketshadows", "list", ""},
		{shadowGroup, "bottlerocketshadows", "watch", ""}, {shadowGroup, "bottlerocketshadows", "create", ""},
		{shadowGroup, "bottlerocketshadows", "update", ""}, {shadowGroup, "bottlerocketshadows", "delete", ""},
		{shadowGroup, "updatepolicies", "get", ""}, {shadowGroup, "updatepolicies", "list", ""},
		{shadowGroup, "updatepolicies", "watch", ""}, {shadowGroup, "updatepolicies/status", "update", ""},
		// A success is recorded with a merge patch of lastUpdateSucceeded.
		{shadowGroup, "updatepolicies/status", "patch", ""},
		{"", "nodes", "get", ""}, {"", "nodes", "list", ""}, {"", "nodes", "watch", ""},
		// The lifecycle conditions of the updates (KEP-5683).
		{"", "nodes/status", "patch", ""},
		// The drain before each reboot: one node's pods (a field
		// selector) and their evictions. No watch: no pod cache.
		{"", "pods", "list", ""}, {"", "pods/eviction", "create", ""},
		// The reviews of serving.metricsAuthentication Delegated.
		{"authentication.k8s.io", "tokenreviews", "create", ""}, {"authorization.k8s.io", "subjectaccessreviews", "create", ""},
	}
	const lease = "coordination.k8s.io"
	want := map[string][]rule{
		systemNamespace:         {{lease, "leases", "create", ""}, {lease, "leases", "get", operatorName}, {lease, "leases", "update", operatorName}},
		metav1.NamespaceDefault: {{"", "events", "create", ""}, {"", "events", "patch", ""}},
		leaseNamespace:          nil,
		metav1.NamespaceSystem:  nil,
		// UpdatePolicies' hooks: Jobs in the hooks' namespace only, through
		// an informer of that namespace; the operator deletes none.
		"nodehealth-update-hooks": {{"batch", "jobs", "create", ""}, {"batch", "jobs", "list", ""}, {"batch", "jobs", "watch", ""}},
	}
	baselineUser := "system:serviceaccount:" + systemNamespace + ":rbac-baseline"
	for ns, extra := range want {
		got := rulesIn(t, ctx, operatorServiceAccount, ns).Difference(rulesIn(t, ctx, baselineUser, ns))
		expected := sets.New(cluster...).Insert(extra...)
		if !got.Equal(expected) {
			t.Errorf("namespace %s:\n  granted but not needed: %v\n  needed but not granted: %v",
				ns, sortedRules(got.Difference(expected)), sortedRules(expected.Difference(got)))
		}
	}
	for _, denied := range [][]string{
		{"patch", "nodes"}, {"update", "nodes"}, {"update", "nodes", "--subresource=status"}, {"update", "bottlerocketshadows." + shadowGroup, "--subresource=status"},
		{"patch", "bottlerocketshadows." + shadowGroup, "--subresource=status"},
		{"watch", "pods"}, {"delete", "pods"},
		// A policy's spec is the users': the operator writes its status only.
		{"update", "updatepolicies." + shadowGroup}, {"patch", "updatepolicies." + shadowGroup},
	} {
		args := append([]string{"auth", "can-i"}, denied...)
		args = append(args, "--as="+operatorServiceAccount)
		if out, _, err := kubectl(t, ctx, args...); err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("can-i %v: %q, want no", denied, out)
		}
	}
	if _, err := framework.WaitFor(ctx, framework.NamedListWatch(testenv.Env(t).Client.AppsV1().RESTClient(), "deployments", systemNamespace, operatorName),
		func(d *appsv1.Deployment) bool { return d.Status.ObservedGeneration == d.Generation }); err != nil {
		t.Errorf("Deployment not observed: %v", err)
	}
}
