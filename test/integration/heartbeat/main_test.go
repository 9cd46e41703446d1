// Package heartbeat_test runs the heartbeat library and the extension-heartbeat
// sidecar against the real local control plane of test/framework, with real
// pod-bound service-account tokens (carrying the node's name and UID), real
// RBAC, real garbage collection, and — for the joint tests — the real
// nodehealth-controller binary.
//
// Isolation: every test has its own Lease namespace, its own extension pod
// namespace and its own node names. The controller binary of the joint test
// sees every node, but it only gates nodes that list an extension (its rule
// selects a label only the joint test's node carries, and self-registration
// works through its own Lease namespace), so the other tests' nodes are left
// alone and every test runs in parallel.
//
// Waits are watches with generous timeouts; assertions about time are upper
// bounds far below the Lease's expiry, so that they tell "released at once"
// from "expired", not fast from slow machines.
package heartbeat_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Environment variables pointing at prebuilt binaries; without them the tests
// build both from the working tree, once, while the control plane starts.
const (
	heartbeatBinEnv  = "NODEHEALTH_HEARTBEAT_BIN"
	controllerBinEnv = "NODEHEALTH_CONTROLLER_BIN"
)

var (
	buildOnce sync.Once
	buildDone = make(chan struct{})
	buildErr  error
	buildDir  string
	binaries  = map[string]string{}
)

func TestMain(m *testing.M) {
	startBuild()
	code := testenv.RunTestMain(m)
	<-buildDone
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// startBuild builds cmd/extension-heartbeat and cmd/nodehealth-controller
// into a temporary directory in the background, so that the tests run what
// the working tree holds, never a stale _output/bin binary, and never write
// _output/bin while another package's tests may be running it.
func startBuild() {
	buildOnce.Do(func() {
		heartbeat, controller := os.Getenv(heartbeatBinEnv), os.Getenv(controllerBinEnv)
		if heartbeat != "" && controller != "" {
			binaries["extension-heartbeat"], binaries["nodehealth-controller"] = heartbeat, controller
			close(buildDone)
			return
		}
		go func() {
			defer close(buildDone)
			root, err := framework.RepoRoot()
			if err != nil {
				buildErr = err
				return
			}
			if buildDir, err = os.MkdirTemp("", "nodehealth-heartbeat-it-"); err != nil {
				buildErr = err
				return
			}
			cmd := exec.Command("go", "build", "-o", buildDir+"/", "./cmd/extension-heartbeat", "./cmd/nodehealth-controller")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build: %v\n%s", err, out)
				return
			}
			binaries["extension-heartbeat"] = filepath.Join(buildDir, "extension-heartbeat")
			binaries["nodehealth-controller"] = filepath.Join(buildDir, "nodehealth-controller")
			if heartbeat != "" {
				binaries["extension-heartbeat"] = heartbeat
			}
			if controller != "" {
				binaries["nodehealth-controller"] = controller
			}
		}()
	})
}

// binary returns the path of a built binary, waiting for the build.
func binary(t testing.TB, name string) string {
	t.Helper()
	<-buildDone
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binaries[name]
}
