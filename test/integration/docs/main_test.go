// Package docs_test runs the commands of the documentation against the real
// local control plane, so that a documented command never breaks silently:
// every ```sh block of docs/install.md and README.md, in order, with
// KUBECONFIG set and kubectl, helm, nodehealth-controller and kubectl-nodehealth on PATH. A block
// that cannot run here is marked, on the line before it,
//
//	<!-- doc-test: skip: why it cannot run here -->
//
// and the test logs it with its reason; blocks in other languages (```yaml,
// ```console, ...) are illustrations and not run. A block a reader saves as
// a file is marked, on the line before it,
//
//	<!-- doc-test: file: fleet.yaml -->
//
// and a test of that document checks the file: docs/migrating-from-brupop.md's
// Helm values against the chart's schema, its UpdatePolicy against the API
// server.
package docs_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/nodehealth-controller", "./cmd/kubectl-nodehealth"}})
}
