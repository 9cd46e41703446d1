package docs_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

var fileMarker = regexp.MustCompile(`^<!--\s*doc-test:\s*file:\s*(\S+)\s*-->$`)

// fileBlocks returns the fenced blocks of a Markdown document marked, on the
// line before them, as a file a reader writes:
//
//	<!-- doc-test: file: fleet.yaml -->
//
// by name, their common indentation (a list item's) removed.
func fileBlocks(file, text string) (map[string]string, error) {
	out := map[string]string{}
	var (
		prev   string
		name   string // the open block's file; "" when unmarked
		indent string
		open   bool
		lines  []string
		start  int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case open && trimmed == "```":
			if name != "" {
				if _, dup := out[name]; dup {
					return nil, fmt.Errorf("%s:%d: a second block for file %s", file, start, name)
				}
				out[name] = strings.Join(lines, "\n") + "\n"
			}
			open, name, lines = false, "", nil
		case open:
			lines = append(lines, strings.TrimPrefix(line, indent))
		case strings.HasPrefix(trimmed, "```"):
			open, start = true, n
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			if m := fileMarker.FindStringSubmatch(prev); m != nil {
				name = m[1]
			}
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if open {
		return nil, fmt.Errorf("%s:%d: unclosed code block", file, start)
	}
	return out, nil
}

func TestFileBlocksAreTheBlocksMarkedWithAFileNameUnindented(t *testing.T) {
	doc := "1. Values:\n   <!-- doc-test: file: v.yaml -->\n   ```yaml\n   a:\n     b: 1\n   ```\n```yaml\nnot: marked\n```\n"
	got, err := fileBlocks("x.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["v.yaml"] != "a:\n  b: 1\n" {
		t.Errorf("fileBlocks = %q", got)
	}
}

// docs/migrating-from-brupop.md, run as far as a cluster without Brupop and
// without nodes that run containers allows: the Helm values it gives pass
// the chart's values schema (helm template), and the UpdatePolicy it gives
// is accepted by the real API server, with the CRD's validation, and reads
// back with the Brupop settings the guide maps.
func TestTheBrupopMigrationGuidesValuesAndPolicyAreAccepted(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const doc = "docs/migrating-from-brupop.md"
	text, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	files, err := fileBlocks(doc, string(text))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string) string {
		t.Helper()
		content, ok := files[name]
		if !ok {
			t.Fatalf("%s has no block marked as file %s", doc, name)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// The values, on top of the install's (docs/install.md installs with
	// the defaults), as the guide's helm upgrade -f applies them.
	helm := exec.CommandContext(ctx, filepath.Join(toolsBin(t, root), "helm"), "template", "nodehealth", "deploy/charts/nodehealth",
		"--namespace", "nodehealth-system", "--kube-version", "v1.37.1", "-f", write("updater-values.yaml"))
	helm.Dir = root
	helm.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	out, err := helm.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's updater-values.yaml does not render: %v\n%s", err, lastLines(string(out), 20))
	}
	for _, want := range []string{"name: update-operator\n", "name: update-agent\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the render of the guide's values has no %q", strings.TrimSpace(want))
		}
	}

	// The policy, applied as the guide says, to the CRD the chart installs.
	if _, err := env.Client.Discovery().ServerResourcesForGroupVersion("updates.nodehealth.io/v1alpha1"); apierrors.IsNotFound(err) {
		if err := env.InstallCRDs(ctx); err != nil {
			t.Fatal(err)
		}
		// A later documented helm install must find no CRD it does not own.
		t.Cleanup(func() {
			if out, err := env.Kubectl(context.Background(), "delete", "-k", "deploy/crds/", "--ignore-not-found"); err != nil {
				t.Errorf("removing the CRDs: %v\n%s", err, out)
			}
		})
	} else if err != nil {
		t.Fatal(err)
	}
	fleet := write("fleet.yaml")
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", fleet); err != nil {
		t.Fatalf("the guide's fleet.yaml is refused: %v\n%s", err, out)
	}
	c := testenv.NodehealthClient(t).UpdatesV1alpha1().UpdatePolicies()
	t.Cleanup(func() { _ = c.Delete(ctx, "fleet", metav1.DeleteOptions{}) })
	p, err := c.Get(ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.MaxConcurrentUpdates.String() != "1" || len(p.Spec.Windows) != 1 || p.Spec.Windows[0].Schedule != "0 18 * * 1,3" ||
		p.Spec.Windows[0].Duration.Duration != 2*time.Hour {
		t.Errorf("the guide's policy reads back as %+v, want one at a time in a 2h window from 18:00 on Mondays and Wednesdays", p.Spec)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
