package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const taintKey = "nodehealth.io/not-ready"

// docsNode is the node the documented commands install onto: the
// Deployments' pods are scheduled there (kwok plays them), and the uninstall
// sections must clear its readiness taint.
const docsNode = "docs-node"

// TestTheInstallDocsCommandsInstallUpgradeAndUninstall runs docs/install.md: both install methods, upgrade and
// uninstall. Before each "Uninstall" section the node carries the
// readiness taint, as a gated node would; after it, the taint must be gone.
func TestTheInstallDocsCommandsInstallUpgradeAndUninstall(t *testing.T) {
	runDoc(t, "docs/install.md", 9)
}

// TestTheReadmesQuickStartRunsOnACluster runs the README's commands (its quick start on a cluster), then
// removes what they installed.
func TestTheReadmesQuickStartRunsOnACluster(t *testing.T) {
	runDoc(t, "README.md", 1)
	ctx := testenv.ContextWithTimeout(t, 3*time.Minute)
	if out, err := testenv.Env(t).Kubectl(ctx, "delete", "-k", "deploy/", "--ignore-not-found"); err != nil {
		t.Fatalf("cleaning up: %v\n%s", err, out)
	}
}

// runDoc runs the ```sh blocks of a document section by section, each
// section in one bash (set -euo pipefail) so that a section's blocks share
// shell state, and fails on the first failing section. minRun guards
// against a document whose blocks silently stopped being found.
func runDoc(t *testing.T, doc string, minRun int) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 15*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := shellBlocks(doc, string(text))
	if err != nil {
		t.Fatal(err)
	}

	ensureNode(t, ctx)
	workDir := workTree(t, root)
	shellEnv := []string{
		"HOME=" + t.TempDir(),
		"KUBECONFIG=" + env.Kubeconfig,
		"PATH=" + strings.Join([]string{toolsBin(t, root), filepath.Dir(testenv.Binary(t, "nodehealth-controller")), env.BinDir, "/usr/bin", "/bin"}, ":"),
	}

	var sections []string
	bySection := map[string][]block{}
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			t.Logf("%s:%d (%s): skipped: %s", b.file, b.line, b.section, b.skip)
			continue
		}
		if _, ok := bySection[b.section]; !ok {
			sections = append(sections, b.section)
		}
		bySection[b.section] = append(bySection[b.section], b)
		ran++
	}
	if ran < minRun {
		t.Fatalf("%s has %d runnable sh blocks, want at least %d", doc, ran, minRun)
	}
	for _, section := range sections {
		uninstall := strings.HasPrefix(section, "Uninstall")
		if uninstall {
			taintNode(t, ctx)
		}
		var script strings.Builder
		// Each command is traced with the seconds since the section began,
		// so that a section's output says which command the time went to
		// (twice in nine CI runs the install document took 5 minutes
		// instead of 35 s, and passed).
		script.WriteString("set -euo pipefail\nPS4='+ [${SECONDS}s] '\nset -x\n")
		for _, b := range bySection[section] {
			script.WriteString("# " + b.file + ":" + strconv.Itoa(b.line) + "\n" + b.script)
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
		cmd.Dir = workDir
		cmd.Env = shellEnv
		began := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(began).Round(time.Second)
		if err != nil {
			t.Fatalf("%s, section %q failed after %s: %v\nscript:\n%s\noutput:\n%s", doc, section, took, err, script.String(), out)
		}
		t.Logf("%s, section %q: ok in %s\n%s", doc, section, took, out)
		if uninstall {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, docsNode, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintKey }) {
				t.Errorf("after %q the node keeps the readiness taint: %v", section, n.Spec.Taints)
			}
		}
	}
}

// ensureNode creates the kwok node the documented installs run on.
func ensureNode(t *testing.T, ctx context.Context) {
	t.Helper()
	env := testenv.Env(t)
	if _, err := env.Client.CoreV1().Nodes().Get(ctx, docsNode, metav1.GetOptions{}); err == nil {
		return
	}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, framework.NewKwokNode(docsNode, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// taintNode puts the readiness taint on the node, as the controller or the
// admission policy would have.
func taintNode(t *testing.T, ctx context.Context) {
	t.Helper()
	env := testenv.Env(t)
	n, err := env.Client.CoreV1().Nodes().Get(ctx, docsNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintKey }) {
		return
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoSchedule})
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// workTree is a directory whose entries link to the repository's top level:
// the documented relative paths (deploy/...) work, and files the commands
// write (values files) stay out of the repository.
func workTree(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// toolsBin returns _output/tools/bin, which must hold helm (make helm; make
// test-integration builds it first).
func toolsBin(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "_output", "tools", "bin")
	if _, err := os.Stat(filepath.Join(dir, "helm")); err != nil {
		t.Fatalf("the documented commands need helm: run `make helm` (builds Helm v4 into %s): %v", dir, err)
	}
	return dir
}
