package heartbeat_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// jointLabel selects the node the joint test's controller rule requires
// kube-proxy on; no other test's node carries it.
const jointLabel = "it.nodehealth.io/heartbeat-joint"

// startController runs the nodehealth-controller binary with a rule that makes
// nodes labelled jointLabel require kube-proxy, watching leaseNS.
func startController(t *testing.T, leaseNS string) {
	t.Helper()
	testenv.StartComponent(t, testenv.Component{
		Binary: "nodehealth-controller",
		Name:   "nodehealth-controller-heartbeat-joint",
		Config: fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: false
leaseNamespace: %s
extensionRules:
- name: kube-proxy
  nodeSelector:
    matchLabels:
      %s: "true"
  startupTimeout: 0s
renewalGrace: 2s
# 3 × canaryInterval must stay below 3/4 × minimumLeaseDuration + renewalGrace
# (10s + 2s): the own-view guard fires before any Lease can expire.
canaryInterval: 2s
registrationGrace: 5s
eviction:
  mode: None
`, leaseNS, jointLabel),
	})
}

// The controller and extension-heartbeat, both real processes: a node that
// requires kube-proxy is gated until the heartbeat renews, gated again at
// once when the health endpoint fails, and ungated when it recovers; a
// heartbeat with register: true puts its extension into its node's list, and
// its SIGTERM gates that node.
func TestTheHeartbeatGatesAndUngatesANodeWithTheRealController(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	leaseNS := testenv.NewNamespace(t, "joint-lease")

	const node = "joint-1"
	testenv.CreateNode(t, node, map[string]string{jointLabel: "true"})
	// kwok reports no bootID; a kubelet always does.
	if _, err := env.SetBootID(testenv.Context(t), node, "boot-1"); err != nil {
		t.Fatal(err)
	}
	startController(t, leaseNS)
	// Required but no Lease yet: gated.
	testenv.WaitForNode(t, node, framework.NodeGated)

	ext := newExtension(t, "kube-proxy", node, leaseNS)
	endpoint := newHealthEndpoint(t)
	config := ext.sidecarConfig(t, ext.writeKubeconfig(t), sidecarSettings{
		probeURL: endpoint.URL + "/healthz", renewInterval: "2s", probePeriod: "1s", probeTimeout: "500ms", failureThreshold: 2,
	})
	ext.startSidecar(t, "extension-heartbeat-"+node, "", config)

	ext.waitLease(t, "held", heldBy(ext.pod))
	testenv.WaitForNode(t, node, framework.NodeServing)

	// The endpoint fails: the sidecar releases, the controller gates the node
	// without waiting for the 30s Lease to expire.
	endpoint.down.Store(true)
	failedAt := time.Now()
	n := testenv.WaitForNode(t, node, framework.NodeGated)
	took := time.Since(failedAt)
	t.Logf("gated %s after the endpoint failed", took.Round(10*time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("gated %s after the endpoint failed; a release should gate at once, long before the 30s+2s expiry", took)
	}
	if msg := framework.ExtensionsCondition(n).Message; !strings.Contains(msg, "kube-proxy") {
		t.Errorf("condition message %q does not name the extension", msg)
	}

	endpoint.down.Store(false)
	testenv.WaitForNode(t, node, framework.NodeServing)

	t.Run("self-registration", func(t *testing.T) {
		const node = "joint-2"
		testenv.CreateNode(t, node, nil)
		if _, err := env.SetBootID(testenv.Context(t), node, "boot-1"); err != nil {
			t.Fatal(err)
		}
		ext := newExtension(t, "gpu-agent", node, leaseNS)
		endpoint := newHealthEndpoint(t)
		config := ext.sidecarConfig(t, ext.writeKubeconfig(t), sidecarSettings{
			probeURL: endpoint.URL + "/healthz", renewInterval: "2s", probePeriod: "1s", probeTimeout: "500ms", failureThreshold: 2,
			register: true,
		})
		sidecar := ext.startSidecar(t, "extension-heartbeat-"+node, "", config)

		l := ext.waitLease(t, "held", heldBy(ext.pod))
		if l.Labels[nodev1alpha1.RegisterLabel] != "true" {
			t.Errorf("lease labels %v, want %s=true", l.Labels, nodev1alpha1.RegisterLabel)
		}
		n := testenv.WaitForNode(t, node, func(n *corev1.Node) bool {
			list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], leaseNS)
			return err == nil && slices.ContainsFunc(list, func(e nodev1alpha1.SystemExtension) bool {
				return e.Name == "gpu-agent" && e.Source == nodev1alpha1.SourceLease
			}) && framework.NodeServing(n)
		})
		t.Logf("%s: %s", nodev1alpha1.SystemExtensionsAnnotation, n.Annotations[nodev1alpha1.SystemExtensionsAnnotation])

		// SIGTERM releases the Lease, and the node is gated at once.
		if err := sidecar.Stop(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		ext.waitLease(t, "released", releasedWith(heartbeat.ReasonTerminating))
		testenv.WaitForNode(t, node, framework.NodeGated)

		// The registration stays while the Lease exists (released is not
		// deleted): the node keeps listing the extension.
		got, err := env.Client.CoreV1().Nodes().Get(testenv.Context(t), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Annotations[nodev1alpha1.SystemExtensionsAnnotation], "gpu-agent") {
			t.Errorf("registration lost after the release: %q", got.Annotations[nodev1alpha1.SystemExtensionsAnnotation])
		}
	})
}
