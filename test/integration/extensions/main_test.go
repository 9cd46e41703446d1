// Package extensions_test checks the extension side of nodehealth against the
// real local control plane: the RBAC and ValidatingAdmissionPolicy of
// deploy/extensions/ with real pod-bound service account tokens, the
// ready-made sidecar Components of deploy/examples/ (rendered, dry-run applied,
// their heartbeat configuration accepted by extension-heartbeat), and the
// kubectl-nodehealth plugin run as a process.
package extensions_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/kubectl-nodehealth", "./cmd/extension-heartbeat"}})
}
