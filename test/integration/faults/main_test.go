// Package faults injects real faults into the local control plane of
// test/framework while the real nodehealth-controller binary runs, and
// checks that nodehealth loses no taint, never flaps and never evicts twice:
// kube-apiserver restarted during a burst of failures, etcd restarted and
// paused, the leader SIGKILLed ten times, a stalled connection, SIGTERM
// during a burst, and a configuration edited twenty times. The compound
// faults (compound_test.go) put one fault on top of another against the
// guards: an etcd stall while the blast radius holds nodes back, a restart
// while Leases are silent, a drain blocked by a PodDisruptionBudget across
// a suspension, and the controller's Lease watch stalled alone (a proxy that
// reads each connection's requests stalls only that one).
//
// The tests change the whole control plane (they restart etcd and the API
// server), so they run one at a time. Each has its own nodes (plain Node
// objects; the test renews their extension Leases), its own Lease namespace
// and its own leader Lease. A watch records every version of the test's
// nodes over the whole run, and the API server's audit log records every
// eviction request, so the assertions are exact: how many times each node
// was tainted and each pod evicted. docs/reliability.md describes each fault
// and the figures these tests print.
package faults_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// auditPolicy records every eviction request (and nothing else), whoever
// sends it and whatever the answer: a second eviction of the same pod is
// visible even when it is refused.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: None
`

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands: []string{"./cmd/nodehealth-controller", "./cmd/extension-heartbeat"},
		// No kube-controller-manager: its node-lifecycle controller would
		// taint the test's kubelet-less nodes unreachable and its
		// taint-eviction controller would delete their pods, mixing its
		// writes with the ones under test. No scheduler, no kwok: pods are
		// bound by nodeName and nodes are plain objects.
		ControlPlane: []framework.Option{
			framework.WithoutControllerManager(), framework.WithoutScheduler(), framework.WithoutKwok(),
			framework.WithAuditPolicy(auditPolicy),
		},
		Timeout: waitTimeout,
	})
}
