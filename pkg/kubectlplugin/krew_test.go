package kubectlplugin

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// The krew manifest lists every command the plugin has and the permissions
// of each, and its only placeholders are those its header explains (which
// hack/krew-manifest.sh replaces).
func TestTheKrewManifestListsEveryCommandAndExplainsItsPlaceholders(t *testing.T) {
	data, err := os.ReadFile("../../deploy/krew/nodehealth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(data)
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			p := strings.TrimSpace(path + " " + sub.Name())
			if sub.Runnable() && !strings.Contains(manifest, "kubectl nodehealth "+p) {
				t.Errorf("the krew manifest does not list `kubectl nodehealth %s`", p)
			}
			walk(sub, p)
		}
	}
	walk(NewCommand(genericiooptions.NewTestIOStreamsDiscard()), "")
	for _, perm := range []string{"bottlerocketshadows.updates.nodehealth.io", "updatepolicies.updates.nodehealth.io", "patch nodes", "leases"} {
		if !strings.Contains(manifest, perm) {
			t.Errorf("the krew manifest's caveats do not mention %q", perm)
		}
	}
	body := manifest[strings.Index(manifest, "apiVersion:"):]
	// The placeholders, and the words of the description and file lists.
	allowed := map[string]bool{"VERSION": true, "NODE": true, "EXTENSION": true, "POLICY": true, "PATH": true, "LICENSE": true, "CNI": true, "CSI": true}
	for _, w := range regexp.MustCompile(`\b[A-Z][A-Z0-9_]{2,}\b`).FindAllString(body, -1) {
		if allowed[w] || strings.HasPrefix(w, "SHA256_") {
			continue
		}
		t.Errorf("the krew manifest has the unexplained upper-case word %s", w)
	}
	// The project's home, where the release's archives are published; not a
	// placeholder for whoever publishes it.
	for _, uri := range regexp.MustCompile(`(?m)^\s*(?:homepage|uri):\s*(\S+)$`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(uri[1], "https://github.com/nodehealth/nodehealth/") && uri[1] != "https://github.com/nodehealth/nodehealth" {
			t.Errorf("the krew manifest points to %s, not to github.com/nodehealth/nodehealth", uri[1])
		}
	}
}
