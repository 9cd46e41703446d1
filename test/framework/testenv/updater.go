package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/framework"
)

var (
	installUpdateAgentOnce sync.Once
	installUpdateAgentErr  error
)

// InstallUpdateAgent applies what a user applies for the update agents, once
// per package (Environment.InstallUpdateAgent): the namespaces, the
// extension security and deploy/update-agent/ as it is.
func InstallUpdateAgent(t testing.TB) {
	t.Helper()
	installUpdateAgentOnce.Do(func() {
		// Not the test's context: the installation outlives the first test.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		installUpdateAgentErr = Env(t).InstallUpdateAgent(ctx)
	})
	if installUpdateAgentErr != nil {
		t.Fatal(installUpdateAgentErr)
	}
}

// NodehealthClient returns an admin clientset of nodehealth's own API groups
// (BottlerocketShadows, UpdatePolicies).
func NodehealthClient(t testing.TB) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(Env(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// StartSimNode starts a simulated Bottlerocket node for the rest of the test:
// closed and its Node deleted when the test ends, its agent's and
// heartbeats' logs printed when the test failed.
func StartSimNode(t testing.TB, opts framework.SimNodeOptions) *framework.SimNode {
	t.Helper()
	env := Env(t)
	s, err := env.StartSimNode(Context(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if p := s.Agent(); p != nil {
				t.Logf("last lines of %s:\n%s", p.Name, p.LogTail(80))
			}
			for _, p := range s.Heartbeats() {
				t.Logf("last lines of %s:\n%s", p.Name, p.LogTail(20))
			}
		}
		s.Close()
		deleteNode(t, env, opts.Name)
	})
	return s
}
