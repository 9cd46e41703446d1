package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
)

// Sandbox settings of the Bottlerocket updater: a few simulated Bottlerocket
// nodes, and deadlines and a soak short enough to watch a rollout, and a
// halt, within minutes.
const (
	bottlerocketNodes = 3
	sandboxOldVersion = "1.20.0"
	sandboxNewVersion = "1.21.0"
	// bottlerocketExtension is the extension the Bottlerocket nodes'
	// heartbeats register for themselves; its ServiceAccount and DaemonSet
	// (identities.go) cover them too.
	bottlerocketExtension = "cni"
)

// bottlerocketNodeNames are the simulated Bottlerocket nodes' names.
func bottlerocketNodeNames() []string {
	names := make([]string, bottlerocketNodes)
	for i := range names {
		names[i] = fmt.Sprintf("sandbox-br-%d", i+1)
	}
	return names
}

// updaterComponent runs the update operator and, on simulated Bottlerocket
// nodes of their own (test/framework SimNode: a Bottlerocket API emulator that
// reboots the node as far as the API server can tell), an update agent and a
// self-registering extension heartbeat per node.
//
// The Bottlerocket nodes are separate from sandbox-node-N because a SimNode
// creates its Node itself; the controller's rules leave them out (see
// controllerConfig), so they require only the extensions that register
// themselves: bottlerocket-updater and their "cni" heartbeat.
type updaterComponent struct {
	nodes       []*framework.SimNode
	dirs        map[string]string
	configPath  string
	logPath     string
	emulatorLog string
	kubectl     string
	policyPath  string
}

func (u *updaterComponent) Name() string { return "Bottlerocket update operator" }

func (u *updaterComponent) Start(ctx context.Context, env *Env) error {
	if err := env.InstallCRDs(ctx); err != nil {
		return err
	}
	u.kubectl = env.Binary(framework.Kubectl)
	for _, args := range [][]string{
		{"apply", "--server-side", "-f", "deploy/controller/namespaces.yaml", "-f", "deploy/controller/rbac.yaml"},
		{"apply", "--server-side", "-k", "deploy/extensions/"},
		{"apply", "--server-side", "-k", "deploy/update-agent/"},
	} {
		cmd := exec.CommandContext(ctx, u.kubectl, append([]string{"--kubeconfig=" + env.KubeconfigPath}, args...)...)
		cmd.Dir = env.RepoRoot
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	operator, err := env.ProductBinary(ctx, "update-operator")
	if err != nil {
		return err
	}
	agent, err := env.ProductBinary(ctx, "update-agent")
	if err != nil {
		return err
	}
	heartbeat, err := env.ProductBinary(ctx, "extension-heartbeat")
	if err != nil {
		return err
	}

	ports, err := framework.FreeLoopbackPorts(1 + bottlerocketNodes)
	if err != nil {
		return err
	}
	// The operator runs as its ServiceAccount, as deployed, not as the
	// admin: with the admin's rights it would pass RBAC it lacks, and the
	// admission policy that lets the operator, and nobody else, delete a
	// shadow mid-update (the resumed orphan of a deleted node) would refuse
	// it as it refuses a person.
	if err := env.InstallUpdateOperatorRBAC(ctx); err != nil {
		return err
	}
	operatorKubeconfig := filepath.Join(env.Dir, "update-operator.kubeconfig")
	if err := env.WriteUpdateOperatorKubeconfig(operatorKubeconfig); err != nil {
		return err
	}
	u.configPath = filepath.Join(env.Dir, "update-operator.yaml")
	if err := os.WriteFile(u.configPath, []byte(operatorConfig(operatorKubeconfig, ports[0])), 0o644); err != nil {
		return err
	}
	// The rollout is an UpdatePolicy: without one no node would start.
	u.policyPath = filepath.Join(env.Dir, "update-policy.yaml")
	if err := os.WriteFile(u.policyPath, []byte(sandboxPolicy), 0o644); err != nil {
		return err
	}
	apply := exec.CommandContext(ctx, u.kubectl, "--kubeconfig="+env.KubeconfigPath, "apply", "--server-side", "-f", u.policyPath)
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %v\n%s", u.policyPath, err, out)
	}
	// Restarted when it exits, like the controller (it exits on lost leadership).
	s, err := env.Supervise(ctx, framework.ProcessSpec{Name: "update-operator", Path: operator, Args: []string{"--config", u.configPath}}, nil)
	if err != nil {
		return err
	}
	u.logPath = s.Current().LogPath

	// The emulators run in this process and log with klog: into a file,
	// not over the usage text.
	u.emulatorLog = filepath.Join(env.LogDir, "bottlerocket-api-emulators.log")
	emulatorLog, err := os.Create(u.emulatorLog)
	if err != nil {
		return err
	}
	klog.LogToStderr(false)
	klog.SetOutput(emulatorLog)

	u.dirs = map[string]string{}
	zones := []string{"sandbox-zone-a", "sandbox-zone-b", "sandbox-zone-c"}
	for i, name := range bottlerocketNodeNames() {
		dir := filepath.Join(env.Dir, "bottlerocket", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"fail-after-reboot"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		if err := os.WriteFile(filepath.Join(dir, "healthy"), nil, 0o644); err != nil {
			return err
		}
		// The heartbeat runs as the cni DaemonSet's pod on the node: the
		// SimNode writes that pod's kubeconfig before it starts it.
		cfg := filepath.Join(dir, bottlerocketExtension+".yaml")
		kubeconfig := filepath.Join(dir, bottlerocketExtension+".kubeconfig")
		if err := os.WriteFile(cfg, []byte(brHeartbeatConfig(kubeconfig, ports[1+i], filepath.Join(dir, "healthy"))), 0o644); err != nil {
			return err
		}
		// The heartbeat starts with every boot; a fail-after-reboot file
		// makes its extension fail from the next boot on, which is how an
		// extension that does not come back after an update looks.
		script := fmt.Sprintf(`if [ -e %[1]s/fail-after-reboot ]; then rm -f %[1]s/healthy; fi; exec %[2]s --config %[3]s --node-name %[4]s -v=2`,
			dir, heartbeat, cfg, name)
		s, err := env.StartSimNode(ctx, framework.SimNodeOptions{
			Name: name,
			Labels: map[string]string{
				updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue,
				"topology.kubernetes.io/region":  "sandbox",
				"topology.kubernetes.io/zone":    zones[i%len(zones)],
			},
			Version:     sandboxOldVersion,
			AgentBinary: agent,
			RebootDelay: 5 * time.Second,
			Heartbeats:  []framework.ProcessSpec{{Name: name + "-" + bottlerocketExtension, Path: "/bin/sh", Args: []string{"-c", script}}},
			HeartbeatIdentity: &framework.HeartbeatIdentity{
				PodIdentity: extensionIdentity(bottlerocketExtension),
				Kubeconfig:  kubeconfig,
			},
		})
		if err != nil {
			return fmt.Errorf("simulated Bottlerocket node %s: %w", name, err)
		}
		u.nodes = append(u.nodes, s)
		u.dirs[name] = dir
	}
	return nil
}

// Stop ends the simulated nodes' processes and emulators before the control
// plane goes.
func (u *updaterComponent) Stop() {
	for _, s := range u.nodes {
		s.Close()
	}
}

// Restarts says which processes a simulated reboot ends: the nodes' agents and
// heartbeats, which the SimNode starts again after it.
func (u *updaterComponent) Restarts(process string) bool {
	for name := range u.dirs {
		if strings.HasPrefix(process, name+"-") {
			return true
		}
	}
	return false
}

func (u *updaterComponent) TryThis() []string {
	if len(u.nodes) == 0 {
		return nil
	}
	second := u.nodes[len(u.nodes)/2].Name()
	lines := []string{
		fmt.Sprintf("# %d simulated Bottlerocket nodes (sandbox-br-N) run %s, an update agent and an emulated", len(u.nodes), sandboxOldVersion),
		"# Bottlerocket API each; the UpdatePolicy \"fleet\" updates one node at a time. Watch it, the shadows and a node:",
		"kubectl get upol -w",
		"kubectl get brs -w",
		fmt.Sprintf("kubectl describe node %s", second),
		fmt.Sprintf("# Make %s's cni extension fail after its reboot (the rollout will halt there):", second),
		fmt.Sprintf("touch %s", display(filepath.Join(u.dirs[second], "fail-after-reboot"))),
		fmt.Sprintf("# Start the rolling update: offer %s on every node's update repository:", sandboxNewVersion),
	}
	for _, s := range u.nodes {
		lines = append(lines, fmt.Sprintf(`curl -s --unix-socket %s -X POST localhost/emulator/offer -d '{"versions":["%s"]}' >/dev/null`, s.Socket, sandboxNewVersion))
	}
	lines = append(lines,
		"# Which nodes are where, and what halts the rollout (kubectl-nodehealth is in _output/bin):",
		"PATH=$PWD/_output/bin:$PATH kubectl nodehealth update status",
		"kubectl describe upol fleet",
		"# Pause the rollout (nodes in flight finish) and go on again, no restart:",
		"PATH=$PWD/_output/bin:$PATH kubectl nodehealth update pause fleet",
		"PATH=$PWD/_output/bin:$PATH kubectl nodehealth update unpause fleet",
		fmt.Sprintf("# Repair %s's extension and resume the rollout:", second),
		fmt.Sprintf("rm %s; touch %s", display(filepath.Join(u.dirs[second], "fail-after-reboot")), display(filepath.Join(u.dirs[second], "healthy"))),
		fmt.Sprintf("PATH=$PWD/_output/bin:$PATH kubectl nodehealth update resume %s", second),
		"# The emulated hosts (running version, reboots) and their log:",
		fmt.Sprintf("curl -s --unix-socket %s localhost/emulator/state", u.nodes[0].Socket),
		fmt.Sprintf("tail -f %s", display(u.emulatorLog)),
		"# The operator's configuration, the UpdatePolicy and the operator's log:",
		fmt.Sprintf("cat %s", display(u.configPath)),
		fmt.Sprintf("cat %s", display(u.policyPath)),
		fmt.Sprintf("tail -f %s", display(u.logPath)),
	)
	return lines
}

// sandboxPolicy is the sandbox's UpdatePolicy: every managed node, one at a
// time, each node's offered version, a short soak (default 5m).
const sandboxPolicy = `# Written by the sandbox (test/sandbox/updater.go) at every start.
apiVersion: updates.nodehealth.io/v1alpha1
kind: UpdatePolicy
metadata:
  name: fleet
spec:
  nodeSelector: {}
  maxConcurrentUpdates: 1
  postRebootSoak: 10s
`

// operatorConfig is the sandbox's UpdateOperatorConfiguration.
func operatorConfig(kubeconfig string, port int) string {
	return fmt.Sprintf(`# Written by the sandbox (test/sandbox/updater.go) at every start.
apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateOperatorConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
logging:
  verbosity: 2
# Short for the sandbox (defaults 15m, 30m, 20m). The rollout itself is the
# UpdatePolicy "fleet" (update-policy.yaml beside this file).
stateDeadlines:
  stagedAndPerformedUpdate: 2m
  rebootedIntoUpdate: 3m
  monitoringUpdate: 1m
# The operator drains each node before its reboot (the agents hold no pod
# permission); shorter than rebootedIntoUpdate.
drain:
  timeout: 1m
`, kubeconfig, port, port)
}

// brHeartbeatConfig is the self-registering "cni" extension of a simulated
// Bottlerocket node, healthy while its file exists.
func brHeartbeatConfig(kubeconfig string, port int, healthy string) string {
	return fmt.Sprintf(`# Written by the sandbox (test/sandbox/updater.go) at every start.
apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
extensionName: %s
register: true
lease:
  duration: 10s
  renewInterval: 2s
probe:
  file:
    path: %s
    maxAge: 8760h
  period: 1s
`, kubeconfig, port, port, bottlerocketExtension, healthy)
}
