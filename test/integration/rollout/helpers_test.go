package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	oldVersion  = "1.20.0"
	newVersion  = "1.21.0"
	waitTimeout = 3 * time.Minute
)

var managedLabels = map[string]string{updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue}

// install applies what a user applies for the agents: the namespaces and
// extension security, then deploy/update-agent/ as it is (kwok runs the
// DaemonSet's pods, whose tokens the agent processes use); and the cni
// extension every node runs, whose heartbeats run as its DaemonSet's pods.
func install(t *testing.T) {
	testenv.InstallUpdateAgent(t)
	installCNIOnce.Do(func() {
		// Not the test's context: the installation outlives the first test.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		onManaged := corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: updatesv1alpha1.ManagedNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{updatesv1alpha1.ManagedNodeLabelValue},
		}}}}}
		cniIdentity, installCNIErr = testenv.Env(t).InstallExtensionIdentity(ctx, "kube-system", "cni", onManaged)
	})
	if installCNIErr != nil {
		t.Fatal(installCNIErr)
	}
}

// The cni extension's identity, installed once for the package: its
// ServiceAccount, bindings and DaemonSet on every managed node.
var (
	installCNIOnce sync.Once
	cniIdentity    framework.PodIdentity
	installCNIErr  error
)

func shadowClient(t testing.TB) versioned.Interface { return testenv.NodehealthClient(t) }

// startController runs the node-health controller with escalation on and
// fast: a failure it treated as unplanned would add the NoExecute taint 2s
// later, which the test's node watch would see. Planned releases must never
// get there.
func startController(t *testing.T) *framework.Component {
	t.Helper()
	return testenv.StartComponent(t, testenv.Component{Binary: "nodehealth-controller", Config: `apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: false
registrationGrace: 5s
renewalGrace: 2s
# 3 × canaryInterval must stay below 3/4 × minimumLeaseDuration + renewalGrace
# (10s + 2s) so the own-view guard fires before any Lease could expire.
canaryInterval: 2s
eviction:
  mode: NoExecute
  timeout: 2s
  nodesPerSecond: 10
`})
}

// startOperator runs the update operator with test-sized deadlines, and the
// test's UpdatePolicy: every managed node, maxConcurrent at once, a 2s soak.
func startOperator(t *testing.T, maxConcurrent int) *framework.Component {
	t.Helper()
	return startOperatorWithStagingDeadline(t, maxConcurrent, 60*time.Second)
}

// applyPolicy creates (or, on a second call, updates) the test's
// UpdatePolicy "rollout": every managed node, maxConcurrent at once, a 2s
// soak. It is deleted after the test.
func applyPolicy(t *testing.T, maxConcurrent int) {
	t.Helper()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().UpdatePolicies()
	spec := updatesv1alpha1.UpdatePolicySpec{NodeSelector: &metav1.LabelSelector{},
		MaxConcurrentUpdates: intstr.FromInt(maxConcurrent), PostRebootSoak: &metav1.Duration{Duration: 2 * time.Second}}
	if p, err := c.Get(ctx, "rollout", metav1.GetOptions{}); err == nil {
		p.Spec = spec
		if _, err := c.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := c.Create(ctx, &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: "rollout"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Delete(ctx, "rollout", metav1.DeleteOptions{})
	})
}

// startOperatorWithStagingDeadline is startOperator with the
// StagedAndPerformedUpdate deadline chosen.
func startOperatorWithStagingDeadline(t *testing.T, maxConcurrent int, staging time.Duration) *framework.Component {
	t.Helper()
	return startOperatorWithDeadlines(t, maxConcurrent, staging, 60*time.Second)
}

// startOperatorWithDeadlines is startOperator with the
// StagedAndPerformedUpdate and MonitoringUpdate deadlines chosen.
func startOperatorWithDeadlines(t *testing.T, maxConcurrent int, staging, monitoring time.Duration) *framework.Component {
	t.Helper()
	applyPolicy(t, maxConcurrent)
	// As its service account, which the shadow-deletion admission policy
	// lets delete the orphaned shadow of a node deleted mid-update.
	kubeconfig, err := testenv.Env(t).ServiceAccountKubeconfig("nodehealth-system", "update-operator")
	if err != nil {
		t.Fatal(err)
	}
	return testenv.StartComponent(t, testenv.Component{Binary: "update-operator", Kubeconfig: kubeconfig, Config: `apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateOperatorConfiguration
leaderElection:
  leaderElect: false
stateDeadlines:
  stagedAndPerformedUpdate: ` + staging.String() + `
  rebootedIntoUpdate: 90s
  monitoringUpdate: ` + monitoring.String() + `
drain:
  timeout: 30s
`})
}

// startNodes starts simulated managed nodes, each with its update agent and
// one more system extension (an extension-heartbeat sidecar that registers
// itself), and waits until the node-health controller let each serve.
func startNodes(t *testing.T, faults map[string]emulator.Faults, names ...string) map[string]*framework.SimNode {
	t.Helper()
	return startNodesWith(t, faults, nil, names...)
}

// probes holds each simulated node's cni probe file: removing it makes that
// node's second extension fail.
var probes sync.Map

// breakExtension makes the node's cni extension fail its probe.
func breakExtension(t *testing.T, node string) {
	t.Helper()
	p, ok := probes.Load(node)
	if !ok {
		t.Fatalf("node %s has no probe file", node)
	}
	if err := os.Remove(p.(string)); err != nil {
		t.Fatal(err)
	}
}

// startNodesWith is startNodes with command delays for some emulators.
func startNodesWith(t *testing.T, faults map[string]emulator.Faults, delays map[string]emulator.Delays, names ...string) map[string]*framework.SimNode {
	t.Helper()
	install(t) // the cni identity the heartbeats run as
	nodes := map[string]*framework.SimNode{}
	for _, name := range names {
		dir := t.TempDir()
		probe := filepath.Join(dir, "healthy")
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		probes.Store(name, probe)
		addr := testenv.FreeLoopbackAddresses(t, 1)[0]
		hb := filepath.Join(dir, "cni.yaml")
		// The heartbeat runs as the cni DaemonSet's pod on the node, with a
		// token bound to it: deploy/extensions' RBAC and admission policy
		// judge its writes, as in a cluster.
		hbKubeconfig := filepath.Join(dir, "cni.kubeconfig")
		if err := os.WriteFile(hb, []byte(fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: %s
  healthzBindAddress: %s
extensionName: cni
register: true
lease:
  duration: 10s
  renewInterval: 2s
probe:
  file:
    path: %s
    maxAge: 24h
  period: 1s
`, hbKubeconfig, addr, addr, probe)), 0o644); err != nil {
			t.Fatal(err)
		}
		s := testenv.StartSimNode(t, framework.SimNodeOptions{
			Name: name, Labels: managedLabels, Version: oldVersion,
			Faults:      faults[name],
			Delays:      delays[name],
			AgentBinary: testenv.Binary(t, "update-agent"),
			AgentConfig: func(kubeconfig, socket, servingAddr string) string {
				return fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateAgentConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: %s
  healthzBindAddress: %s
apiSocketPath: %s
updateCheckInterval: 2s
`, kubeconfig, servingAddr, servingAddr, socket)
			},
			Heartbeats: []framework.ProcessSpec{{
				Name: name + "-cni",
				Path: testenv.Binary(t, "extension-heartbeat"),
				Args: []string{"--config", hb, "--node-name", name, "-v=2"},
			}},
			HeartbeatIdentity: &framework.HeartbeatIdentity{PodIdentity: cniIdentity, Kubeconfig: hbKubeconfig},
		})
		nodes[name] = s
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := framework.RemoveShadow(ctx, shadowClient(t), name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	for _, name := range names {
		waitServing(t, name)
	}
	return nodes
}

// waitServing waits until the node lists both extensions, they are ready and
// the node is not gated.
func waitServing(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testenv.Context(t), waitTimeout)
	defer cancel()
	if _, err := testenv.Env(t).WaitForNode(ctx, node, func(n *corev1.Node) bool {
		list := n.Annotations["nodehealth.io/system-extensions"]
		return framework.NodeServing(n) &&
			strings.Contains(list, updatesv1alpha1.UpdaterExtension) && strings.Contains(list, `"cni"`)
	}); err != nil {
		t.Fatalf("node %s never served with both extensions: %v", node, err)
	}
}

// waitShadows waits until cond holds for every named shadow.
func waitShadows(t *testing.T, what string, cond func(*updatesv1alpha1.BottlerocketShadow) bool, names ...string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			s, err := c.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !cond(s) {
				last = fmt.Sprintf("%s: spec %+v status %+v annotations %v", n, s.Spec, s.Status, s.Annotations)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for shadows: %s: %v (last: %s)", what, err, last)
	}
}
