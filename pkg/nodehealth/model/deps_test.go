package model

import (
	"strings"
	"testing"

	"nodehealth.io/nodehealth/test/linkcheck"
)

// The model is valuable only while it is independent of the controller it
// checks: it may link nodehealth.io/api and the standard library, never the
// controller's packages nor a Kubernetes client.
func TestTheModelLinksNothingOfTheControllerNorAKubernetesClient(t *testing.T) {
	linkcheck.Check(t, "nodehealth.io/nodehealth/pkg/nodehealth/model", func(d string) string {
		switch {
		case d == "nodehealth.io/nodehealth/pkg/nodehealth" || strings.HasPrefix(d, "nodehealth.io/nodehealth/pkg/nodehealth/"):
			return "the controller's package"
		case d == "k8s.io/client-go" || strings.HasPrefix(d, "k8s.io/client-go/"):
			return "the Kubernetes client"
		case strings.HasPrefix(d, "nodehealth.io/") && !strings.HasPrefix(d, "nodehealth.io/api/"):
			return "only nodehealth.io/api and the standard library are allowed"
		}
		return ""
	})
}
