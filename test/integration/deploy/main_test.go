// Package deploy_test checks the manifests of deploy/ against the real local
// control plane: they are accepted by the API server (server-side field
// validation, Pod Security admission, PriorityClass admission), the controller's
// RBAC is exactly what it needs and nothing more, its pods schedule onto nodes
// that carry the readiness taint, the embedded configuration is accepted by the
// binary, the documented install and uninstall commands work, and the optional
// MutatingAdmissionPolicy taints Nodes at creation as documented.
//
// The tests run one after the other: the uninstall step touches every Node, and
// the admission policy applies to every Node created while it is installed.
package deploy_test

import (
	"testing"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/nodehealth-controller"}})
}
