// Package controlplane_test proves that the local control plane of test/framework is
// real: every test here would fail against a fake clientset, envtest without
// controllers, or a control plane missing the piece it checks (RBAC, pod-bound tokens,
// garbage collection, PodDisruptionBudget status, scheduling, kwok's kubelet
// simulation, the versioned binaries).
package controlplane_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Suite{}) }
