package deploy_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Names the manifests, the configuration and the RBAC must agree on (docs/system-extensions.md,
// docs/config/NodeHealthControllerConfiguration.md).
const (
	systemNamespace = "nodehealth-system"
	leaseNamespace  = "node-extension-lease"
	controllerName  = "nodehealth-controller"
	serviceAccount  = "system:serviceaccount:" + systemNamespace + ":" + controllerName
	canaryLease     = "nodehealth-controller-canary"
	taintKey        = "nodehealth.io/not-ready"
	excludeLabel    = "nodehealth.io/exclude"
	priorityClass   = "nodehealth-critical"
	configMapName   = "nodehealth-controller-config"
	configMountPath = "/etc/nodehealth"
	configFileName  = "config.yaml"
)

// repoPath returns a path inside the repository.
func repoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// kubectl runs the control plane's kubectl against the test cluster, from the
// repository root (so that documented relative paths such as deploy/ work) and
// without the developer's ~/.kube. It returns stdout and stderr and the error.
func kubectl(t testing.TB, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	env := testenv.Env(t)
	cmd := exec.CommandContext(ctx, env.Binary(framework.Kubectl), append([]string{"--kubeconfig=" + env.Kubeconfig}, args...)...)
	cmd.Dir = repoPath(t)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustKubectl runs kubectl and fails the test on a non-zero exit.
func mustKubectl(t testing.TB, ctx context.Context, args ...string) string {
	t.Helper()
	stdout, stderr, err := kubectl(t, ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// render runs `kubectl kustomize dir` and decodes every object into its typed
// form with the client-go scheme, strictly: a field the scheme does not know
// is an error.
func render(t testing.TB, dir string) []runtime.Object {
	t.Helper()
	out := mustKubectl(t, testenv.Context(t), "kustomize", dir)
	return decodeAll(t, out)
}

func decodeAll(t testing.TB, manifests string) []runtime.Object {
	t.Helper()
	objs, err := framework.DecodeManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the one rendered object of type T named name.
func find[T runtime.Object](t testing.TB, objs []runtime.Object, name string) T {
	t.Helper()
	var zero T
	for _, o := range objs {
		if typed, ok := o.(T); ok {
			if m, ok := any(typed).(interface{ GetName() string }); ok && m.GetName() == name {
				return typed
			}
		}
	}
	t.Fatalf("no %T named %s in the rendered manifests", zero, name)
	return zero
}
