// Package e2e holds the end-to-end tests on a real node: the product's
// images run as pods on a kubelet with containerd (test/framework/realnode)
// beside the kwok nodes, installed with the project's Helm chart. Run them
// with make test-e2e, which installs and builds what they need
// (hack/realnode-prereqs.sh); they need root. docs/development.md describes
// the tier and its limits.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

const (
	// taintKey is the chart's default readiness taint.
	taintKey = "nodehealth.io/not-ready"
	// realLabel selects the real node in the rules and nodeSelectors.
	realLabel = "nodehealth.io/e2e-real-node"
	// release and its namespace are the Helm release of every test.
	release   = "nodehealth"
	namespace = "nodehealth-system"
)

// cluster is one test's control plane, real node and kwok nodes.
type cluster struct {
	t    *testing.T
	env  *framework.Environment
	node *realnode.Node
	// registry, when set, serves the product images: the chart is installed
	// from it by digest with the chart's registry (ghcr.io) and pull policy,
	// and the node loads only the tests' own images. Otherwise the node
	// loads every image and the chart runs realnode.ProductImage's names
	// with pullPolicy Never.
	registry *imageRegistry
}

// startCluster starts a control plane, kwokNodes kwok nodes and one real
// node registered with the readiness taint (kubelet registerWithTaints).
func startCluster(ctx context.Context, t *testing.T, kwokNodes int) *cluster {
	t.Helper()
	c := startControlPlane(ctx, t, kwokNodes)
	c.startNode(ctx, true)
	return c
}

// startNode starts the real node, registered with the readiness taint
// (kubelet registerWithTaints) when tainted.
func (c *cluster) startNode(ctx context.Context, tainted bool) {
	c.t.Helper()
	opts := realnode.Options{
		Labels:    map[string]string{realLabel: "true"},
		KubeProxy: true,
	}
	if c.registry != nil {
		opts.Images = realnode.TestImages()
		opts.Mirrors = map[string]string{projectRegistry: c.registry.endpoint}
	}
	if tainted {
		opts.Taints = []corev1.Taint{{Key: taintKey, Effect: corev1.TaintEffectNoSchedule}}
	}
	node, err := realnode.Start(ctx, c.env, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.node = node
}

// startControlPlane starts a control plane and kwokNodes kwok nodes.
func startControlPlane(ctx context.Context, t *testing.T, kwokNodes int) *cluster {
	t.Helper()
	realnode.SkipUnlessEnabled(t)
	// The chart's uninstall hook is a Job: the default controllers lack it.
	// endpointslice-controller: Services of pods route (kube-proxy).
	controllers := append(slices.Clone(framework.DefaultControllers), "job-controller", "endpointslice-controller")
	env, err := framework.Start(ctx, framework.WithLogf(t.Logf), framework.WithControllers(controllers...))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, env: env}
	t.Cleanup(func() {
		if t.Failed() {
			env.KeepArtifacts()
		}
		if c.node != nil {
			c.node.Stop()
		}
		_ = env.Stop()
	})
	for i := 1; i <= kwokNodes; i++ {
		if _, err := env.CreateReadyNode(ctx, fmt.Sprintf("kwok-node-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// helm runs the Helm CLI of make helm against the cluster.
func (c *cluster) helm(ctx context.Context, args ...string) string {
	c.t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		c.t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "tools", "bin", "helm")
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", c.env.Kubeconfig)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(c.env.Dir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.env.Dir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(c.env.Dir, "helm-data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install installs the chart with the e2e images and values (YAML) on top,
// and waits until its workloads are ready.
func (c *cluster) install(ctx context.Context, values string) {
	c.t.Helper()
	c.installChart(ctx, values, "--wait", "--timeout", "3m")
}

// installChart runs helm install with the e2e values and extra flags.
func (c *cluster) installChart(ctx context.Context, values string, flags ...string) {
	c.t.Helper()
	file := filepath.Join(c.env.Dir, "values.yaml")
	// The images hack/realnode-prereqs.sh loaded (realnode.ProductImage).
	base := fmt.Sprintf(`image:
  registry: %s
  tag: e2e
  pullPolicy: Never
controller:
  replicas: 1
  nodeSelector: {%q: "true"}
`, realnode.ProductRegistry, realLabel)
	if c.registry != nil {
		// The chart's image names, tag and pull policy; only the digest
		// is set, as a user pins a release's images.
		base = fmt.Sprintf(`controller:
  replicas: 1
  nodeSelector: {%q: "true"}
  image:
    digest: %s
`, realLabel, c.registry.digests["nodehealth-controller"])
	}
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		c.t.Fatal(err)
	}
	extra := filepath.Join(c.env.Dir, "values-test.yaml")
	if err := os.WriteFile(extra, []byte(values), 0o644); err != nil {
		c.t.Fatal(err)
	}
	start := time.Now()
	c.helm(ctx, append([]string{"install", release, "deploy/charts/nodehealth", "--namespace", namespace, "--create-namespace",
		"--values", file, "--values", extra}, flags...)...)
	c.t.Logf("helm install done in %s", time.Since(start).Round(100*time.Millisecond))
}

// productImage is the image and pull policy of a product binary in the
// tests' own objects (the extension's sidecar): the registry's, by digest,
// when the cluster has one, else the loaded one.
func (c *cluster) productImage(binary string) (string, corev1.PullPolicy) {
	if c.registry != nil {
		return c.registry.image(binary), corev1.PullIfNotPresent
	}
	return realnode.ProductImage(binary), corev1.PullNever
}

// tainted reports whether a node carries the readiness taint.
func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == taintKey {
			return true
		}
	}
	return false
}

// waitNode waits until cond holds for the real node, describing what it
// waits for in the failure.
func (c *cluster) waitNode(ctx context.Context, what string, timeout time.Duration, cond func(*corev1.Node) bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.env.WaitForNode(ctx, c.node.Name(), cond); err != nil {
		c.t.Fatalf("node %s: %s: %v", c.node.Name(), what, err)
	}
	return time.Since(start)
}

// waitPod polls a pod until cond holds.
func (c *cluster) waitPod(ctx context.Context, ns, name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	c.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		c.t.Fatalf("pod %s/%s: %s: %v; status %+v", ns, name, what, err, status)
	}
	return last
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podsOf lists the pods matching a label selector.
func (c *cluster) podsOf(ctx context.Context, ns, selector string) []corev1.Pod {
	c.t.Helper()
	list, err := c.env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.t.Fatal(err)
	}
	return list.Items
}
