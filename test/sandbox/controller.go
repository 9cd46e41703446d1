package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
)

// Sandbox settings of the node-health controller: short durations, so that everything
// a user tries shows within seconds.
const (
	// controllerNamespace holds the controller's leader-election Lease.
	controllerNamespace = "nodehealth-system"
	// sandboxLeaseSeconds and sandboxRenewEvery are the extension Leases' duration and
	// renewal interval (production defaults: 40s and 10s).
	sandboxLeaseSeconds = 10
	sandboxRenewEvery   = 3 * time.Second
	// sandboxRenewalGrace is the controller's renewalGrace (default 10s): an extension
	// that stops renewing is not ready sandboxLeaseSeconds + 5s after its last renewal.
	sandboxRenewalGrace = 5 * time.Second
)

// sandboxExtensions are the extensions every sandbox node requires, with how long each
// takes to come back after a simulated reboot.
var sandboxExtensions = []renewerExtension{
	{name: "kube-proxy", rebootDelay: 4 * time.Second},
	{name: "cni", rebootDelay: 10 * time.Second},
}

// controllerComponent runs the real nodehealth-controller binary against the sandbox,
// with rules that make every node require the sandbox extensions, and simulates those
// extensions with in-process Lease renewers (see renewers.go).
type controllerComponent struct {
	configPath  string
	metricsURL  string
	healthzURL  string
	logPath     string
	controlDirs controlDirs
	nodes       []string
}

func (c *controllerComponent) Name() string { return "node-health controller" }

// DecorateNode registers every sandbox node with the readiness taint, as kubelet's
// registerWithTaints (or the MutatingAdmissionPolicy in deploy/) does in a real cluster,
// so that a node is gated from its first moment until its extensions have renewed.
func (c *controllerComponent) DecorateNode(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule})
}

func (c *controllerComponent) Start(ctx context.Context, env *Env) error {
	c.nodes = env.Nodes
	for _, ns := range []string{nodev1alpha1.DefaultLeaseNamespace, controllerNamespace} {
		_, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	// kwok reports no bootID; a kubelet always does, and a reboot is a change between
	// two non-empty values. Give every node its first boot.
	for _, node := range env.Nodes {
		if _, err := env.SetBootID(ctx, node, "boot-1"); err != nil {
			return err
		}
	}

	// The simulated extensions start first: a real node's DaemonSets start renewing
	// while the node is still gated.
	c.controlDirs = controlDirs{stop: filepath.Join(env.Dir, "stop"), crash: filepath.Join(env.Dir, "crash")}
	if err := c.controlDirs.reset(); err != nil {
		return err
	}
	if err := startRenewers(ctx, env, sandboxExtensions, c.controlDirs); err != nil {
		return err
	}

	metricsPort, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	healthzPort, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	c.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	c.healthzURL = fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort)
	c.configPath = filepath.Join(env.Dir, "nodehealth-controller.yaml")
	if err := os.WriteFile(c.configPath, []byte(controllerConfig(env.KubeconfigPath, metricsPort, healthzPort)), 0o644); err != nil {
		return err
	}
	p, err := env.StartProcess(framework.ProcessSpec{
		Name: "nodehealth-controller",
		Path: filepath.Join(env.RepoRoot, "_output", "bin", "nodehealth-controller"),
		Args: []string{"--config", c.configPath},
	})
	if err != nil {
		return fmt.Errorf("%w (build it with `make build`)", err)
	}
	c.logPath = p.LogPath

	// Ready when it serves /healthz, and the nodes registered with the taint are
	// ungated: from then on everything the user tries starts from a steady state.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("nodehealth-controller exited (%v); last lines of %s:\n%s", err, display(p.LogPath), p.LogTail(20))
		}
		if healthy(waitCtx, c.healthzURL) && allUngated(waitCtx, env) {
			return nil
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("the nodes were not ungated within a minute; see %s", display(p.LogPath))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (c *controllerComponent) TryThis() []string {
	k := "_output/bin/kubectl"
	n1, n2 := "sandbox-node-1", "sandbox-node-2"
	if len(c.nodes) > 0 {
		n1, n2 = c.nodes[0], c.nodes[len(c.nodes)-1]
	}
	if len(c.nodes) > 1 {
		n2 = c.nodes[1]
	}
	stop := display(c.controlDirs.stop)
	crash := display(c.controlDirs.crash)
	columns := `'custom-columns=NODE:.metadata.name,TAINTS:.spec.taints[*].key,EXTENSIONS:.status.conditions[?(@.type=="SystemExtensionsReady")].reason'`
	return []string{
		fmt.Sprintf("# Every node requires kube-proxy and cni; their Leases (%ds, renewed every %s) are in %s:", sandboxLeaseSeconds, sandboxRenewEvery, nodev1alpha1.DefaultLeaseNamespace),
		fmt.Sprintf("%s get leases -n %s", k, nodev1alpha1.DefaultLeaseNamespace),
		fmt.Sprintf("%s get nodes -o %s", k, columns),
		"# Stop cni on one node (it releases its Lease): the node is tainted within a second:",
		fmt.Sprintf("touch %s/cni.%s", stop, n2),
		fmt.Sprintf("%s describe node %s   # Taints, the SystemExtensionsReady condition, Events", k, n2),
		"# Start it again: it renews within 3s and the taint goes:",
		fmt.Sprintf("rm %s/cni.%s", stop, n2),
		fmt.Sprintf("# Crash kube-proxy instead (stops renewing, keeps its Lease): tainted %s after its last renewal:", time.Duration(sandboxLeaseSeconds)*time.Second+sandboxRenewalGrace),
		fmt.Sprintf("touch %s/kube-proxy.%s; sleep 16; %s get nodes -o %s", crash, n2, k, columns),
		fmt.Sprintf("rm %s/kube-proxy.%s", crash, n2),
		"# Reboot a node (a new bootID; use another value for every further reboot): gated until both",
		"# extensions renew again (they take 4s and 10s to come back):",
		fmt.Sprintf(`%s patch node %s --subresource=status --type=merge -p '{"status":{"nodeInfo":{"bootID":"reboot-2"}}}'`, k, n1),
		fmt.Sprintf("%s get events --field-selector involvedObject.name=%s", k, n1),
		"# The controller's metrics, configuration and log:",
		fmt.Sprintf("curl -s %s | grep ^nodehealth_", c.metricsURL),
		fmt.Sprintf("cat %s", display(c.configPath)),
		fmt.Sprintf("tail -f %s", display(c.logPath)),
	}
}

// controllerConfig is the sandbox's NodeHealthControllerConfiguration.
func controllerConfig(kubeconfig string, metricsPort, healthzPort int) string {
	var rules strings.Builder
	for _, e := range sandboxExtensions {
		fmt.Fprintf(&rules, "- name: %s\n  nodeSelector: {}\n  affectsReadiness: true\n  startupTimeout: 10m\n", e.name)
	}
	return fmt.Sprintf(`# Written by the sandbox (test/sandbox/controller.go) at every start.
apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: %s
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
logging:
  verbosity: 2
leaseNamespace: %s
taint:
  key: %s
  effect: NoSchedule
# Every sandbox node requires these extensions; the sandbox renews their Leases.
extensionRules:
%s# Short for the sandbox (default 10s): an extension is not ready 15s after its
# last renewal with the sandbox's 10s Leases.
renewalGrace: %s
registrationGrace: 30s
eviction:
  mode: Evict
  timeout: 5m
`, controllerNamespace, kubeconfig, metricsPort, healthzPort, nodev1alpha1.DefaultLeaseNamespace,
		nodev1alpha1.DefaultReadinessTaintKey, rules.String(), sandboxRenewalGrace)
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func healthy(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func allUngated(ctx context.Context, env *Env) bool {
	for _, name := range env.Nodes {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, t := range n.Spec.Taints {
			if t.Key == nodev1alpha1.DefaultReadinessTaintKey {
				return false
			}
		}
	}
	return true
}
