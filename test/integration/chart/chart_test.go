package chart_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	systemNamespace = "nodehealth-system"
	leaseNamespace  = "node-extension-lease"
	controllerName  = "nodehealth-controller"
	taintKey        = "nodehealth.io/not-ready"
	// The renders the chart's module checks against the chart (make verify):
	// every component on, and the default values.
	goldenRender  = "deploy/charts/test/testdata/full.yaml"
	defaultRender = "deploy/charts/test/testdata/default.yaml"
)

// prometheusOperatorGroup is the API group of ServiceMonitor and
// PrometheusRule: this control plane has no Prometheus Operator CRDs, so
// those objects are left out of the apply (the chart's module checks their
// render).
const prometheusOperatorGroup = "monitoring.coreos.com/"

// A first install changes nothing on any node: the default render (no
// extension rules, no admission policy) applied to the real control plane,
// and the controller running with its configuration and ServiceAccount, write
// no Node: no taint, no annotation, no condition, no field of any kind. (This
// test runs before the full render's, whose MutatingAdmissionPolicy would
// taint the nodes created here.)
func TestDefaultInstallWritesNoNode(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Nodes as a cluster has them before the install: two plain ones, one
	// with a label a rule could select, one unschedulable.
	before := map[string]*corev1.Node{}
	for i, name := range []string{"default-plain-a", "default-plain-b", "default-labelled", "default-cordoned"} {
		n := framework.NewKwokNode(name, map[string]string{"topology.kubernetes.io/zone": "zone-" + string(rune('a'+i))})
		if name == "default-labelled" {
			n.Labels["storage.example.com/ebs-csi"] = "true"
		}
		n.Spec.Unschedulable = name == "default-cordoned"
		created, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
		before[name] = created
	}

	applyRender(t, ctx, filepath.Join(root, defaultRender), false)

	cfg := renderedConfig(t, ctx)
	if rules, _ := cfg["extensionRules"].([]any); len(rules) != 0 {
		t.Fatalf("the default configuration has %d extension rules, want none", len(rules))
	}
	if served, err := env.ServesResource(ctx, "admissionregistration.k8s.io/v1", "mutatingadmissionpolicies"); err != nil {
		t.Fatal(err)
	} else if served {
		list, err := env.Client.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Fatalf("the default render installed the MutatingAdmissionPolicy %s", list.Items[0].Name)
		}
	}
	p := startController(t, ctx, cfg)

	// The controller is up: it leads and renews its canary through the
	// extension Lease namespace. Then it has had every node in its cache and
	// synced each one; give it a few more seconds to write anything it would.
	if _, err := env.WaitForLease(ctx, systemNamespace, controllerName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}); err != nil {
		t.Fatalf("leader election: %v\n%s", err, p.LogTail(30))
	}
	if _, err := env.WaitForLease(ctx, leaseNamespace, "nodehealth-controller-canary", func(l *coordinationv1.Lease) bool {
		return l.Spec.RenewTime != nil
	}); err != nil {
		t.Fatalf("canary: %v\n%s", err, p.LogTail(30))
	}
	// A node created while the controller runs is left alone too.
	late := framework.NewKwokNode("default-late", nil)
	created, err := env.Client.CoreV1().Nodes().Create(ctx, late, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteNode(context.Background(), "default-late") })
	before["default-late"] = created
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(10 * time.Second):
	}

	for name := range before {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// (The node lifecycle controller changes the node.kubernetes.io
		// taints of kwok nodes; only ours matter here.)
		if framework.HasReadinessTaint(n) {
			t.Errorf("node %s: readiness taint written: %v", name, n.Spec.Taints)
		}
		for k := range n.Annotations {
			if strings.Contains(k, "nodehealth.io") {
				t.Errorf("node %s: annotation %s=%q written", name, k, n.Annotations[k])
			}
		}
		if s := framework.ExtensionsReady(n); s != "" {
			t.Errorf("node %s: condition SystemExtensionsReady=%s written", name, s)
		}
		// No field at all: every writer of a Node is in its managedFields.
		for _, mf := range n.ManagedFields {
			if strings.Contains(mf.Manager, "nodehealth") {
				t.Errorf("node %s: the controller wrote %s (%s at %v)", name, mf.Subresource+" "+string(mf.Operation), mf.Manager, mf.Time)
			}
		}
	}
	checkNoForbidden(t, p)
}

// hookAnnotation marks the documents of Helm hooks in a render.
var hookAnnotation = regexp.MustCompile(`(?m)^    helm\.sh/hook: `)

// postInstallHook marks a hook that runs after the install (the
// UpdatePolicy the full values ask for).
var postInstallHook = regexp.MustCompile(`(?m)^    helm\.sh/hook: .*post-install`)

// The controller's metrics, as the chart configures them
// (serving.metricsAuthentication Delegated), are served over HTTPS to a
// bearer token the API server authenticates and allows get on /metrics (the
// chart's ClusterRole nodehealth-metrics-reader), and to nobody else; the
// health endpoint stays plain HTTP for the kubelet.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applyRender(t, ctx, filepath.Join(root, defaultRender), false)
	cfg := renderedConfig(t, ctx)
	serving, _ := cfg["serving"].(map[string]any)
	if serving["metricsAuthentication"] != "Delegated" {
		t.Fatalf("the chart's configuration serves metrics with %v, want Delegated", serving)
	}
	addrs := testenv.FreeLoopbackAddresses(t, 2)
	p := startControllerServing(t, ctx, cfg, map[string]any{
		"metricsBindAddress": addrs[0], "healthzBindAddress": addrs[1], "metricsAuthentication": "Delegated",
	})
	metricsURL := "https://" + addrs[0] + "/metrics"
	// The certificate is self-signed: scrapers check the caller, not it.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// Up: the plain health endpoint answers.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, _ := get("http://"+addrs[1]+"/healthz", "")
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("healthz: %v\n%s", err, p.LogTail(30))
	}
	if code, body := get("http://"+addrs[0]+"/metrics", ""); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the metrics port: %d, want 400 (it speaks HTTPS only)\n%s", code, body)
	}
	if code, body := get(metricsURL, ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape: %d, want 401\n%s", code, body)
	}
	if code, body := get(metricsURL, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("forged token: %d, want 401\n%s", code, body)
	}
	scraper, err := env.ClientForServiceAccount(ctx, "default", "metrics-scraper")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(metricsURL, scraper.Token); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the role: %d, want 403\n%s", code, body)
	}
	// Bound to the chart's reader role, the same token reads the metrics
	// (once the 403 above is no longer cached).
	_, err = env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodehealth-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "metrics-scraper", Namespace: "default"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), "test-metrics-scraper", metav1.DeleteOptions{})
	})
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		code, body = get(metricsURL, scraper.Token)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the reader's token: %d\n%s\n%s", code, body, p.LogTail(30))
	}
	if !strings.Contains(body, "nodehealth_") {
		t.Errorf("the metrics have no nodehealth_ series:\n%.500s", body)
	}
	checkNoForbidden(t, p)
}

// The chart refuses to install its update agent where Brupop is installed
// (its CRD exists): the two agents would drive the same nodes' API socket.
// helm's lookup needs a cluster, so this runs the helm CLI against the real
// control plane (helm template --dry-run=server: lookups, nothing created).
func TestAgentRefusedBesideBrupop(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "_output", "tools", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("this test runs helm: run `make helm` (make test-integration builds it first): %v", err)
	}
	if out, err := env.Kubectl(ctx, "create", "namespace", systemNamespace); err != nil && !strings.Contains(string(out), "AlreadyExists") {
		t.Fatalf("%v\n%s", err, out)
	}
	install := func(extra ...string) (string, error) {
		// helm template --dry-run=server: lookups against the cluster, and
		// no ownership checks of objects other tests applied.
		args := append([]string{"template", "brupop-check", filepath.Join(root, "deploy", "charts", "nodehealth"),
			"--namespace", systemNamespace, "--dry-run=server", "--kubeconfig", env.Kubeconfig,
			// The agent alone: other tests of this package apply the
			// controller's cluster-scoped objects without Helm's ownership.
			"--set", "controller.enabled=false", "--set", "extensionSecurity.enabled=false", "--set", "createNamespaces=false",
			"--set", "updateAgent.enabled=true"}, extra...)
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := install(); err != nil {
		t.Fatalf("without Brupop: %v\n%s", err, out)
	}
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bottlerocketshadows.brupop.bottlerocket.aws
spec:
  group: brupop.bottlerocket.aws
  names: {kind: BottlerocketShadow, plural: bottlerocketshadows, singular: bottlerocketshadow, shortNames: [brs]}
  scope: Namespaced
  versions:
  - name: v2
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
	path := filepath.Join(t.TempDir(), "brupop-crd.yaml")
	if err := os.WriteFile(path, []byte(crd), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = env.Kubectl(context.Background(), "delete", "-f", path, "--ignore-not-found") })
	out, err := install()
	if err == nil || !strings.Contains(out, "Brupop") || !strings.Contains(out, "allowBesideBrupop") {
		t.Errorf("beside Brupop the install was not refused with the reason: %v\n%s", err, out)
	}
	if out, err := install("--set", "updateAgent.allowBesideBrupop=true"); err != nil {
		t.Errorf("allowBesideBrupop=true: %v\n%s", err, out)
	}
	if out, err := install("--set", "updateAgent.enabled=false"); err != nil {
		t.Errorf("without the agent, beside Brupop: %v\n%s", err, out)
	}
}

func TestChartGatesAndUngatesNode(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applyRender(t, ctx, filepath.Join(root, goldenRender), true)

	// The MutatingAdmissionPolicy of the chart taints a Node at creation
	// (policies take effect asynchronously: retry until a fresh node is tainted).
	node := createTaintedNode(t, ctx)

	// The controller binary with the rendered configuration and the chart's
	// ServiceAccount's token.
	p := startController(t, ctx, renderedConfig(t, ctx))

	// Gated: the kube-proxy rule of the chart's configuration selects every
	// node and kube-proxy has no Lease on it, so the taint stays and the
	// condition says why.
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations["nodehealth.io/system-extensions"], "kube-proxy") &&
			framework.ExtensionsReady(n) == corev1.ConditionFalse && framework.HasReadinessTaint(n)
	}); err != nil {
		t.Fatalf("node %s was not gated on kube-proxy: %v\n%s", node, err, p.LogTail(40))
	}

	// kube-proxy's heartbeat renews its Lease on the node: ungated.
	kubeProxy, err := framework.StartExtensionRenewer(ctx, env.Client, framework.RenewerOptions{
		Namespace: leaseNamespace, Extension: "kube-proxy", Node: node, Holder: "kube-proxy-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubeProxy.Stop)
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return !framework.HasReadinessTaint(n) && framework.ExtensionsReady(n) == corev1.ConditionTrue
	}); err != nil {
		t.Fatalf("node %s was not ungated: %v\n%s", node, err, p.LogTail(40))
	}

	// kube-proxy's heartbeat releases its Lease (its probe failed): gated
	// again.
	if err := kubeProxy.Release(ctx, "ProbeFailed", "GET http://127.0.0.1:10256/healthz: connection refused"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return framework.HasReadinessTaint(n) && framework.ExtensionsReady(n) == corev1.ConditionFalse
	}); err != nil {
		t.Fatalf("node %s was not gated again after its Lease was released: %v\n%s", node, err, p.LogTail(40))
	}

	// helm uninstall: the pre-delete hook's command, run with the hook's
	// own ServiceAccount and RBAC, leaves no taint, annotation or condition
	// of ours, and no admission policy tainting new nodes.
	runUninstallHook(t, ctx, filepath.Join(root, goldenRender), p)
	checkNoForbidden(t, p)
	n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if framework.HasReadinessTaint(n) || framework.ExtensionsReady(n) != "" {
		t.Errorf("node %s after the uninstall hook: taints %v, condition %q", node, n.Spec.Taints, framework.ExtensionsReady(n))
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, "nodehealth.io/") {
			t.Errorf("node %s after the uninstall hook: annotation %s=%q", node, k, n.Annotations[k])
		}
	}
	if _, err := env.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, "nodehealth-readiness-taint-on-create", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the MutatingAdmissionPolicyBinding after the uninstall hook: %v", err)
	}
	if _, err := env.Client.CoordinationV1().Leases(leaseNamespace).Get(ctx, "nodehealth-controller-canary", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the canary Lease after the uninstall hook: %v", err)
	}
	// A node created now is not tainted: nothing of ours is left to gate it.
	late, err := env.Client.CoreV1().Nodes().Create(ctx, framework.NewKwokNode("chart-after-uninstall", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteNode(context.Background(), late.Name) })
	if framework.HasReadinessTaint(late) {
		t.Errorf("a node created after the uninstall hook was tainted: %v", late.Spec.Taints)
	}
}

// runUninstallHook does what helm uninstall does with the chart's pre-delete
// hook: it creates the hook's ServiceAccount and RBAC, and runs the Job's
// command (kwok runs no container: the binary built from this tree runs it)
// with a token of the Job's ServiceAccount. The controller process plays the
// Deployment's pods: it stops once the Deployment is scaled to 0.
func runUninstallHook(t *testing.T, ctx context.Context, render string, controller *framework.Process) {
	t.Helper()
	env := testenv.Env(t)
	data, err := os.ReadFile(render)
	if err != nil {
		t.Fatal(err)
	}
	var rbac []string
	var job *batchv1.Job
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if !hookAnnotation.MatchString(doc) || !strings.Contains(doc, "helm.sh/hook: pre-delete") {
			continue
		}
		if regexp.MustCompile(`(?m)^kind: Job$`).MatchString(doc) {
			job = &batchv1.Job{}
			if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(job); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rbac = append(rbac, doc)
	}
	if job == nil || len(rbac) == 0 {
		t.Fatalf("%s has no pre-delete hook Job and RBAC", render)
	}
	manifest := filepath.Join(t.TempDir(), "hook.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(rbac, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "--validate=strict", "--field-manager=helm", "-f", manifest); err != nil {
		t.Fatalf("applying the hook's RBAC: %v\n%s", err, out)
	}
	// The Job is valid for the API server too (dry run: kwok would
	// complete its pod without running anything).
	jobManifest, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(jobFile, jobManifest, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "create", "--dry-run=server", "-f", jobFile); err != nil {
		t.Fatalf("the hook Job: %v\n%s", err, out)
	}
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 || spec.ServiceAccountName == "" {
		t.Fatalf("hook Job: %d containers, ServiceAccount %q", len(spec.Containers), spec.ServiceAccountName)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == taintKey }) {
		t.Errorf("the hook Job does not tolerate %s: it could not run while every node is gated", taintKey)
	}
	args := append(slices.Clone(spec.Containers[0].Command), spec.Containers[0].Args...)
	args = append(args, "--kubeconfig", serviceAccountKubeconfig(t, ctx, spec.ServiceAccountName))

	// The Deployment's pods stop when it is scaled to 0: so does the process.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_, err := framework.WaitFor(ctx, framework.NamedListWatch(env.Client.AppsV1().RESTClient(), "deployments", systemNamespace, controllerName),
			func(d *appsv1.Deployment) bool { return d.Spec.Replicas != nil && *d.Spec.Replicas == 0 })
		if err == nil {
			_ = controller.Stop(10 * time.Second)
		}
	}()
	out, err := exec.CommandContext(ctx, testenv.Binary(t, controllerName), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("the uninstall hook's command %v: %v\n%s", args, err, out)
	}
	<-stopped
	t.Logf("the uninstall hook's command %v:\n%s", args, out)
}

// applyRender applies a golden render's objects, all but the Prometheus
// Operator's (this control plane has no such CRDs), as `helm install` would
// create them: strict server-side field validation.
func applyRender(t *testing.T, ctx context.Context, path string, wantMonitoring bool) {
	t.Helper()
	env := testenv.Env(t)
	render, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs, postInstall []string
	skipped := 0
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(render), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if regexp.MustCompile(`(?m)^apiVersion: ` + regexp.QuoteMeta(prometheusOperatorGroup)).MatchString(doc) {
			skipped++
			continue
		}
		// Hooks run only on their event: the UpdatePolicy's after the
		// install, once the release's objects (its CRDs among them)
		// exist; uninstallHook's on helm uninstall.
		if hookAnnotation.MatchString(doc) {
			if postInstallHook.MatchString(doc) {
				postInstall = append(postInstall, doc)
			}
			continue
		}
		docs = append(docs, doc)
	}
	if wantMonitoring && skipped == 0 {
		t.Errorf("%s has no ServiceMonitor/PrometheusRule: is monitoring still switched on in its values?", path)
	}
	manifest := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	// The release's namespace, which helm install --create-namespace creates.
	if out, err := env.Kubectl(ctx, "create", "namespace", systemNamespace); err != nil && !strings.Contains(string(out), "AlreadyExists") {
		t.Fatalf("%v\n%s", err, out)
	}
	// Namespaces the chart renders into but does not own: the example
	// sidecars' belong to the extensions' own installs (kube-system exists;
	// the logging agent's does not), and the dashboards' to Grafana's.
	if wantMonitoring {
		for _, ns := range []string{"observability", "monitoring"} {
			if out, err := env.Kubectl(ctx, "create", "namespace", ns); err != nil && !strings.Contains(string(out), "AlreadyExists") {
				t.Fatalf("%v\n%s", err, out)
			}
		}
	}
	// Server-side apply validates strictly: an unknown field is an error.
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "--validate=strict", "--field-manager=helm", "-f", manifest); err != nil {
		t.Fatalf("applying %s: %v\n%s", path, err, out)
	}
	if len(postInstall) > 0 {
		hooks := filepath.Join(t.TempDir(), "hooks.yaml")
		if err := os.WriteFile(hooks, []byte(strings.Join(postInstall, "\n---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "--server-side", "--validate=strict", "--field-manager=helm", "-f", hooks); err != nil {
			t.Fatalf("applying the post-install hooks of %s: %v\n%s", path, err, out)
		}
	}
	t.Logf("applied %d objects and %d post-install hooks of %s (%d Prometheus Operator objects left out)", len(docs), len(postInstall), filepath.Base(path), skipped)
}

// startController runs the controller binary with a rendered configuration
// and a token of the chart's ServiceAccount: what the Deployment's pods run.
func startController(t *testing.T, ctx context.Context, cfg map[string]any) *framework.Process {
	t.Helper()
	addr := testenv.FreeLoopbackAddresses(t, 1)[0]
	return startControllerServing(t, ctx, cfg, map[string]any{"metricsBindAddress": addr, "healthzBindAddress": addr})
}

// startControllerServing is startController with the given serving section.
func startControllerServing(t *testing.T, ctx context.Context, cfg, serving map[string]any) *framework.Process {
	t.Helper()
	env := testenv.Env(t)
	kubeconfig := serviceAccountKubeconfig(t, ctx, controllerName)
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	cfg["serving"] = serving
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The binary validates the rendered configuration up front: an invalid
	// one fails here with the controller's own message.
	bin := testenv.Binary(t, controllerName)
	if out, err := exec.CommandContext(ctx, bin, "--config", configPath, "--write-config-to", os.DevNull).CombinedOutput(); err != nil {
		t.Fatalf("nodehealth-controller rejects the chart's configuration: %v\n%s", err, out)
	}
	p, err := env.StartProcess(framework.ProcessSpec{Name: controllerName, Path: bin, Args: []string{"--config", configPath}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	return p
}

// checkNoForbidden stops the controller and fails on any request its
// ServiceAccount was denied.
func checkNoForbidden(t *testing.T, p *framework.Process) {
	t.Helper()
	if err := p.Stop(10 * time.Second); err != nil {
		t.Logf("stopping the controller: %v", err)
	}
	logData, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logData), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the chart's RBAC denied the controller something: %s", line)
		}
	}
}

// createTaintedNode creates kwok nodes until the chart's
// MutatingAdmissionPolicy taints one at creation, and returns its name.
func createTaintedNode(t *testing.T, ctx context.Context) string {
	t.Helper()
	env := testenv.Env(t)
	for i := 0; ; i++ {
		name := "chart-node-" + string(rune('a'+i))
		n, err := env.Client.CoreV1().Nodes().Create(ctx, framework.NewKwokNode(name, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
		if framework.HasReadinessTaint(n) {
			return name
		}
		if i == 20 {
			t.Fatalf("the chart's MutatingAdmissionPolicy did not taint a node at creation: %v", n.Spec.Taints)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// renderedConfig returns the configuration of the applied ConfigMap.
func renderedConfig(t *testing.T, ctx context.Context) map[string]any {
	t.Helper()
	cm, err := testenv.Env(t).Client.CoreV1().ConfigMaps(systemNamespace).Get(ctx, controllerName+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(cm.Data["config.yaml"]), 4096).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serviceAccountKubeconfig writes a kubeconfig with a token of one of the
// chart's ServiceAccounts in nodehealth-system: what its pods would use.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	env := testenv.Env(t)
	if _, err := env.Client.CoreV1().ServiceAccounts(systemNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's ServiceAccount: %v", err)
	}
	sa, err := env.ClientForServiceAccount(ctx, systemNamespace, name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	err = clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: env.APIServerURL, CertificateAuthority: env.CAFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"sa": {Token: sa.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"sa": {Cluster: "local", AuthInfo: "sa"}},
		CurrentContext: "sa",
	}, path)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
