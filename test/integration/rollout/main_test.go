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
	"context"
	"fmt"
	"os"
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// binDir holds the binaries built from the working tree, so a stale
// _output/bin can never make a test pass.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodehealth-rollout-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := framework.BuildCommands(context.Background(), dir, "./cmd/update-agent", "./cmd/update-operator", "./cmd/nodehealth-controller", "./cmd/extension-heartbeat"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return testenv.RunTestMain(m, framework.WithCRDs())
}
