package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

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

// installAgent applies what a user applies: the namespaces and extension
// security, then deploy/update-agent/ as it is (kwok runs the DaemonSet's
// pods, whose tokens the agent processes use).
func installAgent(t *testing.T) { testenv.InstallUpdateAgent(t) }

func shadows(t testing.TB) versioned.Interface { return testenv.NodehealthClient(t) }

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
		_, controllerErr = testenv.StartComponentFor(t, testenv.Component{
			Binary: "nodehealth-controller",
			Name:   "nodehealth-controller",
			Config: `apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: false
registrationGrace: 5s
eviction:
  mode: None
`,
		})
	})
	if controllerErr != nil {
		t.Fatal(controllerErr)
	}
}

// startSimNode starts a simulated managed node with an agent.
func startSimNode(t *testing.T, opts framework.SimNodeOptions) *framework.SimNode {
	t.Helper()
	if opts.Labels == nil {
		opts.Labels = managedLabels
	}
	opts.AgentBinary = testenv.Binary(t, "update-agent")
	return testenv.StartSimNode(t, opts)
}

// startUpdatableNode is the fixture of every update test: the agents
// installed, the controller running, a simulated node with its agent, its
// shadow created as the operator creates it and reporting a first status
// firstStatus accepts, and the node let serve (the updater's Lease
// registered and renewed, the taint off).
func startUpdatableNode(t *testing.T, opts framework.SimNodeOptions, firstStatus func(*updatesv1alpha1.BottlerocketShadow) bool) *framework.SimNode {
	t.Helper()
	installAgent(t)
	startController(t)
	s := startSimNode(t, opts)
	createShadow(t, opts.Name)
	waitShadow(t, opts.Name, "first status", firstStatus)
	waitUngated(t, opts.Name)
	return s
}

func waitUngated(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testenv.Context(t), waitTimeout)
	defer cancel()
	if _, err := testenv.Env(t).WaitForNode(ctx, node, framework.NodeServing); err != nil {
		t.Fatalf("node %s never became ready for workloads: %v", node, err)
	}
}
