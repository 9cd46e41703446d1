package extensions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/kubectlplugin"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// nodehealth runs the built kubectl-nodehealth binary as the admin.
func nodehealth(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	return command(t, ctx, testenv.Binary(t, "kubectl-nodehealth"), append([]string{"--kubeconfig=" + testenv.Env(t).Kubeconfig}, args...)...)
}

func mustNodehealth(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	stdout, stderr, err := nodehealth(t, ctx, args...)
	if err != nil {
		t.Fatalf("kubectl-nodehealth %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

func annotation(t *testing.T, node string) string {
	t.Helper()
	n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(testenv.Context(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
}

func setAnnotation(t *testing.T, node, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{nodev1alpha1.SystemExtensionsAnnotation: value}}})
	if _, err := testenv.Env(t).Client.CoreV1().Nodes().Patch(testenv.Context(t), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestPluginRegisterUnregister(t *testing.T) {
	installSecurity(t) // the Lease namespace
	ctx := testenv.Context(t)
	node := createNode(t, "plugin-reg")

	out := mustNodehealth(t, ctx, "register", node, "kube-proxy")
	if out != `node/plugin-reg: extension "kube-proxy" registered`+"\n" {
		t.Errorf("register output %q", out)
	}
	out = mustNodehealth(t, ctx, "register", node, "kube-proxy")
	if !strings.Contains(out, "already registered (no change)") {
		t.Errorf("second register output %q", out)
	}
	mustNodehealth(t, ctx, "register", node, "gpu", "--affects-readiness=false")
	mustNodehealth(t, ctx, "register", node, "cni", "--lease", leaseNamespace+"/cilium."+node)
	want := `[{"name":"cni","lease":{"namespace":"node-extension-lease","name":"cilium.plugin-reg"}},{"name":"gpu","affectsReadiness":false},{"name":"kube-proxy"}]`
	if got := annotation(t, node); got != want {
		t.Errorf("annotation = %s, want %s", got, want)
	}

	out = mustNodehealth(t, ctx, "unregister", node, "gpu")
	if !strings.Contains(out, `extension "gpu" unregistered`) {
		t.Errorf("unregister output %q", out)
	}
	out = mustNodehealth(t, ctx, "unregister", node, "gpu")
	if !strings.Contains(out, "not registered (no change)") {
		t.Errorf("second unregister output %q", out)
	}

	// Entries the controller manages are refused without --force.
	setAnnotation(t, node, `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`)
	_, stderr, err := nodehealth(t, ctx, "unregister", node, "kube-proxy")
	if err == nil || !strings.Contains(stderr, `error: refused: node/plugin-reg: extension "kube-proxy" is managed by the controller's rule "kube-proxy"`) {
		t.Errorf("unregister of a rule entry: err %v, stderr %q", err, stderr)
	}
	if got := annotation(t, node); got != `[{"name":"kube-proxy","source":"rule/kube-proxy"}]` {
		t.Errorf("a refused unregister changed the annotation to %s", got)
	}

	// A list that cannot be parsed is never rewritten, even with --force.
	broken := `[{"name":"kube-proxy"},{"name":"kube-proxy"}]`
	setAnnotation(t, node, broken)
	_, stderr, err = nodehealth(t, ctx, "register", node, "gpu", "--force")
	if err == nil || !strings.Contains(stderr, "refusing to rewrite an annotation that cannot be parsed") || !strings.Contains(stderr, "Duplicate value") {
		t.Errorf("register on a broken list: err %v, stderr %q", err, stderr)
	}
	if got := annotation(t, node); got != broken {
		t.Errorf("a refused register changed the annotation to %s", got)
	}

	// The last entry out removes the annotation.
	setAnnotation(t, node, `[{"name":"gpu"}]`)
	mustNodehealth(t, ctx, "unregister", node, "gpu")
	if got := annotation(t, node); got != "" {
		t.Errorf("annotation after the last unregister = %q, want none", got)
	}
}

// Two kubectl-nodehealth processes registering different extensions on the
// same node at the same moment: both entries survive. Repeated, so that the
// processes really overlap at least in some rounds.
func TestPluginConcurrentRegisterProcesses(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	node := createNode(t, "plugin-race-proc")
	const rounds = 5
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stdout, stderr, err := nodehealth(t, ctx, "register", node, fmt.Sprintf("ext-%d-%d", round, i))
				if err != nil {
					errs[i] = fmt.Errorf("%v\n%s%s", err, stdout, stderr)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(annotation(t, node), leaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2*rounds {
		t.Errorf("got %d entries, want %d: %v", len(list), 2*rounds, list)
	}
}

// Many in-process registers racing through the real API server: the
// resourceVersion guard turns every lost race into a 409 and a retry.
func TestPluginConcurrentRegisterGoroutines(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	node := createNode(t, "plugin-race-go")
	const writers = 6
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, writers)
	outs := make([]string, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			o := kubectlplugin.NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
			o.NewClient = func() (kubernetes.Interface, error) { return kubernetes.NewForConfig(testenv.Env(t).Config) }
			cmd := kubectlplugin.NewCommandWithOptions(o)
			cmd.SetArgs([]string{"register", node, fmt.Sprintf("ext-%d", i)})
			<-start
			errs[i] = cmd.ExecuteContext(ctx)
			outs[i] = out.String()
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
		if !strings.Contains(outs[i], "registered") {
			t.Errorf("writer %d output %q", i, outs[i])
		}
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(annotation(t, node), leaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != writers {
		t.Errorf("got %d entries, want %d: %v", len(list), writers, list)
	}
}

func TestPluginStatusAndExplain(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	node := createNode(t, "plugin-status")
	setAnnotation(t, node, `[{"name":"gpu","affectsReadiness":false},{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"logs"}]`)

	// What the controller would have written: the taint and the condition.
	// kwok writes the node too, so the read-modify-write retries on conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule})
		_, err = env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cond, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: corev1.ConditionFalse, Reason: "ExtensionsNotReady",
		Message:            "A required system extension is not ready. Not ready: logs (LeaseReleased: released, reason ProbeFailed).",
		LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now(),
	}}}})
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, cond, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	// kube-proxy renews; logs released its Lease; gpu has none.
	leases := env.Client.CoordinationV1().Leases(leaseNamespace)
	if _, err := leases.Create(ctx, newLease("kube-proxy."+node, "kube-proxy-abcde"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	released := newLease("logs."+node, "")
	released.Annotations = map[string]string{nodev1alpha1.ReasonAnnotation: "ProbeFailed", nodev1alpha1.MessageAnnotation: "GET http://127.0.0.1:2020/api/v1/health: 500"}
	if _, err := leases.Create(ctx, released, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deleteLease(t, "kube-proxy."+node)
		deleteLease(t, "logs."+node)
	})

	out := mustNodehealth(t, ctx, "status", node)
	t.Logf("status:\n%s", out)
	for _, want := range []string{
		"node/plugin-status: gated (taint nodehealth.io/not-ready:NoSchedule); SystemExtensionsReady=False (ExtensionsNotReady)",
		"EXTENSION AFFECTS READINESS SOURCE LEASE HOLDER LAST RENEWAL STATE REASON",
		"gpu false manual gpu.plugin-status <none> <none> LeaseMissing <none>",
		"kube-proxy true rule/kube-proxy kube-proxy.plugin-status kube-proxy-abcde",
		"Ready <none>",
		"logs true manual logs.plugin-status <none>",
		"LeaseReleased ProbeFailed",
	} {
		// Column widths depend on the content; compare words.
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("status lacks %q", want)
		}
	}

	var report kubectlplugin.StatusReport
	if err := json.Unmarshal([]byte(mustNodehealth(t, ctx, "status", node, "-o", "json")), &report); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range report.Nodes[0].Extensions {
		states[e.Name] = e.State
	}
	if states["gpu"] != kubectlplugin.StateLeaseMissing || states["kube-proxy"] != kubectlplugin.StateReady || states["logs"] != kubectlplugin.StateLeaseReleased || !report.Nodes[0].Gated {
		t.Errorf("json report: gated %v, states %v", report.Nodes[0].Gated, states)
	}
	yamlOut := mustNodehealth(t, ctx, "status", node, "-o", "yaml")
	t.Logf("status -o yaml:\n%s", yamlOut)
	if !strings.Contains(yamlOut, "state: LeaseReleased") {
		t.Errorf("yaml output:\n%s", yamlOut)
	}
	wide := mustNodehealth(t, ctx, "status", node, "-o", "wide")
	t.Logf("status -o wide:\n%s", wide)
	if !strings.Contains(wide, "GET http://127.0.0.1:2020/api/v1/health: 500") ||
		!strings.Contains(wide, leaseNamespace+"/logs."+node) {
		t.Errorf("wide output lacks the message or the full Lease:\n%s", wide)
	}
	// Every node, when none is named.
	if all := mustNodehealth(t, ctx, "status"); !strings.Contains(all, "node/plugin-status: gated") {
		t.Errorf("status of all nodes lacks plugin-status:\n%s", all)
	}

	out = mustNodehealth(t, ctx, "explain", node)
	t.Logf("explain:\n%s", out)
	for _, want := range []string{
		"Node plugin-status is gated: it carries the readiness taint nodehealth.io/not-ready:NoSchedule",
		"reason ExtensionsNotReady: a required extension stopped being ready",
		"It requires 2 extensions that affect readiness: kube-proxy (from rule kube-proxy), logs (registered by hand).",
		"logs (registered by hand) is not ready: its Lease node-extension-lease/logs.plugin-status was released with reason ProbeFailed",
		"gpu (registered by hand) is not ready: its Lease node-extension-lease/gpu.plugin-status does not exist",
		"The other is ready (last renewals: kube-proxy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q", want)
		}
	}

	_, stderr, err := nodehealth(t, ctx, "status", "no-such-node")
	if err == nil || !strings.Contains(stderr, `nodes "no-such-node" not found`) {
		t.Errorf("status of a missing node: %v %q", err, stderr)
	}
}

// --context and --kubeconfig come from kubectl's own flags: the plugin follows
// a named context of a kubeconfig whose current context is unusable.
func TestPluginContextFlag(t *testing.T) {
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	good := cfg.CurrentContext
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: cfg.Contexts[good].AuthInfo}
	cfg.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	node := createNode(t, "plugin-context")
	bin := testenv.Binary(t, "kubectl-nodehealth")
	shortCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := command(t, shortCtx, bin, "--kubeconfig", path, "--request-timeout=5s", "status", node); err == nil {
		t.Errorf("the broken current context worked")
	}
	stdout, stderr, err := command(t, ctx, bin, "--kubeconfig", path, "--context", good, "status", node)
	if err != nil || !strings.Contains(stdout, "node/plugin-context: not gated") {
		t.Errorf("--context %s: %v\n%s%s", good, err, stdout, stderr)
	}
}
