package model

import (
	"strings"
	"testing"

	"nodehealth.io/nodehealth/test/linkcheck"
)

// The model is valuable only while it is independent of the operator it
// checks: it may link the standard library only — neither pkg/updater/operator (nor
// its agent, shadow controller or Bottlerocket client) nor a Kubernetes
// client or API type.
func TestTheModelLinksNothingOfTheOperatorNorAKubernetesClient(t *testing.T) {
	linkcheck.Check(t, "nodehealth.io/nodehealth/pkg/updater/model", func(d string) string {
		if strings.HasPrefix(d, "nodehealth.io/") || strings.HasPrefix(d, "k8s.io/") {
			return "only the standard library is allowed"
		}
		return ""
	})
}
