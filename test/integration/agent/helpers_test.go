package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	agentNamespace = "nodehealth-update-agent"
	agentSA        = "update-agent"
	agentPolicy    = framework.UpdateAgentPolicy
	waitTimeout    = 3 * time.Minute
)

var managedLabels = map[string]string{updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue}

var (
	deployOnce sync.Once
	deployErr  error
)

// installAgent applies what a user applies: the namespaces and extension
// security, then deploy/update-agent/ as it is (kwok runs the DaemonSet's
// pods, whose tokens the agent processes use).
func installAgent(t *testing.T) {
	t.Helper()
	deployOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		deployErr = testenv.Env(t).InstallUpdateAgent(ctx)
	})
	if deployErr != nil {
		t.Fatal(deployErr)
	}
}

func shadows(t testing.TB) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(testenv.Env(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createShadow plays the operator: the shadow of node, spec Idle, the
// Node's UID in the node-uid annotation.
func createShadow(t *testing.T, node string) {
	t.Helper()
	ctx := testenv.Context(t)
	n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = shadows(t).UpdatesV1alpha1().BottlerocketShadows().Create(ctx, &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{updatesv1alpha1.NodeUIDAnnotation: string(n.UID)}},
		Spec:       updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// setSpec plays the operator moving the shadow's spec.
func setSpec(t *testing.T, node string, state updatesv1alpha1.ShadowState, version string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s.Spec.State, s.Spec.Version = state, version
		now := metav1.Now()
		s.Spec.StateTransitionTimestamp = &now
		_, err = c.Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("setting spec of %s to %s: %v", node, state, err)
	}
}

// waitShadow waits until cond holds for node's shadow.
func waitShadow(t *testing.T, node, what string, cond func(*updatesv1alpha1.BottlerocketShadow) bool) *updatesv1alpha1.BottlerocketShadow {
	t.Helper()
	ctx := testenv.Context(t)
	var last *updatesv1alpha1.BottlerocketShadow
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		t.Fatalf("waiting for shadow %s: %s: %v (last: spec %+v status %+v)", node, what, err, specOf(last), statusOf(last))
	}
	return last
}

func specOf(s *updatesv1alpha1.BottlerocketShadow) any {
	if s == nil {
		return nil
	}
	return s.Spec
}

func statusOf(s *updatesv1alpha1.BottlerocketShadow) any {
	if s == nil {
		return nil
	}
	return s.Status
}

func stateIs(state updatesv1alpha1.ShadowState) func(*updatesv1alpha1.BottlerocketShadow) bool {
	return func(s *updatesv1alpha1.BottlerocketShadow) bool { return s.Status.CurrentState == state }
}

var (
	controllerOnce sync.Once
	controllerErr  error
)

// startController runs the node-health controller binary once for the
// package: it gates a node when the agent releases its Lease and after the
// reboot, and ungates it once every extension renewed.
func startController(t *testing.T) {
	t.Helper()
	controllerOnce.Do(func() {
		env := testenv.Env(t)
		addr := testenv.FreeLoopbackAddresses(t, 1)[0]
		cfg := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: %s
  healthzBindAddress: %s
registrationGrace: 5s
eviction:
  mode: None
`, env.Kubeconfig, addr, addr)
		dir, err := os.MkdirTemp("", "agent-it-controller-")
		if err != nil {
			controllerErr = err
			return
		}
		path := filepath.Join(dir, "controller.yaml")
		if controllerErr = os.WriteFile(path, []byte(cfg), 0o644); controllerErr != nil {
			return
		}
		_, controllerErr = env.StartProcess(framework.ProcessSpec{
			Name: "nodehealth-controller",
			Path: filepath.Join(binDir, "nodehealth-controller"),
			Args: []string{"--config", path, "-v=2"},
		})
	})
	if controllerErr != nil {
		t.Fatal(controllerErr)
	}
}

// startSimNode starts a simulated managed node with an agent and waits
// until the node-health controller let it serve (the updater's Lease
// registered and renewed, the taint off).
func startSimNode(t *testing.T, opts framework.SimNodeOptions) *framework.SimNode {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	if opts.Labels == nil {
		opts.Labels = managedLabels
	}
	opts.AgentBinary = filepath.Join(binDir, "update-agent")
	s, err := env.StartSimNode(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if p := s.Agent(); p != nil {
				t.Logf("last lines of %s:\n%s", p.Name, p.LogTail(80))
			}
		}
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.DeleteNode(ctx, opts.Name)
	})
	return s
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == "nodehealth.io/not-ready" {
			return true
		}
	}
	return false
}

func waitUngated(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testenv.Context(t), waitTimeout)
	defer cancel()
	if _, err := testenv.Env(t).WaitForNode(ctx, node, func(n *corev1.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == "SystemExtensionsReady" && c.Status == corev1.ConditionTrue {
				return !tainted(n)
			}
		}
		return false
	}); err != nil {
		t.Fatalf("node %s never became ready for workloads: %v", node, err)
	}
}
