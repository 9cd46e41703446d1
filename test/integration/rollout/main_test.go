// Package rollout_test runs a whole Bottlerocket rolling update end to end on
// the real local control plane: the real update-operator, nodehealth-controller,
// update-agent and extension-heartbeat binaries, and simulated nodes
// (test/framework SimNode) whose Bottlerocket API emulators reboot them for
// real as far as the API server can tell. Nothing plays another component's
// part: the test only offers a new version on the emulators and watches.
//
// The tests run one after the other: an operator counts and halts on every
// shadow in the cluster, as the one operator of a cluster must.
package rollout_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands:     []string{"./cmd/update-agent", "./cmd/update-operator", "./cmd/nodehealth-controller", "./cmd/extension-heartbeat"},
		ControlPlane: []framework.Option{framework.WithCRDs()},
	})
}
