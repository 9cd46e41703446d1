package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"

	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/framework"
)

const (
	fromVersion = "1.20.0"
	toVersion   = "1.21.0"
	appNS       = "default"
	appName     = "app"
	appReplicas = 2
)

// TestUpdaterRolloutRealNode installs the chart with the update agent (a
// DaemonSet pod on the real node talking to a Bottlerocket API emulator over
// a hostPath socket); the controller and the operator run as host processes
// (see startHostComponents' caller for why). The
// rollout drains a real Deployment whose PodDisruptionBudget first blocks
// and then allows it: the pods terminate and are rescheduled on the kwok
// nodes, not back onto the tainted node. The emulator's reboot power-cycles
// the real node (new boot ID, every container killed); the node is gated
// until its extensions renew, passes the health gate and returns to Idle on
// the new version; helm uninstall leaves no taint.
func TestUpdaterRolloutRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, 2)
	// The kwok nodes take no pods until the app runs on the real node.
	c.setKwokUnschedulable(ctx, true)

	// The node's Bottlerocket API: an emulator on the host whose reboot
	// power-cycles the real node.
	socket := filepath.Join(c.node.Dir(), "api.sock")
	reboots := make(chan emulator.RebootEvent, 4)
	em, err := emulator.New(emulator.Config{
		SocketPath: socket, StateFile: filepath.Join(c.node.Dir(), "bottlerocket-state.json"),
		Version: fromVersion, Offered: []string{toVersion},
		RebootHook: func(ctx context.Context, ev emulator.RebootEvent) error {
			reboots <- ev
			return c.node.PowerCycle(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := em.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Close)
	c.labelNode(ctx, "bottlerocket.aws/updater-interface-version", "2.0.0")

	c.install(ctx, fmt.Sprintf(`controller:
  config:
    renewalGrace: 6s
    # 3 × canaryInterval < 3/4 × minimumLeaseDuration + renewalGrace.
    canaryInterval: 2s
updateOperator:
  enabled: true
  replicas: 1
  nodeSelector: {%[1]q: "true"}
  policy:
    create: true
    spec:
      nodeSelector:
        matchLabels: {%[1]q: "true"}
      maxConcurrentUpdates: 1
      postRebootSoak: 10s
      paused: true
  config:
    drain:
      timeout: 5m
updateAgent:
  enabled: true
  config:
    apiSocketPath: %[2]q
    updateCheckInterval: 10s
`, realLabel, socket))
	// The controller and the operator run as processes on the host with the
	// chart's identities, not as the chart's pods: their pods tolerate the
	// readiness taint, and the agent's drain evicted them, the scheduler put
	// them straight back on the only real node, and the drain evicted them
	// again until drainTimeout. The drain now leaves them to its last pass;
	// running them as pods here, pinned to the real node, is still to do
	// (docs/development.md, "Real-node e2e tests").
	c.scale(ctx, "nodehealth-controller", 0)
	c.scale(ctx, "update-operator", 0)
	stopHost := c.startHostComponents(ctx)
	// The node is ungated (no rule; the agent's Lease does not affect
	// readiness) and the agent runs as a DaemonSet pod on it.
	c.waitNode(ctx, "ungated after the install", 2*time.Minute, func(n *corev1.Node) bool { return !tainted(n) })
	agents := c.podsOf(ctx, "nodehealth-update-agent", "app.kubernetes.io/name=update-agent")
	if len(agents) != 1 || agents[0].Spec.NodeName != c.node.Name() {
		t.Fatalf("want one update-agent pod on %s, got %d", c.node.Name(), len(agents))
	}

	// A real Deployment on the real node, and a PDB that blocks any eviction.
	c.createApp(ctx)
	pods := c.waitAppPods(ctx, "running on the real node", func(p *corev1.Pod) bool {
		return p.Spec.NodeName == c.node.Name() && podReady(p)
	})
	oldPods := map[string]bool{}
	for _, p := range pods {
		oldPods[p.Name] = true
	}
	c.setKwokUnschedulable(ctx, false)

	// Start the rollout.
	nh, err := versioned.NewForConfig(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nh.UpdatesV1alpha1().UpdatePolicies().Patch(ctx, "fleet", types.MergePatchType,
		[]byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()

	// The agent releases its Lease, the node is tainted, the drain is
	// blocked by the PDB: the app's pods keep running.
	c.waitNode(ctx, "tainted for the update", 3*time.Minute, tainted)
	time.Sleep(10 * time.Second)
	for _, p := range c.podsOf(ctx, appNS, "app="+appName) {
		if !oldPods[p.Name] || p.DeletionTimestamp != nil {
			t.Fatalf("the PDB allows no disruption, yet pod %s was evicted or replaced", p.Name)
		}
	}
	if len(reboots) != 0 {
		t.Fatal("the node rebooted before its drain finished")
	}
	t.Logf("drain blocked by the PDB %s after the rollout started", time.Since(started).Round(time.Second))

	// Allow the disruption: the pods terminate (really: the kubelet stops
	// the containers) and are rescheduled on the kwok nodes.
	if _, err := c.env.Client.PolicyV1().PodDisruptionBudgets(appNS).Patch(ctx, appName, types.MergePatchType,
		[]byte(`{"spec":{"minAvailable":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitAppPods(ctx, "rescheduled off the tainted node", func(p *corev1.Pod) bool {
		return !oldPods[p.Name] && p.Spec.NodeName != "" && p.Spec.NodeName != c.node.Name()
	})

	// The reboot: the emulator's hook power-cycled the node.
	select {
	case ev := <-reboots:
		t.Logf("reboot %d (%s -> %s) %s after the rollout started", ev.Reboot, ev.From, ev.To, time.Since(started).Round(time.Second))
	case <-time.After(3 * time.Minute):
		t.Fatal("the agent never asked for the reboot")
	}
	boot := c.node.BootID()
	var back *corev1.Node
	c.waitNode(ctx, "back with the new boot ID", 3*time.Minute, func(n *corev1.Node) bool {
		back = n
		return n.Status.NodeInfo.BootID == boot
	})
	// Re-gated: the node comes back tainted, until the agent renews its Lease.
	if !tainted(back) {
		t.Errorf("node %s came back from the reboot without the readiness taint", back.Name)
	}

	// Gated until the agent renews after the boot, then the health gate and
	// Idle on the new version.
	var shadow *updatesv1alpha1.BottlerocketShadow
	var seen []updatesv1alpha1.ShadowState
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := nh.UpdatesV1alpha1().BottlerocketShadows().Get(ctx, c.node.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		shadow = s
		if len(seen) == 0 || seen[len(seen)-1] != s.Status.CurrentState {
			seen = append(seen, s.Status.CurrentState)
		}
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Spec.State == updatesv1alpha1.StateIdle &&
			s.Status.CurrentVersion == toVersion, nil
	})
	if err != nil {
		t.Fatalf("the node never returned to Idle on %s: %v; states seen after the reboot %v; shadow %+v", toVersion, err, seen, shadow)
	}
	t.Logf("Idle on %s %s after the rollout started; states seen after the reboot: %v", toVersion, time.Since(started).Round(time.Second), seen)
	c.waitNode(ctx, "ungated after the update", time.Minute, func(n *corev1.Node) bool { return !tainted(n) })

	stopHost()
	c.helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	n, err := c.env.Client.CoreV1().Nodes().Get(ctx, c.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tainted(n) {
		t.Errorf("helm uninstall left the readiness taint: %+v", n.Spec.Taints)
	}
}

// scale sets a Deployment of the release's namespace to replicas and waits
// until its pods are gone.
func (c *cluster) scale(ctx context.Context, name string, replicas int32) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.env.Client.AppsV1().Deployments(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(c.podsOf(ctx, namespace, "app.kubernetes.io/name="+name)) == 0, nil
	})
	if err != nil {
		c.t.Fatalf("pods of %s still there: %v", name, err)
	}
}

// startHostComponents runs the node-health controller and the update
// operator as host processes, and returns a function that stops them.
func (c *cluster) startHostComponents(ctx context.Context) func() {
	c.t.Helper()
	ports, err := framework.FreeLoopbackPorts(3)
	if err != nil {
		c.t.Fatal(err)
	}
	// The admin identity: the extension Lease policy confines service
	// accounts without a pod-bound token (which a host process lacks).
	ctrlKubeconfig, opKubeconfig := c.env.Kubeconfig, c.env.Kubeconfig
	ctrlCfg := filepath.Join(c.env.Dir, "host-controller.yaml")
	opCfg := filepath.Join(c.env.Dir, "host-operator.yaml")
	writeFile(c.t, ctrlCfg, fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection: {leaderElect: true, resourceNamespace: %s}
clientConnection: {kubeconfig: %s}
serving: {metricsBindAddress: "127.0.0.1:%d", healthzBindAddress: "127.0.0.1:%d"}
renewalGrace: 6s
canaryInterval: 2s
# As before escalation became opt-in: an unplanned failure here would show.
eviction: {mode: Evict}
`, namespace, ctrlKubeconfig, ports[0], ports[1]))
	writeFile(c.t, opCfg, fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateOperatorConfiguration
clientConnection: {kubeconfig: %s}
serving: {metricsBindAddress: "127.0.0.1:%d", healthzBindAddress: "127.0.0.1:%d"}
stateDeadlines: {stagedAndPerformedUpdate: 3m, rebootedIntoUpdate: 6m, monitoringUpdate: 3m}
# The operator drains the real node's pods; shorter than rebootedIntoUpdate,
# which also holds the reboot and the boot.
drain: {timeout: 3m}
`, opKubeconfig, ports[2], ports[2]))
	var procs []*framework.Process
	for _, spec := range []framework.ProcessSpec{
		{Name: "nodehealth-controller", Path: filepath.Join(c.env.BinDir, "nodehealth-controller"), Args: []string{"--config", ctrlCfg}},
		{Name: "update-operator", Path: filepath.Join(c.env.BinDir, "update-operator"), Args: []string{"--config", opCfg}},
	} {
		p, err := c.env.StartProcess(spec)
		if err != nil {
			c.t.Fatal(err)
		}
		procs = append(procs, p)
	}
	return func() {
		for _, p := range procs {
			_ = p.Stop(10 * time.Second)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) setKwokUnschedulable(ctx context.Context, v bool) {
	c.t.Helper()
	for i := 1; i <= 2; i++ {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v)
		if _, err := c.env.Client.CoreV1().Nodes().Patch(ctx, fmt.Sprintf("kwok-node-%d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cluster) labelNode(ctx context.Context, key, value string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := c.env.Client.CoreV1().Nodes().Patch(ctx, c.node.Name(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// createApp creates the user's Deployment (pods that take 3s to terminate)
// and a PDB that allows no disruption.
func (c *cluster) createApp(ctx context.Context) {
	c.t.Helper()
	labels := map[string]string{"app": appName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: appName, Namespace: appNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](appReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers:                    []corev1.Container{workloadContainer("app", "--shutdown-delay=3s")},
				},
			},
		},
	}
	if _, err := c.env.Client.AppsV1().Deployments(appNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: appName, Namespace: appNS},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(appReplicas)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	if _, err := c.env.Client.PolicyV1().PodDisruptionBudgets(appNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// waitAppPods waits until the app has appReplicas live pods and cond holds
// for each.
func (c *cluster) waitAppPods(ctx context.Context, what string, cond func(*corev1.Pod) bool) []corev1.Pod {
	c.t.Helper()
	var last []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = nil
		for _, p := range c.podsOf(ctx, appNS, "app="+appName) {
			if p.DeletionTimestamp == nil {
				last = append(last, p)
			}
		}
		if len(last) != appReplicas {
			return false, nil
		}
		for i := range last {
			if !cond(&last[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var where []string
		for _, p := range last {
			where = append(where, p.Name+"@"+p.Spec.NodeName+"/"+string(p.Status.Phase))
		}
		c.t.Fatalf("app pods %s: %v; pods %v", what, err, where)
	}
	return last
}
