package drain

import (
	"os/exec"
	"strings"
	"testing"
)

// k8s.io/kubectl is the reference the filters' tests compare with
// (pkg/drain/kubectlparity), never a dependency of the product: its drain package
// pulls in cli-runtime's resource builder, kubectl's i18n and templates, and
// this package must stay lean enough for the per-node update agent. No
// binary of cmd/ may link it.
func TestNoBinaryLinksKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "nodehealth.io/nodehealth/cmd/...", "nodehealth.io/nodehealth/pkg/drain").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == "k8s.io/kubectl" || strings.HasPrefix(d, "k8s.io/kubectl/") {
			t.Errorf("a binary of cmd/ (or package drain) links %s; k8s.io/kubectl is for tests only", d)
		}
	}
}
