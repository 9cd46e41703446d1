// Package updater_test runs the update operator's controllers (pkg/updater/shadow and
// pkg/updater/operator) against the real control plane. The agent's side is played by
// the test writing shadow status, and the node-health controller's side by the
// test writing the nodes' SystemExtensionsReady condition — the same API
// writes the real components make. Each test selects its own nodes by a label
// so that the tests' operators never start each other's nodes; they run one
// after the other because an operator counts and halts on every shadow in the
// cluster, as the one operator of a cluster must.
package updater_test

import (
	"slices"
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands: []string{"./cmd/update-operator"},
		// job-controller: the hooks of UpdatePolicies run as Jobs.
		ControlPlane: []framework.Option{framework.WithCRDs(),
			framework.WithControllers(append(slices.Clone(framework.DefaultControllers), "job-controller")...)},
	})
}
