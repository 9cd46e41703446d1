package heartbeat_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// extension is one extension pod on one node: a ServiceAccount in its own
// namespace, allowed to write Leases in the Lease namespace (RBAC written
// here; deploy/ ships its own), and a token bound to a pod on the node.
type extension struct {
	name    string // the extension, e.g. kube-proxy
	node    string
	leaseNS string
	podNS   string
	pod     string
	sa      *framework.ServiceAccountClient
}

// newExtension creates the pod namespace, ServiceAccount, RBAC and a pod on
// node, and returns a client authenticated with the pod's bound token.
func newExtension(t *testing.T, name, node, leaseNS string) *extension {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	e := &extension{name: name, node: node, leaseNS: leaseNS, podNS: testenv.NewNamespace(t, "ext"), pod: name + "-" + node}
	grantLeaseAccess(t, leaseNS, e.podNS, name)
	sa, err := env.ClientForPodServiceAccount(ctx, e.podNS, name, e.pod, node)
	if err != nil {
		t.Fatal(err)
	}
	e.sa = sa
	return e
}

func (e *extension) leaseName() string { return e.name + "." + e.node }

// grantLeaseAccess is what an extension needs and nothing more: Lease writes
// in the Lease namespace, and SelfSubjectReviews to learn its node's UID.
// No permission on Nodes.
func grantLeaseAccess(t *testing.T, leaseNS, saNS, sa string) {
	t.Helper()
	ctx := testenv.Context(t)
	c := testenv.Env(t).Client.RbacV1()
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}}
	name := "heartbeat-" + saNS + "-" + sa
	if _, err := c.Roles(leaseNS).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"create", "get", "update", "patch", "delete"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RoleBindings(leaseNS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// writeKubeconfig writes a kubeconfig that authenticates with the pod-bound
// token only, as a pod's projected token would.
func (e *extension) writeKubeconfig(t *testing.T) string {
	t.Helper()
	env := testenv.Env(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteTokenKubeconfig(path, e.name, e.sa.Token); err != nil {
		t.Fatal(err)
	}
	return path
}

// healthEndpoint is a local extension health endpoint that can be switched
// off (503) and on.
type healthEndpoint struct {
	*httptest.Server
	down atomic.Bool
}

func newHealthEndpoint(t *testing.T) *healthEndpoint {
	h := &healthEndpoint{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if h.down.Load() {
			http.Error(w, "service proxy is not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(h.Close)
	return h
}

// sidecarSettings are the parts of an ExtensionHeartbeatConfiguration the
// tests vary.
type sidecarSettings struct {
	probeURL         string
	renewInterval    string
	probePeriod      string
	probeTimeout     string
	failureThreshold int
	register         bool
}

func (e *extension) sidecarConfig(t *testing.T, kubeconfig string, s sidecarSettings) string {
	t.Helper()
	addrs := testenv.FreeLoopbackAddresses(t, 2)
	return fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: %s
  healthzBindAddress: %s
logging:
  verbosity: 2
extensionName: %s
lease:
  namespace: %s
  duration: 30s
  renewInterval: %s
probe:
  http:
    url: %s
  period: %s
  timeout: %s
  successThreshold: 1
  failureThreshold: %d
register: %t
`, kubeconfig, addrs[0], addrs[1], e.name, e.leaseNS, s.renewInterval, s.probeURL, s.probePeriod, s.probeTimeout, s.failureThreshold, s.register)
}

// sidecar is a running extension-heartbeat process.
type sidecar struct {
	*framework.Process
	configPath string
	config     string
}

func (c *sidecar) metricsURL() string {
	for _, line := range strings.Split(c.config, "\n") {
		if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "metricsBindAddress: "); ok {
			return "http://" + addr + "/metrics"
		}
	}
	return ""
}

func (c *sidecar) healthzURL() string {
	for _, line := range strings.Split(c.config, "\n") {
		if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "healthzBindAddress: "); ok {
			return "http://" + addr + "/healthz"
		}
	}
	return ""
}

// startSidecar writes config to configPath (a new file when empty) and runs
// extension-heartbeat with it, as the pod's container would: NODE_NAME and
// POD_NAME from the downward API.
func (e *extension) startSidecar(t *testing.T, name, configPath, config string) *sidecar {
	t.Helper()
	if configPath == "" {
		configPath = filepath.Join(t.TempDir(), "extension-heartbeat.yaml")
	}
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := testenv.Env(t).StartProcess(framework.ProcessSpec{
		Name: name,
		Path: testenv.Binary(t, "extension-heartbeat"),
		Args: []string{"--config", configPath},
		Env:  []string{"NODE_NAME=" + e.node, "POD_NAME=" + e.pod},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(20 * time.Second); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.LogPath, p.LogTail(40))
		}
	})
	return &sidecar{Process: p, configPath: configPath, config: config}
}

// waitLease waits until cond holds for the extension's Lease.
func (e *extension) waitLease(t *testing.T, what string, cond func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	t.Helper()
	return waitLeaseFor(t, e.leaseNS, e.leaseName(), what, testenv.DefaultTimeout, cond)
}

func waitLeaseFor(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	t.Helper()
	l, err := testenv.Env(t).WaitForLease(testenv.ContextWithTimeout(t, timeout), ns, name, cond)
	if err != nil {
		t.Fatalf("waiting for lease %s/%s to be %s: %v", ns, name, what, err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// heldBy is a condition: held by holder, with no release reason.
func heldBy(holderName string) func(*coordinationv1.Lease) bool {
	return func(l *coordinationv1.Lease) bool {
		_, reason := l.Annotations[nodev1alpha1.ReasonAnnotation]
		return holder(l) == holderName && !reason && l.Spec.RenewTime != nil
	}
}

// releasedWith is a condition: released with reason.
func releasedWith(reason string) func(*coordinationv1.Lease) bool {
	return func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && holder(l) == "" && l.Annotations[nodev1alpha1.ReasonAnnotation] == reason
	}
}

// renewedAfter is a condition: held by holderName and renewed after t0.
func renewedAfter(holderName string, t0 *metav1.MicroTime) func(*coordinationv1.Lease) bool {
	return func(l *coordinationv1.Lease) bool {
		return heldBy(holderName)(l) && l.Spec.RenewTime.After(t0.Time)
	}
}

// ownedByNode checks the Lease's ownerReference to the Node.
func ownedByNode(t *testing.T, l *coordinationv1.Lease, node string) {
	t.Helper()
	n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(testenv.Context(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.OwnerReferences) != 1 {
		t.Fatalf("lease %s ownerReferences %v, want one to Node %s", l.Name, l.OwnerReferences, node)
	}
	ref := l.OwnerReferences[0]
	if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != node || ref.UID != n.UID {
		t.Errorf("lease %s ownerReference %+v, want Node %s uid %s", l.Name, ref, node, n.UID)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(testenv.Context(t), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b.String())
	}
	return b.String()
}

// writeFile replaces path atomically, as the kubelet's swap of a ConfigMap
// volume does, so that the watcher never reads half a file.
func writeFile(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
