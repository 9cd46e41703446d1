// Package agent_test runs the update agent on the real local control plane:
// the deploy/update-agent manifests (RBAC, the own-shadow admission policy,
// the DaemonSet whose kwok pods lend the agents their pod-bound tokens), real
// agent processes on simulated Bottlerocket nodes (test/framework SimNode),
// and the real node-health controller binary, with the test playing the
// update operator by writing each shadow's spec.
package agent_test

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
	dir, err := os.MkdirTemp("", "nodehealth-agent-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := framework.BuildCommands(context.Background(), dir, "./cmd/update-agent", "./cmd/nodehealth-controller"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return testenv.RunTestMain(m, framework.WithCRDs())
}
