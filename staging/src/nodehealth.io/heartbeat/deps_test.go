package heartbeat

import (
	"os/exec"
	"strings"
	"testing"
)

// allGroups are packages whose import registers or links the types of every
// Kubernetes API group; linking them is most of a small binary's memory
// (docs/benchmarks.md), so the library's core must not, whoever embeds it.
var allGroups = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/scheme",
	"k8s.io/client-go/kubernetes/typed/",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/tools/record",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/api/core/v1",
}

// linksAllGroups returns the packages of deps that pull in every API group.
func linksAllGroups(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, p := range allGroups {
			if d == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(d, p)) || strings.HasPrefix(d, p+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

func TestCoreLinksOnlyItsOwnAPIGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if bad := linksAllGroups(deps); len(bad) > 0 {
		t.Errorf("nodehealth.io/heartbeat links %v; use nodehealth.io/heartbeat/clientset for clientset users instead", bad)
	}
	// Metrics are an interface: an extension that wants none links no
	// metrics library (package prommetrics is the Prometheus one).
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/prometheus/") {
			t.Errorf("nodehealth.io/heartbeat links %s; metrics belong in package prommetrics", d)
		}
	}
}
