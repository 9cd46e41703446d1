// Package updates_test proves the BottlerocketShadow API on a real API server:
// the CRD controller-gen writes is accepted and served, its validation rejects
// what docs/updater.md forbids, spec and status are written through separate
// endpoints, and the generated clientset, listers, informers and apply
// configurations work against it.
package updates_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{ControlPlane: []framework.Option{framework.WithCRDs()}})
}
