// Package agent_test runs the update agent on the real local control plane:
// the deploy/update-agent manifests (RBAC, the own-shadow admission policy,
// the DaemonSet whose kwok pods lend the agents their pod-bound tokens), real
// agent processes on simulated Bottlerocket nodes (test/framework SimNode),
// and the real node-health controller binary, with the test playing the
// update operator by writing each shadow's spec.
package agent_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands:     []string{"./cmd/update-agent", "./cmd/nodehealth-controller"},
		ControlPlane: []framework.Option{framework.WithCRDs()},
	})
}
