package model

import (
	"os/exec"
	"strings"
	"testing"
)

// The model is valuable only while it is independent of the controller it
// checks: it may link nodehealth.io/api and the standard library, never the
// controller's packages nor a Kubernetes client.
func TestTheModelLinksNothingOfTheControllerNorAKubernetesClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	const self = "nodehealth.io/nodehealth/pkg/nodehealth/model"
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
			case d == "nodehealth.io/nodehealth/pkg/nodehealth" || strings.HasPrefix(d, "nodehealth.io/nodehealth/pkg/nodehealth/"):
				t.Errorf("the model links the controller's package %s", d)
			case d == "k8s.io/client-go" || strings.HasPrefix(d, "k8s.io/client-go/"):
				t.Errorf("the model links the Kubernetes client %s", d)
			case strings.HasPrefix(d, "nodehealth.io/") && !strings.HasPrefix(d, "nodehealth.io/api/"):
				t.Errorf("the model links %s; only nodehealth.io/api and the standard library are allowed", d)
			}
		}
	}
}
