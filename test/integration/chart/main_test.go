// Package chart_test applies the Helm chart's committed full render
// (deploy/charts/test/testdata/full.yaml, every component switched on; the
// chart's own module keeps it current against the chart) to the real local
// control plane, and runs the nodehealth-controller binary with the rendered
// ConfigMap's configuration and a token of the chart's ServiceAccount: the
// API server accepts every object, and the controller, with exactly the
// chart's RBAC, admission policies and configuration, gates and ungates a
// kwok node. (kwok pods run nothing, so the Deployment's pods cannot be the
// ones doing it.)
package chart_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/nodehealth-controller"}})
}
