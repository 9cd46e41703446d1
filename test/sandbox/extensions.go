package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
)

// The sandbox runs every node's system extensions as the real extension-heartbeat
// sidecar: one process per node and extension, each probing a health endpoint that the
// sandbox serves in-process at /healthz/<extension>/<node>. A user controls them with
// files named after the extension's Lease:
//
//	<dir>/stop/<extension>.<node>   the extension is stopped: its health endpoint
//	                                answers 503, the heartbeat releases the Lease
//	                                (reason ProbeFailed); removing the file makes the
//	                                endpoint healthy again and the heartbeat re-acquires
//	<dir>/crash/<extension>.<node>  the heartbeat process hangs (SIGSTOP): it neither
//	                                renews nor releases, so the Lease expires; removing
//	                                the file resumes it (SIGCONT)
//
// A simulated reboot (a new status.nodeInfo.bootID) ends the node's heartbeat processes
// as a real reboot does: the sandbox kills them (SIGKILL: no release) from the moment it
// sees the new bootID, and starts new ones once each extension is back, after its
// rebootDelay; until then their health endpoints fail. Nothing renews in between, and
// what comes after is a fresh process's start-up (first probe, first renewal), as after
// a real reboot: the controller ungates a rebooted node once every extension renewed
// after the reboot, and its start-up timeline shows when each did.

// Sandbox settings of the extension heartbeats: short durations, so that everything a
// user tries shows within seconds (production defaults: Lease 40s renewed every 10s,
// probe every 10s, released after 3 failures).
const (
	sandboxLeaseSeconds     = 10
	sandboxRenewEvery       = 2 * time.Second // at most a quarter of the Lease, as the heartbeat requires
	sandboxProbePeriod      = time.Second
	sandboxProbeTimeout     = 500 * time.Millisecond
	sandboxFailureThreshold = 2
)

// sandboxExtension is one extension that every sandbox node requires.
type sandboxExtension struct {
	name string
	// rebootDelay is how long the extension is down after its node rebooted: its
	// heartbeat process starts again after it.
	rebootDelay time.Duration
}

// sandboxExtensions are the extensions every sandbox node requires.
var sandboxExtensions = []sandboxExtension{
	{name: "kube-proxy", rebootDelay: 4 * time.Second},
	{name: "cni", rebootDelay: 10 * time.Second},
}

// extensionsComponent runs one extension-heartbeat process per node and extension,
// the health endpoints they probe, and the stop/crash/reboot switches.
type extensionsComponent struct {
	stopDir, crashDir, configDir string
	healthBase                   string // http://127.0.0.1:<port>/healthz
	nodes                        []string
	// ctx and env start the heartbeat processes again after a reboot.
	ctx context.Context
	env *Env

	// syncMu serialises sync: it kills and starts processes outside mu, since a
	// supervisor's restart callback takes mu.
	syncMu       sync.Mutex
	mu           sync.Mutex
	heartbeats   []*heartbeatProcess
	boots        map[string]bootState // by node
	healthy      map[string]bool      // last answer of each endpoint, by Lease name
	shuttingDown bool
}

// heartbeatProcess is the extension-heartbeat of one extension on one node.
type heartbeatProcess struct {
	ext        sandboxExtension
	node       string
	configPath string
	servingURL string // /metrics and /healthz of the heartbeat itself
	// pod is the extension's DaemonSet pod on the node, whose pod-bound
	// token the heartbeat authenticates with (identities.go).
	pod  *corev1.Pod
	spec framework.ProcessSpec

	// The fields below are guarded by extensionsComponent.mu.

	// sup keeps the heartbeat running: it is restarted when it exits (a lost
	// API server), as a kubelet restarts a sidecar. Nil while the node's reboot
	// keeps the extension down.
	sup *framework.Supervisor
	// boot is the bootID of the node the process started in: a reboot ends it.
	boot string
	// paused is true while the process is SIGSTOPped (crash file).
	paused bool
}

// lease is the name of the heartbeat's Lease, and of its stop and crash files.
func (h *heartbeatProcess) lease() string { return h.ext.name + "." + h.node }

// podName is the POD_NAME the heartbeat runs with, its Lease's holderIdentity:
// the name of its extension's DaemonSet pod on the node, whose identity it has.
func (h *heartbeatProcess) podName() string { return h.pod.Name }

type bootState struct {
	bootID     string
	rebootedAt time.Time
}

func (c *extensionsComponent) Name() string { return "extensions (extension-heartbeat)" }

func (c *extensionsComponent) Start(ctx context.Context, env *Env) error {
	c.nodes = env.Nodes
	c.ctx, c.env = ctx, env
	if err := env.InstallExtensionSecurity(ctx); err != nil {
		return err
	}
	for _, ext := range sandboxExtensions {
		nodes := env.Nodes
		if ext.name == bottlerocketExtension {
			nodes = append(slices.Clone(nodes), bottlerocketNodeNames()...)
		}
		if _, err := env.InstallExtensionIdentity(ctx, extensionNamespace, ext.name, framework.NodeNames(nodes...)); err != nil {
			return err
		}
	}
	// kwok reports no bootID; a kubelet always does, and a reboot is a change between
	// two non-empty values. Give every node its first boot.
	c.boots = map[string]bootState{}
	c.healthy = map[string]bool{}
	for _, node := range env.Nodes {
		if _, err := env.SetBootID(ctx, node, "boot-1"); err != nil {
			return err
		}
		c.boots[node] = bootState{bootID: "boot-1"}
	}

	// Every start begins with every extension up, and with the configurations of
	// this start only.
	c.stopDir, c.crashDir, c.configDir = filepath.Join(env.Dir, "stop"), filepath.Join(env.Dir, "crash"), filepath.Join(env.Dir, "heartbeat")
	for _, dir := range []string{c.stopDir, c.crashDir, c.configDir} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}

	// The health endpoints: the listener stays open, so its port cannot be taken.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("serving the extensions' health endpoints: %w", err)
	}
	c.healthBase = fmt.Sprintf("http://%s/healthz", l.Addr())
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()

	bin, err := env.ProductBinary(ctx, "extension-heartbeat")
	if err != nil {
		return err
	}
	ports, err := framework.FreeLoopbackPorts(len(env.Nodes) * len(sandboxExtensions))
	if err != nil {
		return err
	}
	for _, node := range env.Nodes {
		for _, ext := range sandboxExtensions {
			h := &heartbeatProcess{ext: ext, node: node}
			port := ports[len(c.heartbeats)]
			h.servingURL = fmt.Sprintf("http://127.0.0.1:%d", port)
			h.configPath = filepath.Join(c.configDir, h.lease()+".yaml")
			if h.pod, err = env.DaemonSetPod(ctx, extensionIdentity(ext.name), node); err != nil {
				return err
			}
			kubeconfig := filepath.Join(c.configDir, h.lease()+".kubeconfig")
			if err := env.WritePodKubeconfig(ctx, h.pod, kubeconfig); err != nil {
				return err
			}
			cfg := heartbeatConfig(kubeconfig, ext.name, port, fmt.Sprintf("%s/%s/%s", c.healthBase, ext.name, node))
			if err := os.WriteFile(h.configPath, []byte(cfg), 0o644); err != nil {
				return err
			}
			h.spec = framework.ProcessSpec{
				Name: "extension-heartbeat." + h.lease(),
				Path: bin,
				Args: []string{"--config", h.configPath, "--node-name", node},
				Env:  framework.PodEnv(h.pod),
			}
			sup, err := c.supervise(h)
			if err != nil {
				return err
			}
			h.sup, h.boot = sup, c.boots[node].bootID
			c.heartbeats = append(c.heartbeats, h)
		}
	}
	if err := c.watchBoots(ctx, env); err != nil {
		return err
	}
	go c.syncLoop(ctx)
	return c.waitForLeases(ctx, env)
}

// supervise starts h's process under a Supervisor.
func (c *extensionsComponent) supervise(h *heartbeatProcess) (*framework.Supervisor, error) {
	return c.env.Supervise(c.ctx, h.spec, func() {
		// A restarted heartbeat runs: the next sync pauses it again if its
		// crash file is still there.
		c.mu.Lock()
		h.paused = false
		c.mu.Unlock()
	})
}

// waitForLeases returns once every heartbeat holds its Lease.
func (c *extensionsComponent) waitForLeases(ctx context.Context, env *Env) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		for _, h := range c.heartbeats {
			if p := h.sup.Current(); h.sup.Restarts() > 0 {
				return fmt.Errorf("%s exited (%v) before it held its Lease; last lines of %s:\n%s", p.Name, exitErr(p), display(p.LogPath), p.LogTail(20))
			}
		}
		held := 0
		if leases, err := env.Client.CoordinationV1().Leases(nodev1alpha1.DefaultLeaseNamespace).List(ctx, metav1.ListOptions{}); err == nil {
			for _, l := range leases.Items {
				if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
					held++
				}
			}
		}
		if held >= len(c.heartbeats) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the extension heartbeats did not hold their Leases within a minute; see %s", display(filepath.Join(env.LogDir, "extension-heartbeat.*.log")))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Stop resumes the heartbeats paused by a crash file, so that they handle the SIGTERM
// of the environment's shutdown instead of waiting for its SIGKILL.
func (c *extensionsComponent) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shuttingDown = true
	for _, h := range c.heartbeats {
		if h.paused && h.sup != nil {
			_ = syscall.Kill(h.sup.Current().Pid(), syscall.SIGCONT)
			h.paused = false
		}
	}
}

// ServeHTTP serves the health endpoints /healthz/<extension>/<node>.
func (c *extensionsComponent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/healthz/")
	extName, node, _ := strings.Cut(rest, "/")
	var ext *sandboxExtension
	for i := range sandboxExtensions {
		if sandboxExtensions[i].name == extName {
			ext = &sandboxExtensions[i]
		}
	}
	c.mu.Lock()
	boot, known := c.boots[node]
	c.mu.Unlock()
	if ext == nil || !known {
		http.NotFound(w, r)
		return
	}
	lease := ext.name + "." + node
	status, body := http.StatusOK, "ok"
	stopFile := filepath.Join(c.stopDir, lease)
	rebooting := false
	if _, err := os.Stat(stopFile); err == nil {
		status, body = http.StatusServiceUnavailable, "stopped from the sandbox: rm "+display(stopFile)+" starts it again"
	} else if back := boot.rebootedAt.Add(ext.rebootDelay); time.Now().Before(back) {
		status, body = http.StatusServiceUnavailable, fmt.Sprintf("restarting after the reboot of %s to bootID %s", node, boot.bootID)
		rebooting = true
	}
	if !rebooting {
		// A reboot says what happens itself; a heartbeat that probes in the
		// moment before it is killed releases nothing.
		c.report(lease, ext.name, node, status == http.StatusOK, body)
	}
	w.WriteHeader(status)
	fmt.Fprintln(w, body)
}

// report prints when an endpoint starts or stops failing.
func (c *extensionsComponent) report(lease, ext, node string, healthy bool, body string) {
	c.mu.Lock()
	was, seen := c.healthy[lease]
	c.healthy[lease] = healthy
	c.mu.Unlock()
	switch {
	case healthy && seen && !was:
		fmt.Printf("sandbox: %s on %s is healthy again: extension-heartbeat re-acquires its Lease\n", ext, node)
	case !healthy && (!seen || was):
		fmt.Printf("sandbox: %s on %s is unhealthy: %s; extension-heartbeat releases its Lease after %d failed probes\n", ext, node, body, sandboxFailureThreshold)
	}
}

// watchBoots watches the nodes' bootIDs. A new bootID kills the node's heartbeats at
// once: an informer sees it within milliseconds of the controller, before a heartbeat
// can renew.
func (c *extensionsComponent) watchBoots(ctx context.Context, env *Env) error {
	factory := informers.NewSharedInformerFactory(env.Client, 0)
	_, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			st, known := c.boots[n.Name]
			id := n.Status.NodeInfo.BootID
			if !known || id == "" || id == st.bootID {
				return
			}
			c.boots[n.Name] = bootState{bootID: id, rebootedAt: time.Now()}
			var delays []string
			for _, e := range sandboxExtensions {
				delays = append(delays, fmt.Sprintf("%s %s", e.name, e.rebootDelay))
			}
			fmt.Printf("sandbox: %s rebooted (bootID %s): its extension-heartbeat processes are killed, and start again once their extension is back: %s\n", n.Name, id, strings.Join(delays, ", "))
			// Kill them now, not at the next tick; not under mu, which the
			// supervisors' callbacks take.
			go c.sync()
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("watching %v did not sync", typ)
		}
	}
	return nil
}

// syncLoop applies the crash files and the ends of reboots.
func (c *extensionsComponent) syncLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.sync()
	}
}

// sync kills the heartbeat processes of a node that rebooted under them, starts new ones
// once their extension is back from the reboot, pauses (SIGSTOP) every running heartbeat
// whose crash file exists and resumes (SIGCONT) the others it paused.
func (c *extensionsComponent) sync() {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()

	var kill, start []*heartbeatProcess
	c.mu.Lock()
	for _, h := range c.heartbeats {
		if c.shuttingDown || c.ctx.Err() != nil {
			break
		}
		boot := c.boots[h.node]
		switch {
		case h.sup != nil && h.boot != boot.bootID:
			kill = append(kill, h)
		case h.sup == nil && !time.Now().Before(boot.rebootedAt.Add(h.ext.rebootDelay)):
			start = append(start, h)
		case h.sup != nil:
			c.syncPauseLocked(h)
		}
	}
	c.mu.Unlock()

	for _, h := range kill {
		c.mu.Lock()
		sup := h.sup
		c.mu.Unlock()
		// End the restart loop first, so that the kill is not followed by a
		// restart into the old boot.
		sup.Detach()
		p := sup.Current()
		if err := p.Kill(); err != nil {
			fmt.Printf("sandbox: killing %s for the reboot of %s: %v\n", p.Name, h.node, err)
		}
		c.mu.Lock()
		h.sup, h.paused = nil, false
		c.mu.Unlock()
	}
	for _, h := range start {
		c.mu.Lock()
		stopping := c.shuttingDown || c.ctx.Err() != nil
		boot := c.boots[h.node]
		c.mu.Unlock()
		if stopping {
			return
		}
		sup, err := c.supervise(h)
		if err != nil {
			// Tried again at the next sync.
			fmt.Printf("sandbox: starting %s after the reboot of %s: %v\n", h.spec.Name, h.node, err)
			continue
		}
		c.mu.Lock()
		h.sup, h.boot = sup, boot.bootID
		c.mu.Unlock()
		fmt.Printf("sandbox: %s on %s is back %s after the reboot: a new extension-heartbeat (pid %d) probes it and renews its Lease\n",
			h.ext.name, h.node, time.Since(boot.rebootedAt).Round(100*time.Millisecond), sup.Current().Pid())
	}
}

// syncPauseLocked pauses (SIGSTOP) h while its crash file exists, and resumes
// (SIGCONT) it once the file is gone.
func (c *extensionsComponent) syncPauseLocked(h *heartbeatProcess) {
	_, err := os.Stat(filepath.Join(c.crashDir, h.lease()))
	crashed := err == nil
	switch {
	case crashed && !h.paused:
		if err := syscall.Kill(h.sup.Current().Pid(), syscall.SIGSTOP); err != nil {
			return
		}
		h.paused = true
		fmt.Printf("sandbox: %s on %s hangs (extension-heartbeat pid %d stopped with SIGSTOP): its Lease is neither renewed nor released, and expires\n", h.ext.name, h.node, h.sup.Current().Pid())
	case !crashed && h.paused:
		if err := syscall.Kill(h.sup.Current().Pid(), syscall.SIGCONT); err != nil {
			return
		}
		h.paused = false
		fmt.Printf("sandbox: %s on %s is back (extension-heartbeat resumed with SIGCONT): it renews its Lease once a fresh probe succeeds\n", h.ext.name, h.node)
	}
}

func (c *extensionsComponent) TryThis() []string {
	k := "_output/bin/kubectl"
	n1, n2 := "sandbox-node-1", "sandbox-node-2"
	if len(c.nodes) > 0 {
		n1, n2 = c.nodes[0], c.nodes[0]
	}
	if len(c.nodes) > 1 {
		n2 = c.nodes[1]
	}
	var cni2 *heartbeatProcess
	for _, h := range c.heartbeats {
		if h.ext.name == "cni" && h.node == n2 {
			cni2 = h
		}
	}
	stop, crash := display(c.stopDir), display(c.crashDir)
	columns := `'custom-columns=NODE:.metadata.name,TAINTS:.spec.taints[*].key,EXTENSIONS:.status.conditions[?(@.type=="SystemExtensionsReady")].reason'`
	lines := []string{
		fmt.Sprintf("# Every node requires kube-proxy and cni, each renewed by its own extension-heartbeat process (Lease %ds, renewed every %s) in %s:", sandboxLeaseSeconds, sandboxRenewEvery, nodev1alpha1.DefaultLeaseNamespace),
		fmt.Sprintf("%s get leases -n %s", k, nodev1alpha1.DefaultLeaseNamespace),
		fmt.Sprintf("%s get nodes -o %s", k, columns),
		fmt.Sprintf("# Stop cni on one node: its health endpoint fails, the heartbeat releases the Lease after %d probes (%s apart), the node is tainted:", sandboxFailureThreshold, sandboxProbePeriod),
		fmt.Sprintf("touch %s/cni.%s; sleep 3", stop, n2),
		fmt.Sprintf("%s describe node %s   # Taints, the SystemExtensionsReady condition, Events", k, n2),
		"# Start it again: the next probe succeeds, the heartbeat re-acquires the Lease and the taint goes:",
		fmt.Sprintf("rm %s/cni.%s", stop, n2),
		fmt.Sprintf("# Hang kube-proxy's heartbeat instead (SIGSTOP: no renewal, no release): tainted %s after its last renewal:", time.Duration(sandboxLeaseSeconds)*time.Second+sandboxRenewalGrace),
		fmt.Sprintf("touch %s/kube-proxy.%s; sleep 16; %s get nodes -o %s", crash, n2, k, columns),
		fmt.Sprintf("rm %s/kube-proxy.%s", crash, n2),
		"# Reboot a node (a new bootID; use another value for every further reboot): its heartbeat processes",
		"# are killed and start again once their extension is back (after 4s and 10s); gated until both renew:",
		fmt.Sprintf(`%s patch node %s --subresource=status --type=merge -p '{"status":{"nodeInfo":{"bootID":"reboot-2"}}}'`, k, n1),
		fmt.Sprintf("%s get events --field-selector involvedObject.name=%s", k, n1),
		"# Once it is ungated (about 10s): its start-up timeline (kubectl-nodehealth is in _output/bin), and every node's, slowest first:",
		fmt.Sprintf("sleep 12; PATH=$PWD/_output/bin:$PATH kubectl nodehealth explain %s", n1),
		"PATH=$PWD/_output/bin:$PATH kubectl nodehealth status --startup",
	}
	if cni2 != nil {
		lines = append(lines,
			fmt.Sprintf("# The heartbeat of cni on %s: its probe, configuration, metrics and log:", n2),
			fmt.Sprintf("curl -s %s/cni/%s", c.healthBase, n2),
			fmt.Sprintf("cat %s", display(cni2.configPath)),
			fmt.Sprintf("curl -s %s/metrics | grep ^nodehealth_heartbeat_", cni2.servingURL),
			fmt.Sprintf("tail -f %s", display(cni2.sup.Current().LogPath)),
		)
	}
	return lines
}

// heartbeatConfig is the ExtensionHeartbeatConfiguration of one sandbox heartbeat. One
// loopback port serves both /metrics and /healthz.
func heartbeatConfig(kubeconfig, ext string, port int, probeURL string) string {
	return fmt.Sprintf(`# Written by the sandbox (test/sandbox/extensions.go) at every start.
apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
logging:
  verbosity: 2
extensionName: %s
# Short for the sandbox (defaults: 40s, 10s).
lease:
  namespace: %s
  duration: %ds
  renewInterval: %s
# The sandbox's health endpoint of this extension on this node; it fails while
# the extension is stopped (_sandbox/stop/) or restarting after a reboot.
probe:
  http:
    url: %s
  period: %s
  timeout: %s
  successThreshold: 1
  failureThreshold: %d
`, kubeconfig, port, port, ext, nodev1alpha1.DefaultLeaseNamespace, sandboxLeaseSeconds, sandboxRenewEvery,
		probeURL, sandboxProbePeriod, sandboxProbeTimeout, sandboxFailureThreshold)
}
