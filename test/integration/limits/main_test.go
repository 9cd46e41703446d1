// Package limits_test runs the node-health controller against the real
// local control plane at its limits (issue 13, items 7 and 8): an extension
// failing on a whole fleet or most of a zone at once must suspend gating
// rather than taint the fleet, and hostile input written through the API
// (huge annotations, flipping holders, thousands of self-registering Leases,
// names that belong to no node, annotations at the size limit) must neither
// stop the controller serving every other node nor grow what it keeps.
//
// The nodes are plain Node objects (no kwok, no kubelet): nothing but the
// controller and the test writes them, so every Node update the test sees is
// the controller's. kube-controller-manager and kube-scheduler do not run
// (the node lifecycle controller would taint nodes no kubelet reports for).
package limits_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		ControlPlane: []framework.Option{framework.WithoutKwok(), framework.WithoutScheduler(), framework.WithoutControllerManager()},
		Timeout:      waitTimeout,
	})
}
