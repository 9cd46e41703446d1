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
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/extension-heartbeat", "./cmd/nodehealth-controller"}})
}
