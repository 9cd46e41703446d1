package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
)

// SimNodeOptions describe a simulated Bottlerocket node.
type SimNodeOptions struct {
	// Name of the Node; Labels are added to kwok's (add the updater's managed
	// label so that the update-agent DaemonSet runs a pod there).
	Name   string
	Labels map[string]string
	// Version is the OS version the node runs first; Offered are the
	// versions its update repository offers.
	Version string
	Offered []string
	// Faults and Delays configure the node's emulated Bottlerocket API.
	// Delays.SettingsApply 0 takes emulator.DefaultSettingsApply, as on a
	// real host a committed setting reaches the updater a moment later; a
	// negative one applies settings at once.
	Faults emulator.Faults
	Delays emulator.Delays

	// AgentBinary is the update-agent executable; empty runs no agent.
	AgentBinary string
	// AgentNamespace and AgentPodSelector find the agent's DaemonSet pod on
	// this node, whose pod-bound token the agent process uses (default
	// nodehealth-update-agent and app.kubernetes.io/name=update-agent, as in
	// deploy/update-agent). The pod must be DaemonSet-owned, so that the
	// agent's own drain never evicts it and invalidates the token.
	AgentNamespace, AgentPodSelector, AgentServiceAccount string
	// AgentConfig returns the UpdateAgentConfiguration YAML for the agent,
	// given the kubeconfig path, the API socket and a free loopback address
	// for /metrics and /healthz. Nil writes a minimal one.
	AgentConfig func(kubeconfig, socket, servingAddr string) string

	// Heartbeats are the node's other processes (extension heartbeats) that
	// die with a reboot and start again after it.
	Heartbeats []ProcessSpec
	// HeartbeatIdentity, when set, is the DaemonSet whose pod on this node
	// the heartbeats run as: its pod-bound kubeconfig is written to
	// Kubeconfig (which their configuration names) before they start, and
	// its name and namespace are added to their environment. Nil leaves
	// their credentials to their configuration.
	HeartbeatIdentity *HeartbeatIdentity

	// RebootDelay is how long the node is down (default 2s).
	RebootDelay time.Duration
	// KillSignal is how a reboot ends the agent: SIGKILL (default) or
	// SIGTERM (it may then release its Lease as on a real shutdown).
	KillSignal syscall.Signal
}

// HeartbeatIdentity is SimNodeOptions.HeartbeatIdentity.
type HeartbeatIdentity struct {
	PodIdentity
	Kubeconfig string
}

// SimNode is a kwok node with a Bottlerocket API emulator, an update agent and
// extension heartbeats, which reboots for real as far as the API server can
// tell: on the emulator's reboot it kills the agent and the heartbeats,
// changes the Node's bootID after RebootDelay, and starts them again.
type SimNode struct {
	env  *Environment
	opts SimNodeOptions
	dir  string

	// Emulator is the node's Bottlerocket API (control it with Offer,
	// SetFaults...; State().Reboots counts reboots).
	Emulator *emulator.Emulator
	// Socket is the emulator's socket path.
	Socket string

	mu         sync.Mutex
	boot       int
	agent      *Process
	heartbeats []*Process
	kubeconfig string
	// agentPod is the agent's DaemonSet pod on the node, whose name and
	// namespace the agent gets as the downward API would give them.
	agentPod  *corev1.Pod
	config    string
	closed    bool
	rebootErr error
	// stopReporter ends the bootID reporter.
	stopReporter context.CancelFunc
}

// BootID returns the bootID a SimNode reports in its boot number n.
func BootID(node string, n int) string { return fmt.Sprintf("%s-boot-%d", node, n) }

// StartSimNode creates the kwok Node with a non-empty bootID (the controller ignores a
// change from an empty one), starts its emulator, its heartbeats and, when
// AgentBinary is set, its agent. Close stops everything but the Node.
func (e *Environment) StartSimNode(ctx context.Context, opts SimNodeOptions) (*SimNode, error) {
	if opts.Name == "" {
		return nil, errors.New("simnode: a name is required")
	}
	if opts.Version == "" {
		opts.Version = "1.20.0"
	}
	if opts.RebootDelay <= 0 {
		opts.RebootDelay = 2 * time.Second
	}
	if opts.KillSignal == 0 {
		opts.KillSignal = syscall.SIGKILL
	}
	if opts.AgentNamespace == "" {
		opts.AgentNamespace = "nodehealth-update-agent"
	}
	if opts.AgentPodSelector == "" {
		opts.AgentPodSelector = "app.kubernetes.io/name=update-agent"
	}
	if opts.AgentServiceAccount == "" {
		opts.AgentServiceAccount = "update-agent"
	}
	// Short: Unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "simnode-")
	if err != nil {
		return nil, err
	}
	s := &SimNode{env: e, opts: opts, dir: dir, Socket: filepath.Join(dir, "api.sock")}
	// kwok initializes a new node's status (with an empty bootID) once; a
	// bootID written before that could be overwritten, so wait for it.
	if _, err := e.CreateReadyNode(ctx, opts.Name, opts.Labels); err != nil {
		return nil, err
	}
	if _, err := e.SetBootID(ctx, opts.Name, BootID(opts.Name, 0)); err != nil {
		return nil, err
	}
	s.startBootIDReporter()
	delays := opts.Delays
	if delays.SettingsApply == 0 {
		delays.SettingsApply = emulator.DefaultSettingsApply
	}
	em, err := emulator.New(emulator.Config{
		SocketPath: s.Socket, StateFile: filepath.Join(dir, "state.json"),
		Version: opts.Version, Offered: opts.Offered, Faults: opts.Faults, Delays: delays,
		RebootHook: s.reboot,
	})
	if err != nil {
		return nil, err
	}
	if err := em.Start(); err != nil {
		return nil, err
	}
	s.Emulator = em
	if opts.AgentBinary != "" {
		if err := s.prepareAgent(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if opts.HeartbeatIdentity != nil {
		if err := s.prepareHeartbeats(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.startProcesses(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Name is the node's name.
func (s *SimNode) Name() string { return s.opts.Name }

// Boot is the number of completed reboots.
func (s *SimNode) Boot() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boot
}

// Agent is the running agent process (nil while the node is down).
func (s *SimNode) Agent() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent
}

// Heartbeats are the running heartbeat processes of the current boot.
func (s *SimNode) Heartbeats() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Process(nil), s.heartbeats...)
}

// RebootError is the error of the last reboot simulation, if any.
func (s *SimNode) RebootError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rebootErr
}

// prepareAgent finds the agent's DaemonSet pod on the node and writes a
// kubeconfig with a token bound to it, as the kubelet's projected volume
// would hold.
func (s *SimNode) prepareAgent(ctx context.Context) error {
	pod, err := s.env.DaemonSetPod(ctx, PodIdentity{Namespace: s.opts.AgentNamespace, Selector: s.opts.AgentPodSelector}, s.opts.Name)
	if err != nil {
		return fmt.Errorf("simnode %s: the agent: %w", s.opts.Name, err)
	}
	s.agentPod = pod
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return s.env.WritePodKubeconfig(ctx, pod, s.kubeconfig)
}

// prepareHeartbeats gives the heartbeats their DaemonSet pod's identity: its
// kubeconfig at HeartbeatIdentity.Kubeconfig and its name and namespace in
// their environment.
func (s *SimNode) prepareHeartbeats(ctx context.Context) error {
	id := s.opts.HeartbeatIdentity
	pod, err := s.env.DaemonSetPod(ctx, id.PodIdentity, s.opts.Name)
	if err != nil {
		return fmt.Errorf("simnode %s: the heartbeats: %w", s.opts.Name, err)
	}
	if err := s.env.WritePodKubeconfig(ctx, pod, id.Kubeconfig); err != nil {
		return err
	}
	for i := range s.opts.Heartbeats {
		s.opts.Heartbeats[i].Env = append(slices.Clone(s.opts.Heartbeats[i].Env), PodEnv(pod)...)
	}
	return nil
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// startProcesses starts the agent and the heartbeats for the current boot.
func (s *SimNode) startProcesses() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.opts.AgentBinary != "" {
		addrs, err := FreeLoopbackAddresses(1)
		if err != nil {
			return err
		}
		var cfg string
		if s.opts.AgentConfig != nil {
			cfg = s.opts.AgentConfig(s.kubeconfig, s.Socket, addrs[0])
		} else {
			cfg = fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateAgentConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: %s
  healthzBindAddress: %s
apiSocketPath: %s
updateCheckInterval: 10s
`, s.kubeconfig, addrs[0], addrs[0], s.Socket)
		}
		s.config = filepath.Join(s.dir, fmt.Sprintf("agent-%d.yaml", s.boot))
		if err := os.WriteFile(s.config, []byte(cfg), 0o644); err != nil {
			return err
		}
		p, err := s.env.StartProcess(ProcessSpec{
			Name: fmt.Sprintf("%s-update-agent-%d", s.opts.Name, s.boot),
			Path: s.opts.AgentBinary,
			Args: []string{"--config", s.config, "--node-name", s.opts.Name, "-v=2"},
			Env:  s.agentEnv(),
		})
		if err != nil {
			return err
		}
		s.agent = p
	}
	s.heartbeats = nil
	for _, spec := range s.opts.Heartbeats {
		spec.Name = fmt.Sprintf("%s-%d", spec.Name, s.boot)
		p, err := s.env.StartProcess(spec)
		if err != nil {
			return err
		}
		s.heartbeats = append(s.heartbeats, p)
	}
	return nil
}

// stopProcesses ends the node's processes as a reboot does.
func (s *SimNode) stopProcesses(sig syscall.Signal) {
	s.mu.Lock()
	procs := append([]*Process{s.agent}, s.heartbeats...)
	s.agent, s.heartbeats = nil, nil
	s.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		if sig == syscall.SIGTERM {
			_ = p.Stop(10 * time.Second)
			continue
		}
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.Done()
		_ = p.Stop(0) // closes the log file
	}
}

// reboot is the emulator's reboot hook: the processes die, the node is down
// for RebootDelay, the Node reports a new bootID. The host then boots (the
// emulator serves again) and the processes start again.
func (s *SimNode) reboot(ctx context.Context, ev emulator.RebootEvent) error {
	s.env.Logf("simnode %s: rebooting %s → %s (reboot %d)", s.opts.Name, ev.From, ev.To, ev.Reboot)
	s.stopProcesses(s.opts.KillSignal)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.opts.RebootDelay):
	}
	s.mu.Lock()
	s.boot = ev.Reboot
	s.mu.Unlock()
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.env.SetBootID(pctx, s.opts.Name, BootID(s.opts.Name, ev.Reboot))
	go func() {
		// The emulator boots once the hook returned.
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if werr := s.Emulator.WaitForReboots(wctx, ev.Reboot); werr != nil {
			s.setRebootErr(werr)
			return
		}
		if serr := s.startProcesses(); serr != nil {
			s.setRebootErr(serr)
		}
	}()
	if err != nil {
		s.setRebootErr(err)
	}
	return err
}

func (s *SimNode) setRebootErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebootErr = err
}

// startBootIDReporter keeps the Node's bootID at the SimNode's current boot,
// as a kubelet reports its bootID in every status update: kwok sometimes
// writes node status from a stale read and clears or reverts the bootID, and
// an agent that finds no bootID cannot tell a reboot from a restart.
func (s *SimNode) startBootIDReporter() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopReporter = cancel
	lw := cache.NewListWatchFromClient(s.env.Client.CoreV1().RESTClient(), "nodes", "",
		fields.OneTermEqualSelector("metadata.name", s.opts.Name))
	check := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		s.mu.Lock()
		want, closed := BootID(s.opts.Name, s.boot), s.closed
		s.mu.Unlock()
		if closed || node.Status.NodeInfo.BootID == want {
			return
		}
		s.env.Logf("simnode %s: bootID is %q, reporting %q again", s.opts.Name, node.Status.NodeInfo.BootID, want)
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		defer pcancel()
		if _, err := s.env.SetBootID(pctx, s.opts.Name, want); err != nil && ctx.Err() == nil {
			s.env.Logf("simnode %s: %v", s.opts.Name, err)
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    check,
			UpdateFunc: func(_, obj any) { check(obj) },
		},
	})
	go informer.RunWithContext(ctx)
}

// Close stops the processes and the emulator and removes the node's files;
// the Node object stays.
func (s *SimNode) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.stopReporter != nil {
		s.stopReporter()
	}
	s.stopProcesses(syscall.SIGKILL)
	if s.Emulator != nil {
		s.Emulator.Close()
	}
	_ = os.RemoveAll(s.dir)
}

// agentEnv is the agent's downward-API environment: its pod's name (the
// Lease holder) and namespace (where its Events go, the one namespace its
// Role allows).
func (s *SimNode) agentEnv() []string {
	if s.agentPod == nil {
		return []string{"POD_NAME=update-agent-" + s.opts.Name}
	}
	return PodEnv(s.agentPod)
}
