package chart_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	systemNamespace = "nodehealth-system"
	leaseNamespace  = "node-extension-lease"
	controllerName  = "nodehealth-controller"
	taintKey        = "nodehealth.io/not-ready"
	// The render the chart's module checks against the chart (make verify).
	goldenRender = "deploy/charts/test/testdata/full.yaml"
)

// prometheusOperatorGroup is the API group of ServiceMonitor and
// PrometheusRule: this control plane has no Prometheus Operator CRDs, so
// those objects are left out of the apply (the chart's module checks their
// render).
const prometheusOperatorGroup = "monitoring.coreos.com/"

func TestChartGatesAndUngatesNode(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	render, err := os.ReadFile(filepath.Join(root, goldenRender))
	if err != nil {
		t.Fatal(err)
	}

	// Every object but the Prometheus Operator's, applied as `helm install`
	// would create them (strict server-side field validation).
	// Hooks (the UpdatePolicy) are applied after the rest, as Helm runs
	// post-install hooks once the release's objects, its CRDs among them,
	// exist.
	var docs, hooks []string
	skipped := 0
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(render), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if regexp.MustCompile(`(?m)^apiVersion: ` + regexp.QuoteMeta(prometheusOperatorGroup)).MatchString(doc) {
			skipped++
			continue
		}
		if strings.Contains(doc, "# Hook: ") {
			hooks = append(hooks, doc)
			continue
		}
		docs = append(docs, doc)
	}
	if skipped == 0 {
		t.Errorf("the full render has no ServiceMonitor/PrometheusRule: is monitoring still switched on in full-values.yaml?")
	}
	manifest := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	// Namespaces the chart renders into but does not own: the example
	// sidecars' belong to the extensions' own installs (kube-system exists;
	// the logging agent's does not), and the dashboards' to Grafana's.
	for _, ns := range []string{"observability", "monitoring"} {
		if out, err := env.Kubectl(ctx, "create", "namespace", ns); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// Server-side apply validates strictly: an unknown field is an error.
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "--validate=strict", "--field-manager=helm", "-f", manifest); err != nil {
		t.Fatalf("applying the chart's render: %v\n%s", err, out)
	}
	if len(hooks) > 0 {
		hookManifest := filepath.Join(t.TempDir(), "hooks.yaml")
		if err := os.WriteFile(hookManifest, []byte(strings.Join(hooks, "\n---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "--server-side", "--validate=strict", "--field-manager=helm", "-f", hookManifest); err != nil {
			t.Fatalf("applying the chart's hooks: %v\n%s", err, out)
		}
	}
	t.Logf("applied %d objects and %d hooks of the chart's full render (%d Prometheus Operator objects left out)", len(docs), len(hooks), skipped)

	// The MutatingAdmissionPolicy of the chart taints a Node at creation
	// (policies take effect asynchronously: retry until a fresh node is tainted).
	node := createTaintedNode(t, ctx)

	// The controller binary with the rendered configuration and the chart's
	// ServiceAccount's token.
	cfg := renderedConfig(t, ctx)
	kubeconfig := serviceAccountKubeconfig(t, ctx)
	addr := testenv.FreeLoopbackAddresses(t, 1)[0]
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	cfg["serving"] = map[string]any{"metricsBindAddress": addr, "healthzBindAddress": addr}
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
	bin := controllerBinary(t)
	if out, err := exec.CommandContext(ctx, bin, "--config", configPath, "--write-config-to", os.DevNull).CombinedOutput(); err != nil {
		t.Fatalf("nodehealth-controller rejects the chart's configuration: %v\n%s", err, out)
	}
	p, err := env.StartProcess(framework.ProcessSpec{Name: controllerName, Path: bin, Args: []string{"--config", configPath}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })

	// Gated: the kube-proxy rule of the chart's configuration selects every
	// node and kube-proxy has no Lease on it, so the taint stays and the
	// condition says why.
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations["nodehealth.io/system-extensions"], "kube-proxy") &&
			conditionStatus(n) == corev1.ConditionFalse && hasReadinessTaint(n)
	}); err != nil {
		t.Fatalf("node %s was not gated on kube-proxy: %v\n%s", node, err, p.LogTail(40))
	}

	// kube-proxy renews its Lease on the node: ungated.
	now := metav1.NewMicroTime(time.Now())
	_, err = env.Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy." + node},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kube-proxy-test"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return !hasReadinessTaint(n) && conditionStatus(n) == corev1.ConditionTrue
	}); err != nil {
		t.Fatalf("node %s was not ungated: %v\n%s", node, err, p.LogTail(40))
	}

	// kube-proxy releases its Lease (what a heartbeat does when its probe
	// fails or it stops): gated again.
	lease, err := env.Client.CoordinationV1().Leases(leaseNamespace).Get(ctx, "kube-proxy."+node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = nil
	if _, err := env.Client.CoordinationV1().Leases(leaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForNode(ctx, node, func(n *corev1.Node) bool {
		return hasReadinessTaint(n) && conditionStatus(n) == corev1.ConditionFalse
	}); err != nil {
		t.Fatalf("node %s was not gated again after its Lease was released: %v\n%s", node, err, p.LogTail(40))
	}

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
		if hasReadinessTaint(n) {
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

// serviceAccountKubeconfig writes a kubeconfig with a token of the chart's
// controller ServiceAccount: what the Deployment's pods would use.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context) string {
	t.Helper()
	env := testenv.Env(t)
	if _, err := env.Client.CoreV1().ServiceAccounts(systemNamespace).Get(ctx, controllerName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's ServiceAccount: %v", err)
	}
	sa, err := env.ClientForServiceAccount(ctx, systemNamespace, controllerName)
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

// controllerBinary builds nodehealth-controller from the working tree, so
// that a stale _output/bin never makes the test pass.
func controllerBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := framework.BuildCommands(testenv.ContextWithTimeout(t, 10*time.Minute), dir, "./cmd/"+controllerName); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, controllerName)
}

func hasReadinessTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintKey })
}

func conditionStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == "SystemExtensionsReady" {
			return c.Status
		}
	}
	return ""
}
