package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

// Component is one piece of nodehealth the sandbox runs on top of the control plane:
// the node-health controller, the extension heartbeat sidecars, the update operator and
// agents. Components start in the order of the components slice, after the control
// plane and the simulated nodes are ready, and are stopped with the environment.
type Component interface {
	// Name identifies the component in the sandbox's output.
	Name() string
	// Start starts the component and returns once it is running. Start long-running
	// processes with env.StartProcess so that they log to env.LogDir and stop with the
	// sandbox; start in-process goroutines on ctx, which is canceled at shutdown.
	Start(ctx context.Context, env *Env) error
	// TryThis returns shell commands, runnable from the repository root with the
	// printed KUBECONFIG, that show what the component does (one command per entry;
	// a line starting with "#" is printed as a comment).
	TryThis() []string
}

// NodeDecorator is implemented by a Component that changes the simulated nodes before
// they are created, e.g. to register them with a startup taint as kubelet's
// registerWithTaints does. DecorateNode runs for every node, before any Start.
type NodeDecorator interface {
	DecorateNode(node *corev1.Node)
}

// Stopper is implemented by a Component that must undo something before the sandbox's
// processes are stopped, e.g. resume a process it paused, which could not handle the
// SIGTERM of the shutdown otherwise. Stop runs for every component, in reverse start
// order, before the environment stops its processes.
type Stopper interface {
	Stop()
}

// Restarter is implemented by a Component whose processes end and start again
// on their own, e.g. on a simulated node's reboot; the sandbox does not stop
// when one of them exits.
type Restarter interface {
	Restarts(process string) bool
}

// Env is what a Component gets to work with.
type Env struct {
	*framework.Environment

	// RepoRoot is the repository root (the sandbox's working directory).
	RepoRoot string
	// Dir is the sandbox directory (--dir, default <repo root>/_sandbox): put config
	// files and anything a user may want to look at here.
	Dir string
	// KubeconfigPath is the admin kubeconfig users are told to export.
	KubeconfigPath string
	// Nodes are the names of the kwok-simulated nodes, all Ready.
	Nodes []string
	// RealNode is the real node of --real-nodes=1, or nil.
	RealNode *realnode.Node

	mu          sync.Mutex
	supervisors map[string]*framework.Supervisor
}

// components is the plug-in point of the sandbox. To add a component, implement
// Component in a new file of this package (e.g. controller.go) and append an instance
// here; its TryThis commands are printed with the sandbox's usage instructions.
var components = []Component{
	&extensionsComponent{},
	&controllerComponent{},
	&updaterComponent{},
}

// ProductBinary returns the path of a binary of cmd/ in <repo root>/_output/bin. When it
// is missing, every binary of cmd/ is built there first, as `make build` does.
func (e *Env) ProductBinary(ctx context.Context, name string) (string, error) {
	dir := filepath.Join(e.RepoRoot, "_output", "bin")
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	fmt.Printf("sandbox: %s is missing; building cmd/ (go build -o _output/bin/ ./cmd/...)...\n", display(path))
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	build.Dir = e.RepoRoot
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building %s (try `make build`): %w", name, err)
	}
	return path, nil
}

// Supervise starts a long-running process of a component and keeps it running
// as a kubelet keeps a container: when it exits — the controller gives up on
// lost leadership, a heartbeat on a vanished API server — it is started again
// after a back-off (1s doubling to 30s, shorter than a kubelet's 10s to 5m so
// the sandbox recovers quickly), and the sandbox says so. onRestart, when not
// nil, runs before each restart. The sandbox does not stop when a supervised
// process exits.
func (e *Env) Supervise(ctx context.Context, spec framework.ProcessSpec, onRestart func()) (*framework.Supervisor, error) {
	s, err := e.Environment.Supervise(ctx, spec, framework.SupervisorOptions{
		InitialBackoff: time.Second,
		MaxBackoff:     30 * time.Second,
		ResetAfter:     time.Minute,
		OnExit: func(p *framework.Process, err error, backoff time.Duration) {
			fmt.Printf("sandbox: %s exited (%v); restarting it in %s, as a kubelet restarts a container (log: %s)\n",
				p.Name, exitErr(p), backoff, display(p.LogPath))
			if onRestart != nil {
				onRestart()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.supervisors == nil {
		e.supervisors = map[string]*framework.Supervisor{}
	}
	e.supervisors[spec.Name] = s
	return s, nil
}

// supervised reports whether a process of this name is restarted when it exits.
func (e *Env) supervised(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.supervisors[name]
	return ok
}

// stopSupervising ends every restart loop, so that the shutdown's SIGTERMs
// are final.
func (e *Env) stopSupervising() {
	e.mu.Lock()
	sups := maps.Clone(e.supervisors)
	e.mu.Unlock()
	for _, s := range sups {
		s.Detach()
	}
}

// exitErr is how a process exited: "exit status 1", "signal: killed", or
// "exit status 0" for a clean exit.
func exitErr(p *framework.Process) string {
	if _, err := p.Exited(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}
