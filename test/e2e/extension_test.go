package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"

	"nodehealth.io/nodehealth/test/framework/realnode"
)

const (
	extName = "e2e-ext"
	extNS   = "e2e-ext"
	// extStartDelay is how long the extension's server takes to serve after
	// every (re)start: the window in which the node must stay gated.
	extStartDelay = 15 * time.Second
)

// extensionValues is the controller's rule for the extension, on the real
// node only. The blast radius is off: one node of a few is a large share.
var extensionValues = fmt.Sprintf(`controller:
  config:
    extensionRules:
    - name: %s
      nodeSelector:
        matchLabels: {%q: "true"}
      startupTimeout: 10m
      failurePolicy: KeepGated
    renewalGrace: 6s
    # The own-view guard must fire before a Lease renewed a quarter of its
    # duration before a stall expires: 3 × 2s < 3/4 × 10s + 6s.
    canaryInterval: 2s
    blastRadius:
      clusterThresholdPercent: 100
      zoneThresholdPercent: 100
# The extension's heartbeat ConfigMap and Lease bindings come from the chart,
# as a user gets them: the csiNode example's shape (an HTTP probe of a
# neighbour container in the pod), renamed and sped up for the test.
exampleSidecars:
  csiNode:
    enabled: true
    namespace: %s
    serviceAccount: %s
    config:
      extensionName: %s
      serving:
        metricsBindAddress: 0.0.0.0:10380
        healthzBindAddress: 0.0.0.0:10381
      lease:
        duration: 10s
        renewInterval: 2s
      probe:
        http:
          url: http://127.0.0.1:8080/healthz
        period: 1s
        timeout: 1s
        failureThreshold: 2
`, extName, realLabel, extNS, extName, extName)

// TestExtensionGatesRealNode installs the chart (the controller's image as a
// pod on the real node) and a DaemonSet extension whose extension-heartbeat
// sidecar probes its neighbour container over HTTP: the node stays gated,
// and a user pod is not scheduled there by the real scheduler, until the
// extension's pod is ready; killing the extension's container re-taints the
// node within the Lease's expiry and its restart ungates it; helm
// uninstall, with the extension's DaemonSet kept, leaves no taint,
// annotation nor condition of the controller's and keeps the heartbeat
// ConfigMap the chart rendered (exampleSidecars): the extension's pod,
// deleted afterwards, is replaced by one that becomes ready.
//
// The product's images are installed as a user installs a release: the
// chart's names (ghcr.io/nodehealth/<binary>) and pull policy, pinned by
// the digests a registry on loopback answered for the images pushed to it,
// which the node's containerd reaches through a mirror entry for ghcr.io;
// the node loads none of them beforehand.
func TestExtensionGatesRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := startControlPlane(ctx, t, 2)
	c.registry = c.startRegistry(ctx, "nodehealth-controller", "extension-heartbeat")
	c.startNode(ctx, true)
	c.createExtensionAccount(ctx)
	c.install(ctx, extensionValues)
	c.testGating(ctx)
}

// TestAdmissionPolicyTaintsRealNode is the same with a kubelet that
// registers without the taint: the chart's MutatingAdmissionPolicy adds it
// when the kubelet creates its Node, so no pod is scheduled onto the node
// before it is gated (the race registerWithTaints avoids on the kubelet's
// side).
func TestAdmissionPolicyTaintsRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := startControlPlane(ctx, t, 2)
	// The chart first (its controller pod waits for the node), then the node.
	c.createExtensionAccount(ctx)
	c.installChart(ctx, extensionValues+"mutatingAdmissionPolicy:\n  enabled: true\n")
	// Watch from before the kubelet registers: the Node's first version,
	// as the kubelet created it, must carry the taint.
	w, err := c.env.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=real-node-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c.startNode(ctx, false)
	select {
	case ev := <-w.ResultChan():
		node, ok := ev.Object.(*corev1.Node)
		if !ok || ev.Type != watch.Added {
			t.Fatalf("first watch event %s %T", ev.Type, ev.Object)
		}
		if !tainted(node) {
			t.Fatalf("node %s was created without the readiness taint: %+v", node.Name, node.Spec.Taints)
		}
		t.Logf("node %s created with taints %+v", node.Name, node.Spec.Taints)
	case <-time.After(time.Minute):
		t.Fatal("no watch event for the real node")
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := c.podsOf(ctx, namespace, "app.kubernetes.io/name=nodehealth-controller")
		return len(pods) == 1 && podReady(&pods[0]), nil
	})
	if err != nil {
		t.Fatalf("the controller pod never became ready on the real node: %v", err)
	}
	c.testGating(ctx)
}

// testGating runs the gating steps on an installed cluster whose real node
// is gated.
func (c *cluster) testGating(ctx context.Context) {
	t := c.t

	// The controller runs on the real node; the node is gated (registered
	// with the taint, and the rule's extension has no Lease).
	// helm install --wait can return a moment before the kubelet's write of
	// the pod's Ready condition reaches the API (seen in a cold CI run: the
	// probe passed 3 ms after its first failure, the status later), so the
	// pod is waited for, briefly, rather than read once.
	var ctrl []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		ctrl = c.podsOf(ctx, namespace, "app.kubernetes.io/name=nodehealth-controller")
		return len(ctrl) == 1 && ctrl[0].Spec.NodeName == c.node.Name() && podReady(&ctrl[0]), nil
	})
	if err != nil {
		t.Fatalf("want one ready controller pod on %s, got %d: %+v", c.node.Name(), len(ctrl), ctrl)
	}
	if c.registry != nil {
		c.registry.checkPulled(c, &ctrl[0], "controller", "nodehealth-controller")
	}
	c.waitNode(ctx, "gated before the extension runs", time.Minute, tainted)

	// A user pod for that node stays Pending: the scheduler honours the taint.
	user := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{realLabel: "true"},
			Containers:   []corev1.Container{workloadContainer("user")},
		},
	}
	if _, err := c.env.Client.CoreV1().Pods("default").Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(ctx, "default", "user", "unschedulable because of the taint", time.Minute, func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "untolerated taint") {
				return true
			}
		}
		return false
	})

	// The extension: its pod starts, is not ready for extStartDelay, and the
	// node stays gated meanwhile.
	c.createExtension(ctx)
	extPod := c.waitExtensionPod(ctx)
	ungated := c.waitNode(ctx, "ungated once the extension is ready", 3*time.Minute, func(n *corev1.Node) bool { return !tainted(n) })
	ungatedAt := time.Now()
	t.Logf("node ungated %s after the extension's pod started", ungated.Round(100*time.Millisecond))
	extPod = c.waitPod(ctx, extNS, extPod.Name, "ready", time.Minute, podReady)
	// Measured from the server container's start (the kubelet's record, on
	// this machine's clock), not from when the test saw the pod running: the
	// heartbeat's container can start seconds after the server's.
	if started := containerStarted(extPod, "server"); started.IsZero() {
		t.Fatalf("the extension's server container has no start time: %+v", extPod.Status.ContainerStatuses)
	} else if since := ungatedAt.Sub(started); since < extStartDelay-2*time.Second {
		t.Fatalf("node ungated %s after the extension's server started, before it could serve (%s)", since, extStartDelay)
	}
	if c.registry != nil {
		c.registry.checkPulled(c, extPod, "extension-heartbeat", "extension-heartbeat")
	}
	lease, err := c.env.Client.CoordinationV1().Leases("node-extension-lease").Get(ctx, extName+"."+c.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the heartbeat's Lease: %v", err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != extPod.Name {
		t.Errorf("Lease holder %v, want the extension's pod %s", h, extPod.Name)
	}

	// The heartbeat's token is the one the kubelet issued, bound to the pod
	// and the node: with it, the own-node admission policy allows this
	// node's Lease and denies another node's.
	c.checkOwnNodePolicy(ctx, extPod)

	// The user pod now runs on the real node.
	c.waitPod(ctx, "default", "user", "running on the real node", 2*time.Minute, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == c.node.Name() && podReady(p)
	})

	// Killing the extension's container re-taints the node within the
	// Lease's expiry (the probe fails and the sidecar releases the Lease, or
	// the Lease expires); the restarted container ungates it.
	killed := time.Now()
	if err := c.node.KillContainer(ctx, extPod, "server"); err != nil {
		t.Fatal(err)
	}
	retaint := c.waitNode(ctx, "re-tainted after the extension's container was killed", time.Minute, tainted)
	const leaseExpiry = 10*time.Second + 6*time.Second // lease.duration + renewalGrace
	if retaint > leaseExpiry+5*time.Second {
		t.Errorf("re-tainted %s after the kill, later than the Lease's expiry (%s) plus watch latency", retaint, leaseExpiry)
	}
	t.Logf("node re-tainted %s after the extension's container was killed", retaint.Round(100*time.Millisecond))
	c.waitNode(ctx, "ungated after the extension's container restarted", 3*time.Minute, func(n *corev1.Node) bool { return !tainted(n) })
	restarted := c.waitPod(ctx, extNS, extPod.Name, "restarted", time.Minute, func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "server" {
				return s.RestartCount >= 1
			}
		}
		return false
	})
	if restarted.Spec.NodeName != c.node.Name() {
		t.Errorf("extension pod moved to %s", restarted.Spec.NodeName)
	}
	t.Logf("node ungated again %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	c.testUninstall(ctx)
}

// testUninstall runs helm uninstall (its pre-delete Job runs on the real
// node) on a gated node whose extension's DaemonSet stays, as a user's does:
// the node is left with nothing of the controller's, and the extension's
// pod still starts afterwards, with the heartbeat ConfigMap the chart kept.
func (c *cluster) testUninstall(ctx context.Context) {
	t := c.t
	dss := c.env.Client.AppsV1().DaemonSets(extNS)

	// Gate the node with the DaemonSet kept: a nodeSelector no node matches
	// takes its pod off the node (the sidecar releases the Lease), so that
	// the uninstall has a taint to remove.
	patch := func(value string) {
		t.Helper()
		data := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:%q}}}}}`, realLabel, value)
		if _, err := dss.Patch(ctx, extName, types.StrategicMergePatchType, []byte(data), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("none")
	c.waitNode(ctx, "re-tainted once the extension's pod is off the node", time.Minute, tainted)
	node, err := c.env.Client.CoreV1().Nodes().Get(ctx, c.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the uninstall must remove is there, so that its absence after
	// it is the uninstall's doing.
	if len(ownAnnotations(node)) == 0 || len(ownConditions(node)) == 0 {
		t.Fatalf("before the uninstall, node %s carries annotations %v and conditions %v: want some of the controller's of both",
			node.Name, ownAnnotations(node), ownConditions(node))
	}
	t.Logf("before the uninstall: annotations %v, conditions %v", ownAnnotations(node), ownConditions(node))

	start := time.Now()
	c.helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall done in %s", time.Since(start).Round(100*time.Millisecond))
	node, err = c.env.Client.CoreV1().Nodes().Get(ctx, c.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tainted(node) {
		t.Errorf("helm uninstall left the readiness taint on %s: %+v", node.Name, node.Spec.Taints)
	}
	if a := ownAnnotations(node); len(a) > 0 {
		t.Errorf("helm uninstall left the controller's annotations on %s: %v", node.Name, a)
	}
	if cs := ownConditions(node); len(cs) > 0 {
		t.Errorf("helm uninstall left the controller's conditions on %s: %v", node.Name, cs)
	}
	// Not fatal: the pod's start below says what its absence costs.
	if _, err := c.env.Client.CoreV1().ConfigMaps(extNS).Get(ctx, extName+"-heartbeat", metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall did not keep the extension's heartbeat ConfigMap: %v", err)
	}

	// The DaemonSet's pod comes back to the node, and once deleted, its
	// replacement starts and becomes ready: the kubelet mounts the kept
	// ConfigMap and the sidecar reads it.
	restart := time.Now()
	patch("true")
	first := c.waitExtensionPod(ctx)
	if err := c.env.Client.CoreV1().Pods(extNS).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var replacement *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.podsOf(ctx, extNS, "app="+extName) {
			if p.Name != first.Name && p.Spec.NodeName == c.node.Name() {
				replacement = p.DeepCopy()
			}
		}
		return replacement != nil && replacement.Status.Phase == corev1.PodRunning && podReady(replacement) && !restartedContainer(replacement), nil
	})
	if err != nil {
		t.Fatalf("the extension's pod replacing %s after the uninstall never became ready: %v; %s", first.Name, err, c.describeExtensionPods(ctx))
	}
	t.Logf("after the uninstall, the extension's pod %s replaced %s and is ready in %s",
		replacement.Name, first.Name, time.Since(restart).Round(100*time.Millisecond))
	node, err = c.env.Client.CoreV1().Nodes().Get(ctx, c.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tainted(node) {
		t.Errorf("node %s tainted again after the uninstall: %+v", node.Name, node.Spec.Taints)
	}
}

// restartedContainer reports whether a container of the pod has restarted.
func restartedContainer(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount > 0 {
			return true
		}
	}
	return false
}

// ownAnnotations are the node's annotations of the controller's
// (nodehealth.io/...).
func ownAnnotations(n *corev1.Node) []string {
	var out []string
	for k := range n.Annotations {
		if strings.HasPrefix(k, "nodehealth.io/") {
			out = append(out, k)
		}
	}
	return out
}

// ownConditions are the node's conditions of the controller's: its
// SystemExtensionsReady, and lifecycle conditions with its reasons.
func ownConditions(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		if c.Type == nodev1alpha1.SystemExtensionsReadyCondition || nodev1alpha1.OwnLifecycleReason(c.Reason) {
			out = append(out, string(c.Type)+"/"+c.Reason)
		}
	}
	return out
}

// workloadContainer is a container of the e2e workload image, ready when it
// serves /healthz on 8080.
func workloadContainer(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: realnode.WorkloadImage, ImagePullPolicy: corev1.PullNever,
		Args: args,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1,
		},
	}
}

// createExtensionAccount creates the extension's namespace and
// ServiceAccount, before the chart renders its heartbeat ConfigMap there and
// binds the account (exampleSidecars in extensionValues).
func (c *cluster) createExtensionAccount(ctx context.Context) {
	c.t.Helper()
	cs := c.env.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: extNS}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(extNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: extName}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// createExtension creates the extension's DaemonSet, whose sidecar mounts
// the heartbeat ConfigMap the chart rendered.
func (c *cluster) createExtension(ctx context.Context) {
	c.t.Helper()
	heartbeatImage, heartbeatPull := c.productImage("extension-heartbeat")
	labels := map[string]string{"app": extName}
	nonRoot, optional := true, true
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: extName},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: extName,
					NodeSelector:       map[string]string{realLabel: "true"},
					// Every extension tolerates the readiness taint.
					Tolerations:     []corev1.Toleration{{Key: taintKey, Operator: corev1.TolerationOpExists}},
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot},
					Containers: []corev1.Container{
						workloadContainer("server", "--start-delay="+extStartDelay.String()),
						{
							Name: "extension-heartbeat", Image: heartbeatImage, ImagePullPolicy: heartbeatPull,
							Args: []string{"--config=/etc/nodehealth/heartbeat.yaml", "--node-name=$(NODE_NAME)"},
							Env: []corev1.EnvVar{
								{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
								{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							},
							VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/nodehealth", ReadOnly: true}},
							// Ready once it serves, which it does only with its
							// configuration read: without a probe, a sidecar
							// that exits at once for want of its file counts as
							// ready in the moments it runs between restarts.
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(10381)}},
								PeriodSeconds: 1,
							},
						},
					},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						// Optional, as deploy/examples/*/sidecar.yaml mount it: a
						// ConfigMap gone must not keep the extension's own
						// containers from starting.
						ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: extName + "-heartbeat"},
							Optional:             &optional,
						},
					}}},
				},
			},
		},
	}
	if _, err := c.env.Client.AppsV1().DaemonSets(extNS).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// waitExtensionPod waits for the extension's pod on the real node to run.
func (c *cluster) waitExtensionPod(ctx context.Context) *corev1.Pod {
	c.t.Helper()
	var pod *corev1.Pod
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		for _, p := range c.podsOf(ctx, extNS, "app="+extName) {
			if p.Spec.NodeName == c.node.Name() && p.Status.Phase == corev1.PodRunning {
				pod = p.DeepCopy()
			}
		}
		if pod != nil {
			return pod
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.t.Fatalf("no running extension pod on %s: %s", c.node.Name(), c.describeExtensionPods(ctx))
	return nil
}

// describeExtensionPods says, for a failure, where the extension's pods
// stand: phase and why a container waits (ContainerCreating while the
// kubelet cannot mount a volume, CrashLoopBackOff).
func (c *cluster) describeExtensionPods(ctx context.Context) string {
	var out []string
	for _, p := range c.podsOf(ctx, extNS, "app="+extName) {
		desc := fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil {
				desc += fmt.Sprintf(", %s waiting (%s)", s.Name, w.Reason)
			} else if !s.Ready {
				desc += fmt.Sprintf(", %s not ready (%d restarts)", s.Name, s.RestartCount)
			}
		}
		out = append(out, desc)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// checkOwnNodePolicy uses the extension pod's kubelet-issued token to renew
// the extension's Lease of this node (allowed) and to create one for a kwok
// node (denied by the extension security policy).
func (c *cluster) checkOwnNodePolicy(ctx context.Context, pod *corev1.Pod) {
	c.t.Helper()
	token, err := c.node.ServiceAccountToken(pod)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.env.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases("node-extension-lease")
	own, err := leases.Get(ctx, extName+"."+c.node.Name(), metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("reading the own node's Lease with the pod's token: %v", err)
	}
	if _, err := leases.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		c.t.Errorf("renewing the own node's Lease with the pod's token: %v", err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: extName + ".kwok-node-1", Namespace: "node-extension-lease"}}
	_, err = leases.Create(ctx, other, metav1.CreateOptions{})
	if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		c.t.Fatalf("creating another node's Lease with the pod's token: want denied, got %v", err)
	}
	c.t.Logf("kubelet-issued token: own Lease renewed, another node's denied (%v)", err)
}

// containerStarted is when the pod's container name last started running
// (whole seconds, as the kubelet records it); zero if it is not running.
func containerStarted(p *corev1.Pod, name string) time.Time {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == name && st.State.Running != nil {
			return st.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}
