// Command sandbox runs nodehealth's local playground: the real control plane of
// test/framework (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with
// kwok simulating a few nodes, plus every Component in components.go. It writes an
// admin kubeconfig, prints how to use it, and runs until interrupted.
//
// Run it from the repository root:
//
//	go run ./test/sandbox [--nodes=3] [--dir=_sandbox] [--real-nodes=1]
//
// --real-nodes=1 (make sandbox REAL_NODES=1; root, hack/realnode-prereqs.sh)
// adds one real node, sandbox-real-node-1: containerd and a kubelet
// (test/framework/realnode) that run real containers of the images
// hack/realnode-prereqs.sh builds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of kwok-simulated nodes (sandbox-node-1..N)")
	dir := flag.String("dir", "_sandbox", "sandbox directory (kubeconfig, cluster data, logs); relative paths are relative to the repository root")
	flag.IntVar(&realNodes, "real-nodes", 0, "number of real nodes (containerd + kubelet; 0 or 1; needs root and hack/realnode-prereqs.sh)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, stop, *nodes, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}

// realNodes is --real-nodes.
var realNodes int

// realNodeName is the sandbox's real node; realNodeLabel marks it, and the
// controller's rules leave it out (no heartbeats run for it).
const (
	realNodeName  = "sandbox-real-node-1"
	realNodeLabel = "nodehealth.io/sandbox-real-node"
)

func run(ctx context.Context, stopSignals context.CancelFunc, nodeCount int, dir string) error {
	if nodeCount < 0 {
		return fmt.Errorf("--nodes must not be negative")
	}
	if realNodes < 0 || realNodes > 1 {
		return fmt.Errorf("--real-nodes is 0 or 1: one machine runs one real node (docs/development.md)")
	}
	if realNodes == 1 {
		if err := realnode.Supported(); err != nil {
			return fmt.Errorf("--real-nodes=1: %w", err)
		}
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return fmt.Errorf("run the sandbox from inside the repository: %w", err)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	// The cluster's state (etcd data, PKI, logs) is rebuilt on every start: a sandbox
	// is a fresh cluster, and a stale etcd would fight the new CA. Logs of the last run
	// stay until then for inspection.
	clusterDir := filepath.Join(dir, "cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		return err
	}

	fmt.Println("sandbox: starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)...")
	fenv, err := framework.Start(ctx, framework.WithDir(clusterDir))
	if err != nil {
		return err
	}
	env := &Env{Environment: fenv, RepoRoot: root, Dir: dir, KubeconfigPath: filepath.Join(dir, "kubeconfig")}
	defer func() {
		fmt.Println("sandbox: stopping...")
		env.stopSupervising()
		for i := len(components) - 1; i >= 0; i-- {
			if s, ok := components[i].(Stopper); ok {
				s.Stop()
			}
		}
		if err := fenv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		}
		fmt.Println("sandbox: stopped; logs are in", display(fenv.LogDir))
	}()

	kubeconfig, err := os.ReadFile(fenv.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(env.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the sandbox kubeconfig: %w", err)
	}

	zones := []string{"sandbox-zone-a", "sandbox-zone-b", "sandbox-zone-c"}
	for i := range nodeCount {
		name := fmt.Sprintf("sandbox-node-%d", i+1)
		labels := map[string]string{
			"topology.kubernetes.io/region": "sandbox",
			"topology.kubernetes.io/zone":   zones[i%len(zones)],
		}
		node := framework.NewKwokNode(name, labels)
		for _, c := range components {
			if d, ok := c.(NodeDecorator); ok {
				d.DecorateNode(node)
			}
		}
		if _, err := fenv.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		env.Nodes = append(env.Nodes, name)
	}
	for _, name := range env.Nodes {
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := fenv.WaitForNode(waitCtx, name, framework.NodeSchedulable)
		cancel()
		if err != nil {
			return fmt.Errorf("node %s did not become Ready: %w", name, err)
		}
	}

	if realNodes == 1 {
		fmt.Printf("sandbox: starting the real node %s (containerd, kubelet)...\n", realNodeName)
		node, err := realnode.Start(ctx, fenv, realnode.Options{Name: realNodeName, Labels: map[string]string{realNodeLabel: "true"}, KubeProxy: true})
		if err != nil {
			return err
		}
		defer node.Stop()
		env.RealNode = node
	}

	for _, c := range components {
		fmt.Printf("sandbox: starting %s...\n", c.Name())
		if err := c.Start(ctx, env); err != nil {
			return fmt.Errorf("starting %s: %w", c.Name(), err)
		}
	}

	printUsage(env)
	return waitForShutdown(ctx, stopSignals, env)
}

// waitForShutdown returns on SIGINT/SIGTERM, or with an error when a process of the
// sandbox dies on its own (the sandbox would silently stop working otherwise).
// Supervised processes (Env.Supervise) are restarted instead.
func waitForShutdown(ctx context.Context, stopSignals context.CancelFunc, env *Env) error {
	var procs []*framework.Process
next:
	for _, p := range env.Processes() {
		if env.supervised(p.Name) {
			continue
		}
		for _, c := range components {
			if r, ok := c.(Restarter); ok && r.Restarts(p.Name) {
				continue next
			}
		}
		procs = append(procs, p)
	}
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	for _, p := range procs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.Done())})
	}
	chosen, _, _ := reflect.Select(cases)
	// From now on a second Ctrl-C kills the sandbox at once; its children die with it
	// (Pdeathsig).
	stopSignals()
	if chosen == 0 {
		return nil
	}
	p := procs[chosen-1]
	_, err := p.Exited()
	return fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s", p.Name, err, display(p.LogPath), p.LogTail(20))
}

func printUsage(env *Env) {
	kubectl := display(env.Binary(framework.Kubectl))
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe sandbox is up: Kubernetes v1.37.1 at %s with %d simulated nodes (kwok).\n\n", env.APIServerURL, len(env.Nodes))
	fmt.Fprintf(&b, "Use it from another shell:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", displayEnv(env.KubeconfigPath))
	fmt.Fprintf(&b, "  %s get nodes -o wide\n", kubectl)
	fmt.Fprintf(&b, "  %s get leases -n kube-node-lease\n", kubectl)
	if env.RealNode != nil {
		fmt.Fprintf(&b, "\nThe real node %s runs real containers (images: %s, imagePullPolicy Never):\n", env.RealNode.Name(), strings.Join([]string{realnode.WorkloadImage, realnode.ProductImage("<binary>")}, ", "))
		fmt.Fprintf(&b, "  %s run web --image=%s --image-pull-policy=Never --overrides='{\"spec\":{\"nodeName\":\"%s\"}}'\n", kubectl, realnode.WorkloadImage, env.RealNode.Name())
		fmt.Fprintf(&b, "  %s get pod web -o wide    # a bridge IP of %s's pod network\n", kubectl, env.RealNode.Name())
	}
	for _, c := range components {
		if len(c.TryThis()) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", c.Name())
		for _, cmd := range c.TryThis() {
			fmt.Fprintf(&b, "  %s\n", cmd)
		}
	}
	fmt.Fprintf(&b, "\nLogs: %s\n", display(env.LogDir))
	fmt.Fprintf(&b, "Press Ctrl-C to stop the sandbox.\n")
	fmt.Print(b.String())
}

// display shortens path relative to the working directory when it is below it, so the
// printed commands are copy-pasteable from the repository root.
func display(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// displayEnv is display for values exported to other shells, which need an absolute
// path: $PWD/<relative> when below the working directory.
func displayEnv(path string) string {
	if rel := display(path); !filepath.IsAbs(rel) {
		return "$PWD/" + rel
	}
	return path
}
