package model

import (
	"os/exec"
	"strings"
	"testing"
)

// The model is valuable only while it is independent of the operator it
// checks: it may link the standard library only — neither pkg/updater (nor
// its agent, shadow controller or Bottlerocket client) nor a Kubernetes
// client or API type.
func TestTheModelLinksNothingOfTheOperatorNorAKubernetesClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	const self = "nodehealth.io/nodehealth/pkg/updater/model"
	for _, args := range [][]string{
		{"list", "-deps", "."},
		{"list", "-deps", "-test", "."},
	} {
		out, err := exec.Command(goTool, args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			d := strings.Fields(line)[0] // "p [p.test]" is p built for the test
			switch {
			case d == self, d == self+".test", d == self+"_test":
			case strings.HasPrefix(d, "nodehealth.io/"):
				t.Errorf("the model links %s; only the standard library is allowed", d)
			case strings.HasPrefix(d, "k8s.io/"):
				t.Errorf("the model links %s; only the standard library is allowed", d)
			}
		}
	}
}
