package app

import (
	"os/exec"
	"strings"
	"testing"
)

// The sidecar runs once per extension per node, so what it links is paid
// 25,000 times on 5,000 nodes (docs/benchmarks.md). These packages register
// or link every Kubernetes API group, or pull in the configuration API where
// plain values do.
func TestSidecarLinksNoAllGroupsClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	list := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"k8s.io/client-go/tools/record",
		"k8s.io/client-go/applyconfigurations",
		"k8s.io/api/core/v1",
		"nodehealth.io/heartbeat/clientset",
	}
	for _, d := range list("nodehealth.io/nodehealth/cmd/extension-heartbeat") {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("extension-heartbeat links %s", d)
			}
		}
	}
	for _, d := range list("nodehealth.io/nodehealth/pkg/probe") {
		if strings.HasPrefix(d, "nodehealth.io/nodehealth/pkg/componentconfig") {
			t.Errorf("package probe imports %s; it takes plain options", d)
		}
	}
}
