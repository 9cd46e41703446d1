package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
)

// Sandbox settings of the node-health controller: short durations, so that everything
// a user tries shows within seconds.
const (
	// controllerNamespace holds the controller's leader-election Lease.
	controllerNamespace = "nodehealth-system"
	// sandboxRenewalGrace is the controller's renewalGrace (default 10s): an extension
	// that stops renewing is not ready sandboxLeaseSeconds + 5s after its last renewal.
	sandboxRenewalGrace = 5 * time.Second
)

// controllerComponent runs the real nodehealth-controller binary against the sandbox,
// with rules that make every node require the sandbox extensions (whose heartbeats
// extensions.go runs).
type controllerComponent struct {
	configPath string
	metricsURL string
	healthzURL string
	logPath    string
}

func (c *controllerComponent) Name() string { return "node-health controller" }

// DecorateNode registers every sandbox node with the readiness taint, as kubelet's
// registerWithTaints (or the MutatingAdmissionPolicy in deploy/) does in a real cluster,
// so that a node is gated from its first moment until its extensions have renewed.
func (c *controllerComponent) DecorateNode(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: corev1.TaintEffectNoSchedule})
}

func (c *controllerComponent) Start(ctx context.Context, env *Env) error {
	if err := createNamespace(ctx, env, controllerNamespace); err != nil {
		return err
	}
	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	metricsPort, healthzPort := ports[0], ports[1]
	c.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	c.healthzURL = fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort)
	// The controller runs as its ServiceAccount, as deployed, not as the
	// admin: the sandbox then shows what its RBAC (deploy/controller)
	// allows, and a missing rule fails here as it would in a cluster.
	if err := env.InstallControllerRBAC(ctx); err != nil {
		return err
	}
	kubeconfig := filepath.Join(env.Dir, "nodehealth-controller.kubeconfig")
	if err := env.WriteServiceAccountKubeconfig(kubeconfig, controllerNamespace, "nodehealth-controller"); err != nil {
		return err
	}
	c.configPath = filepath.Join(env.Dir, "nodehealth-controller.yaml")
	if err := os.WriteFile(c.configPath, []byte(controllerConfig(kubeconfig, metricsPort, healthzPort)), 0o644); err != nil {
		return err
	}
	bin, err := env.ProductBinary(ctx, "nodehealth-controller")
	if err != nil {
		return err
	}
	// Like a Deployment's pod, the controller is restarted when it exits: it
	// does on lost leadership (a control-plane hiccup), to start clean.
	s, err := env.Supervise(ctx, framework.ProcessSpec{
		Name: "nodehealth-controller",
		Path: bin,
		Args: []string{"--config", c.configPath},
	}, nil)
	if err != nil {
		return err
	}
	p := s.Current()
	c.logPath = p.LogPath

	// Ready when it serves /healthz, and the nodes registered with the taint are
	// ungated: from then on everything the user tries starts from a steady state.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if s.Restarts() > 0 {
			return fmt.Errorf("nodehealth-controller exited (%v) before it was ready; last lines of %s:\n%s", exitErr(p), display(p.LogPath), p.LogTail(20))
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
	return []string{
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
		// The simulated Bottlerocket nodes (updater.go) run only the
		// extensions that register themselves.
		// Nor does the real node of --real-nodes=1.
		fmt.Fprintf(&rules, "- name: %s\n  nodeSelector:\n    matchExpressions:\n    - {key: %s, operator: DoesNotExist}\n    - {key: %s, operator: DoesNotExist}\n  affectsReadiness: true\n  startupTimeout: 10m\n",
			e.name, updatesv1alpha1.ManagedNodeLabel, realNodeLabel)
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
# Every sandbox-node-N requires these extensions; the sandbox runs an
# extension-heartbeat for each of them on those nodes.
extensionRules:
%s# Short for the sandbox (default 10s): an extension is not ready 15s after its
# last renewal with the sandbox's 10s Leases.
renewalGrace: %s
# Short for the sandbox (default 5s): the own-view guard must fire before the
# sandbox's 10s Leases can expire, 3 × canaryInterval < 3/4 × 10s + renewalGrace.
canaryInterval: 2s
registrationGrace: 30s
# Escalation is opt-in (default None); the sandbox opts in to Evict so that it
# can be tried: stop an extension for 5m and the node's pods are evicted.
eviction:
  mode: Evict
  timeout: 5m
`, controllerNamespace, kubeconfig, metricsPort, healthzPort, nodev1alpha1.DefaultLeaseNamespace,
		nodev1alpha1.DefaultReadinessTaintKey, rules.String(), sandboxRenewalGrace)
}

// createNamespace creates a namespace unless it exists.
func createNamespace(ctx context.Context, env *Env, name string) error {
	_, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
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
