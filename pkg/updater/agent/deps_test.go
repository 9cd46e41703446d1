package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// allGroups are packages whose import links the types of every Kubernetes
// API group; the per-node agent must stay lean (target ≤ 24 MiB RSS,
// docs/update-agent.md), so neither the agent nor its binary may link them.
var allGroups = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/scheme",
	"k8s.io/client-go/kubernetes/typed/",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/tools/record",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/discovery",
}

func TestAgentLinksOnlyItsOwnAPIGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	for _, pkg := range []string{".", "nodehealth.io/nodehealth/cmd/update-agent"} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(out)) {
			for _, p := range allGroups {
				if d == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(d, p)) || strings.HasPrefix(d, p+"/") {
					t.Errorf("%s links %s", pkg, d)
				}
			}
		}
	}
}
