// Package extensions_test checks the extension side of nodehealth against the
// real local control plane: the RBAC and ValidatingAdmissionPolicy of
// deploy/extensions/ with real pod-bound service account tokens, the
// ready-made sidecar Components of deploy/examples/ (rendered, dry-run applied,
// their heartbeat configuration accepted by extension-heartbeat), and the
// kubectl-nodehealth plugin run as a process.
package extensions_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// binDir holds the product binaries this package runs, built by TestMain from
// the working tree so that a stale _output/bin can never make a test pass.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodehealth-extensions-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir, "./cmd/kubectl-nodehealth", "./cmd/extension-heartbeat"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return testenv.RunTestMain(m)
}

// buildBinaries runs go build for the packages into dir. The Go build cache
// makes this cheap after the first time.
func buildBinaries(dir string, pkgs ...string) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	// go test puts the go command's own folder first on PATH for the test
	// binary, so this is the toolchain running the tests.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building %v: %w", pkgs, err)
	}
	cmd := exec.Command(goBin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
	}
	return nil
}
