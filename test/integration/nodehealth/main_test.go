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
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands: []string{"./cmd/nodehealth-controller"},
		// Most of a test's time is spent waiting for Lease expiries, so far
		// more tests than cores can share the machine; Go's default
		// (GOMAXPROCS) would serialise them on a 2-core machine.
		Parallel: 32,
		Timeout:  waitTimeout,
	})
}
