package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The sandbox's extensions run against a control plane with
// kube-controller-manager, kube-scheduler and kwok: the heartbeats authenticate
// as their extension's DaemonSet pod on the node, which those create and
// "run". The extension-heartbeat is the one built from the working tree.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Suite{
		Commands: []string{"./cmd/extension-heartbeat"},
	})
}

// startExtensions starts the sandbox's extensions component on new kwok nodes
// and stops it when the test ends.
func startExtensions(t *testing.T, nodes ...string) (*extensionsComponent, *framework.Environment) {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	for _, name := range nodes {
		if _, err := env.CreateReadyNode(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	// ProductBinary takes <RepoRoot>/_output/bin/extension-heartbeat: point it
	// at the one built for this test.
	root := t.TempDir()
	bin := filepath.Join(root, "_output", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.Binary(t, "extension-heartbeat"), filepath.Join(bin, "extension-heartbeat")); err != nil {
		t.Fatal(err)
	}
	sandbox := &Env{Environment: env, RepoRoot: root, Dir: t.TempDir(), KubeconfigPath: env.Kubeconfig, Nodes: nodes}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &extensionsComponent{}
	t.Cleanup(func() {
		c.Stop()
		sandbox.stopSupervising()
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, h := range c.heartbeats {
			if h.sup != nil {
				_ = h.sup.Current().Stop(10 * time.Second)
			}
		}
	})
	if err := c.Start(runCtx, sandbox); err != nil {
		t.Fatal(err)
	}
	return c, env
}

// A reboot ends the node's heartbeat processes, as a real reboot does, and new
// ones start once each extension is back (its rebootDelay): new PIDs, nothing
// renewed in between, and the first renewal after the reboot comes from the new
// process. Before, the sandbox paused the processes (SIGSTOP) and resumed them,
// so the same processes renewed at the end of the delay. The other node's
// heartbeats are left alone.
func TestRebootRestartsTheNodesHeartbeats(t *testing.T) {
	nodes := []string{"sb-reboot-1", "sb-reboot-2"}
	c, env := startExtensions(t, nodes...)
	ctx := testenv.Context(t)

	type proc struct {
		pid  int
		done <-chan struct{}
	}
	before := map[string]proc{}
	c.mu.Lock()
	for _, h := range c.heartbeats {
		p := h.sup.Current()
		before[h.lease()] = proc{p.Pid(), p.Done()}
	}
	c.mu.Unlock()

	rebooted := nodes[0]
	rebootedAt := time.Now()
	if _, err := env.SetBootID(ctx, rebooted, "reboot-2"); err != nil {
		t.Fatal(err)
	}
	leases := env.Client.CoordinationV1().Leases(nodev1alpha1.DefaultLeaseNamespace)
	for _, h := range c.heartbeats {
		if h.node != rebooted {
			continue
		}
		old := before[h.lease()]
		select {
		case <-old.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the heartbeat process (pid %d) still runs 5s after the reboot", h.lease(), old.pid)
		}
	}
	t.Logf("the rebooted node's heartbeats ended %s after the reboot", time.Since(rebootedAt).Round(10*time.Millisecond))

	for _, h := range c.heartbeats {
		if h.node != rebooted {
			continue
		}
		old := before[h.lease()]
		// The new process starts once the extension is back.
		var (
			pid       int
			startedBy time.Time
		)
		for deadline := time.Now().Add(h.ext.rebootDelay + 30*time.Second); ; time.Sleep(50 * time.Millisecond) {
			c.mu.Lock()
			if h.sup != nil && h.sup.Current().Pid() != old.pid {
				pid, startedBy = h.sup.Current().Pid(), time.Now()
			}
			c.mu.Unlock()
			if pid != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no new heartbeat process %s after the reboot", h.lease(), time.Since(rebootedAt).Round(time.Second))
			}
		}
		if d := startedBy.Sub(rebootedAt); d < h.ext.rebootDelay {
			t.Errorf("%s: a new heartbeat process ran %s after the reboot, before its extension was back (%s)", h.lease(), d, h.ext.rebootDelay)
		}
		// Its first renewal is the first one after the reboot.
		l, err := env.WaitForLease(ctx, nodev1alpha1.DefaultLeaseNamespace, h.lease(), func(l *coordinationv1.Lease) bool {
			return ptr.Deref(l.Spec.HolderIdentity, "") == h.podName() && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(rebootedAt)
		})
		if err != nil {
			t.Fatalf("%s: not renewed after the reboot: %v", h.lease(), err)
		}
		if d := l.Spec.RenewTime.Sub(rebootedAt); d < h.ext.rebootDelay {
			t.Errorf("%s: renewed %s after the reboot, before its extension was back (%s)", h.lease(), d, h.ext.rebootDelay)
		}
		t.Logf("%s: new heartbeat pid %d (was %d), renewed %s after the reboot (extension down for %s)",
			h.lease(), pid, old.pid, l.Spec.RenewTime.Sub(rebootedAt).Round(10*time.Millisecond), h.ext.rebootDelay)
	}

	// The other node did not reboot: same processes, still renewing.
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.heartbeats {
		if h.node == rebooted {
			continue
		}
		if h.sup == nil || h.sup.Current().Pid() != before[h.lease()].pid {
			t.Errorf("%s: the heartbeat of a node that did not reboot was restarted", h.lease())
		}
		l, err := leases.Get(ctx, h.lease(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > time.Duration(sandboxLeaseSeconds)*time.Second {
			t.Errorf("%s: not renewed for a Lease's duration: %v", h.lease(), l.Spec.RenewTime)
		}
	}
}

// Every heartbeat runs as its extension's DaemonSet pod on its node, with the
// RBAC and the admission policy of deploy/extensions, as in a cluster: its
// Lease is held by that pod, and its credentials cannot write the Lease of
// another node, nor read Nodes. Before, the heartbeats ran as the sandbox's
// admin, which passes every rule a cluster would enforce.
func TestTheHeartbeatsRunAsTheirExtensionsPods(t *testing.T) {
	nodes := []string{"sb-identity-1", "sb-identity-2"}
	c, env := startExtensions(t, nodes...)
	ctx := testenv.Context(t)
	for _, h := range c.heartbeats {
		if h.pod.Spec.NodeName != h.node || h.pod.Spec.ServiceAccountName != h.ext.name || h.pod.Namespace != extensionNamespace {
			t.Fatalf("%s: runs as pod %s/%s (node %s, ServiceAccount %s), want %s's pod on %s", h.lease(), h.pod.Namespace, h.pod.Name, h.pod.Spec.NodeName, h.pod.Spec.ServiceAccountName, h.ext.name, h.node)
		}
		if _, err := env.WaitForLease(ctx, nodev1alpha1.DefaultLeaseNamespace, h.lease(), func(l *coordinationv1.Lease) bool {
			return ptr.Deref(l.Spec.HolderIdentity, "") == h.pod.Name
		}); err != nil {
			t.Fatalf("%s: not held by pod %s: %v", h.lease(), h.pod.Name, err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.configDir, h.lease()+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		other := nodes[0]
		if other == h.node {
			other = nodes[1]
		}
		foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: h.ext.name + "-fake." + other}}
		_, err = client.CoordinationV1().Leases(nodev1alpha1.DefaultLeaseNamespace).Create(ctx, foreign, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may write only Leases named <extension>."+h.node) {
			t.Errorf("%s: creating Lease %s of node %s with the heartbeat's credentials: %v, want refused by the own-node policy", h.lease(), foreign.Name, other, err)
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: reading its Node with the heartbeat's credentials: %v, want forbidden (no Node permission)", h.lease(), err)
		}
	}
}
