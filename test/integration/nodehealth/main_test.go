// Package nodehealth_test runs the node-health controller against the real
// local control plane of test/framework: kube-apiserver, etcd,
// kube-controller-manager (disruption, taint-eviction, garbage collection,
// workload controllers), kube-scheduler and kwok-simulated nodes.
//
// Isolation: every test has its own extension Lease namespace, its own node
// names and its own group label (it.nodehealth.io/group). Controllers started
// in process watch only the nodes of their group (a label selector on the node
// informer, the only difference from cmd/nodehealth-controller's wiring), so
// tests run in parallel without seeing each other's nodes. The tests that run
// the real binary (leader election) or the uninstall command see every node
// of the cluster, so they do not call t.Parallel: Go runs all sequential
// top-level tests before it releases the parallel ones.
//
// Waits are watches (or polls of a counter), never fixed sleeps; assertions
// about time are lower bounds only (a slow machine makes things later, never
// earlier).
package nodehealth_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

// controllerBinEnv points at a prebuilt nodehealth-controller binary; without
// it the tests build one from the working tree (once, in the background while
// the control plane starts).
const controllerBinEnv = "NODEHEALTH_CONTROLLER_BIN"

// defaultParallel is how many tests run at once unless -test.parallel says
// otherwise. Most of a test's time is spent waiting for Lease expiries, so
// far more tests than cores can share the machine; Go's default (GOMAXPROCS)
// would serialise them on a 2-core machine.
const defaultParallel = "32"

var (
	binDone  = make(chan struct{})
	binPath  string
	binErr   error
	binDir   string
	binStart sync.Once
)

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			parallelSet = true
		}
	})
	if !parallelSet {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	startBinaryBuild()
	code := testenv.RunTestMain(m)
	if binDir != "" {
		<-binDone
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startBinaryBuild builds cmd/nodehealth-controller from the working tree in
// the background, so that the binary tests run what the in-process tests run.
func startBinaryBuild() {
	binStart.Do(func() {
		if p := os.Getenv(controllerBinEnv); p != "" {
			binPath = p
			close(binDone)
			return
		}
		dir, err := os.MkdirTemp("", "nodehealth-it-bin-")
		if err != nil {
			binErr = err
			close(binDone)
			return
		}
		binDir = dir
		go func() {
			defer close(binDone)
			goBin, err := exec.LookPath("go")
			if err != nil {
				binErr = fmt.Errorf("building nodehealth-controller: %w (set %s to a built binary)", err, controllerBinEnv)
				return
			}
			out := filepath.Join(dir, "nodehealth-controller")
			cmd := exec.Command(goBin, "build", "-o", out, "nodehealth.io/nodehealth/cmd/nodehealth-controller")
			if output, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("go build nodehealth-controller: %v\n%s", err, output)
				return
			}
			binPath = out
		}()
	})
}

// controllerBinary returns the path of the nodehealth-controller binary.
func controllerBinary(t testing.TB) string {
	t.Helper()
	startBinaryBuild()
	<-binDone
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}
