// Package realnode runs a real Kubernetes node beside an Environment's kwok
// nodes: containerd (Debian's, with runc and the CNI bridge plugins) and a
// kubelet built from the same k8s.io/kubernetes module as the control plane,
// joined with a client certificate. Its pods are real processes in real
// containers with a bridge IP; they reach the API server through the
// "kubernetes" Service address (10.96.0.1:443), which the node routes to the
// loopback API server (apiRoute; with Options.KubeProxy, kube-proxy routes
// it and every other ClusterIP Service).
//
// Limits, on purpose: one real node per machine (two kubelets would share
// the cgroup hierarchy's tasks and the hostPath paths of a DaemonSet), no
// real reboot (Reboot kills every container and changes the boot ID), no
// cluster DNS. It needs root and hack/realnode-prereqs.sh;
// docs/development.md describes it.
package realnode

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/test/framework"
)

// Names of the processes a node runs (their logs are <name>.log in the
// Environment's LogDir).
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
)

// The node's network: a bridge whose gateway is the node's IP; pods get
// addresses of subnet from host-local.
const (
	bridgeName = "nhe2e0"
	subnet     = "10.89.0.0/24"
	// NodeIP is the node's InternalIP and the pods' gateway: the one host
	// address pods reach.
	NodeIP = "10.89.0.1"
	// serviceIP and servicePort are the "kubernetes" Service's address, what
	// in-cluster clients dial (KUBERNETES_SERVICE_HOST/PORT).
	serviceIP   = "10.96.0.1"
	servicePort = "443"
	// cniBinDir is where Debian's containernetworking-plugins are.
	cniBinDir = "/usr/lib/cni"
)

// ImagesDir is where hack/realnode-prereqs.sh writes the images' tarballs.
func ImagesDir() (string, error) {
	if d := os.Getenv("NODEHEALTH_E2E_IMAGES_DIR"); d != "" {
		return d, nil
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "e2e-images"), nil
}

// Image names of ImagesDir's tarballs as pods name them.
const (
	PauseImage    = "nodehealth/e2e-pause:e2e"
	WorkloadImage = "nodehealth/e2e-workload:e2e"
)

// ProductImage is the image name of a product binary built by
// hack/realnode-prereqs.sh (tag e2e): under the registry ProductRegistry, a
// local name, so that a test never runs an image of the project's registry
// (ghcr.io/nodehealth) by mistake. The e2e tests install the chart with
// image.registry ProductRegistry and image.tag e2e.
func ProductImage(binary string) string { return ProductRegistry + "/nodehealth/" + binary + ":e2e" }

// ProductRegistry is the registry part of ProductImage's names.
const ProductRegistry = "localhost"

// Options configure Start.
type Options struct {
	// Name is the node's name (default "real-node-1").
	Name string
	// Taints are registered with the Node (kubelet registerWithTaints).
	Taints []corev1.Taint
	// Labels are registered with the Node.
	Labels map[string]string
	// Images are the tarballs (file names in ImagesDir) loaded into
	// containerd; default: every *.tar of ImagesDir.
	Images []string
	// KubeProxy runs kube-proxy (iptables mode) for the node, so every
	// ClusterIP Service routes, and publishes the "kubernetes" Service's
	// EndpointSlice (the node IP's forwarder) instead of the DNAT rule.
	// Other Services need kube-controller-manager's endpointslice-controller.
	KubeProxy bool
	// Mirrors maps a registry host (ghcr.io) to the endpoint containerd
	// pulls its images from instead (http://127.0.0.1:5000): a hosts.toml
	// of the CRI plugin's config_path (HostsTOML), as a node of an
	// air-gapped cluster reaches its own registry. A pull by digest through
	// it is verified against the digest, whatever the mirror serves.
	Mirrors map[string]string
}

// TestImages are the tarballs of ImagesDir that are the tests' own images
// (PauseImage, WorkloadImage), not the product's: Options.Images of a node
// whose product images are pulled from a registry.
func TestImages() []string {
	arch := runtime.GOARCH
	return []string{"e2e-pause-linux-" + arch + ".tar", "e2e-workload-linux-" + arch + ".tar"}
}

// HostsTOML is containerd's hosts.toml (1.5 and later, the CRI plugin's
// registry.config_path: <config_path>/<registry host>/hosts.toml) that sends
// the pulls and resolutions of images of registry host to endpoint, a
// registry URL; "http://" makes containerd speak plain HTTP to it. When the
// mirror fails, containerd falls back to the registry itself (server).
func HostsTOML(host, endpoint string) string {
	return fmt.Sprintf(`server = "https://%s"

[host.%q]
  capabilities = ["pull", "resolve"]
`, host, endpoint)
}

// Node is a running real node. Stop it before the Environment.
type Node struct {
	env  *framework.Environment
	opts Options
	dir  string

	cgroupRoot string
	kubeletCfg string
	kubeconfig string
	bootN      int

	containerd *framework.Process
	kubelet    *framework.Process
	kubeProxy  *framework.Process
	// kubeProxyHealth is kube-proxy's health address (/healthz, /livez).
	kubeProxyHealth string
	forwarder       net.Listener
	dnatRule        []string
	mounted         []string
}

// Name is the node's name.
func (n *Node) Name() string { return n.opts.Name }

// Dir holds the node's state: containerd/, kubelet/, cni/, boot_id.
func (n *Node) Dir() string { return n.dir }

// Supported says why real nodes cannot run here, or nil when they can.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (containerd, runc, bridge networking, cgroups)")
	}
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "unshare", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s is not installed: run hack/realnode-prereqs.sh", c)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		return fmt.Errorf("no CNI bridge plugin in %s: run hack/realnode-prereqs.sh", cniBinDir)
	}
	return nil
}

// EnableEnv is the environment variable that enables the real-node tests
// (make test-e2e sets it): they change the host (a bridge, an iptables rule,
// cgroups, mounts) and one machine runs one real node, so make
// test-integration, which runs ./test/... in parallel, skips them.
const EnableEnv = "NODEHEALTH_E2E"

// SkipUnlessEnabled skips the test unless EnableEnv is 1; when it is, a
// machine that cannot run a real node (Supported) fails the test.
func SkipUnlessEnabled(t interface {
	Helper()
	Skipf(string, ...any)
	Fatal(...any)
}) {
	t.Helper()
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("real-node test: set %s=1 (make test-e2e) to run it", EnableEnv)
	}
	if err := Supported(); err != nil {
		t.Fatal(err)
	}
}

// Start starts containerd and the kubelet of a real node and returns once the
// Node is Ready. On error everything it started is stopped.
func Start(ctx context.Context, env *framework.Environment, opts Options) (_ *Node, err error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "real-node-1"
	}
	for _, b := range []string{Kubelet} {
		if _, err := os.Stat(env.Binary(b)); err != nil {
			return nil, fmt.Errorf("%s not built: run hack/realnode-prereqs.sh (%w)", b, err)
		}
	}
	n := &Node{env: env, opts: opts, dir: filepath.Join(env.Dir, "realnode-"+opts.Name)}
	n.cgroupRoot = "/nodehealth-" + opts.Name
	defer func() {
		if err != nil {
			env.KeepArtifacts()
			n.Stop()
		}
	}()
	started := time.Now()
	n.cleanUpLeftovers()
	if err := n.setUpNetwork(); err != nil {
		return nil, fmt.Errorf("node network: %w", err)
	}
	if err := n.setUpCgroups(); err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	if err := n.writeConfig(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.loadImages(ctx); err != nil {
		return nil, err
	}
	if err := n.newBootID(); err != nil {
		return nil, err
	}
	if err := n.startKubelet(); err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx); err != nil {
		return nil, err
	}
	if opts.KubeProxy {
		if err := n.startKubeProxy(ctx); err != nil {
			return nil, err
		}
	}
	env.Logf("real node %s ready in %s", opts.Name, time.Since(started).Round(100*time.Millisecond))
	return n, nil
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// setUpNetwork creates the pods' bridge with the node IP (the CNI bridge
// plugin takes it over), and routes the "kubernetes" Service address to the
// API server (apiRoute).
func (n *Node) setUpNetwork() error {
	ctx := context.Background()
	if _, err := run(ctx, "ip", "link", "show", bridgeName); err != nil {
		if _, err := run(ctx, "ip", "link", "add", bridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	if out, _ := run(ctx, "ip", "-4", "addr", "show", "dev", bridgeName); !strings.Contains(out, NodeIP+"/") {
		if _, err := run(ctx, "ip", "addr", "add", NodeIP+"/24", "dev", bridgeName); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "ip", "link", "set", bridgeName, "up"); err != nil {
		return err
	}
	return n.apiRoute()
}

// apiRoute makes the API server, which listens on 127.0.0.1 only, reachable
// from pods at the "kubernetes" Service address: a TCP forwarder on the node
// IP at the API server's port, and a DNAT rule from 10.96.0.1:443 to it. It
// stands in for kube-proxy and the Service's endpoints, which the test
// control plane does not publish (--endpoint-reconciler-type=none). TLS
// passes through: the serving certificate is valid for 10.96.0.1.
func (n *Node) apiRoute() error {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(n.env.APIServerURL, "https://"))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(NodeIP, port))
	if err != nil {
		return fmt.Errorf("API server forwarder: %w", err)
	}
	n.forwarder = l
	target := net.JoinHostPort("127.0.0.1", port)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	}()
	if n.opts.KubeProxy {
		return nil
	}
	rule := []string{"PREROUTING", "-d", serviceIP + "/32", "-p", "tcp", "--dport", servicePort,
		"-m", "comment", "--comment", "nodehealth e2e " + n.opts.Name, "-j", "DNAT", "--to-destination", net.JoinHostPort(NodeIP, port)}
	if _, err := run(context.Background(), "iptables", append([]string{"-w", "-t", "nat", "-A"}, rule...)...); err != nil {
		return err
	}
	n.dnatRule = rule
	return nil
}

func forward(c net.Conn, target string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = copyConn(u, c); done <- struct{}{} }()
	go func() { _, _ = copyConn(c, u); done <- struct{}{} }()
	<-done
}

func copyConn(dst, src net.Conn) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			total += int64(nw)
			if werr != nil {
				return total, werr
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return total, err
		}
	}
}

// cleanUpLeftovers removes what an earlier run that was killed (a test
// timeout, SIGKILL) could not: processes left in the node's cgroups, the
// containerd shims of a node directory that no longer exists, and DNAT
// rules of the node's name (an old rule first in the chain would send pods
// to a gone API server).
func (n *Node) cleanUpLeftovers() {
	n.killContainers()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.HasSuffix(args[0], "containerd-shim-runc-v2") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && strings.Contains(args[i+1], "/realnode-") {
				if _, err := os.Stat(args[i+1]); err != nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	out, _ := run(context.Background(), "iptables", "-w", "-t", "nat", "-S", "PREROUTING")
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A PREROUTING ") || !strings.Contains(line, `"nodehealth e2e `+n.opts.Name+`"`) {
			continue
		}
		fields := strings.Fields(strings.Replace(strings.TrimPrefix(line, "-A "), `"nodehealth e2e `+n.opts.Name+`"`, "COMMENT", 1))
		for i, f := range fields {
			if f == "COMMENT" {
				fields[i] = "nodehealth e2e " + n.opts.Name
			}
		}
		_, _ = run(context.Background(), "iptables", append([]string{"-w", "-t", "nat", "-D"}, fields...)...)
	}
}

// cgroupControllers are the cgroup v1 hierarchies of these machines; the
// kubelet's cgroupRoot must exist in each.
func cgroupControllers() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "cgroup.procs")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

func (n *Node) setUpCgroups() error {
	for _, c := range cgroupControllers() {
		dir := filepath.Join("/sys/fs/cgroup", c, n.cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if c == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", c, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (n *Node) sock() string { return n.path("containerd", "containerd.sock") }

func (n *Node) writeConfig() error {
	for _, d := range []string{"containerd", "containerd/certs.d", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	containerdCfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/%[6]s"
  # The machine lacks CAP_SYS_RESOURCE: without it runc fails every sandbox
  # with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.sock(), n.path("containerd", "ttrpc.sock"),
		n.path("containerd", "opt"), PauseImage, n.path("containerd", "runc"), cniBinDir, n.path("cni", "net.d"),
		n.path("containerd", "certs.d"))
	if err := os.WriteFile(n.path("containerd", "config.toml"), []byte(containerdCfg), 0o644); err != nil {
		return err
	}
	for host, endpoint := range n.opts.Mirrors {
		dir := n.path("containerd", "certs.d", host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(HostsTOML(host, endpoint)), 0o644); err != nil {
			return err
		}
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "nodehealth-e2e",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, subnet, NodeIP, n.path("cni", "ipam"))
	if err := os.WriteFile(n.path("cni", "net.d", "10-nodehealth-e2e.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}

	// The kubelet's identity: a client certificate for system:node:<name>,
	// which the Node authorizer and NodeRestriction confine to this node.
	cfg, err := n.env.NewClientCertConfig("system:node:"+n.opts.Name, "system:nodes")
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["nodehealth"] = &clientcmdapi.Cluster{Server: n.env.APIServerURL, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["nodehealth"] = &clientcmdapi.Context{Cluster: "nodehealth", AuthInfo: "kubelet"}
	kc.CurrentContext = "nodehealth"
	n.kubeconfig = n.path("kubelet.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, n.kubeconfig); err != nil {
		return err
	}

	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	taints := ""
	if len(n.opts.Taints) > 0 {
		taints = "registerWithTaints:\n"
		for _, t := range n.opts.Taints {
			taints += fmt.Sprintf("- {key: %q, value: %q, effect: %q}\n", t.Key, t.Value, t.Effect)
		}
	}
	kubeletCfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines run cgroup v1, which the kubelet only accepts when told.
failCgroupV1: false
# containerd 1.6 lacks the CRI RuntimeConfig call that reports its cgroup
# driver: the kubelet logs it and uses this one.
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
address: %[3]q
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]q}
authorization: {mode: Webhook}
clusterDomain: cluster.local
failSwapOn: false
podLogsDir: %[7]q
# The disk is shared with everything else on the machine: never evict or
# garbage-collect the test's images because of it.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeLeaseDurationSeconds: 40
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
serializeImagePulls: false
%[8]s`, n.cgroupRoot, n.sock(), NodeIP, ports[0], ports[1], n.env.CAFile, n.path("pod-logs"), taints)
	n.kubeletCfg = n.path("kubelet-config.yaml")
	return os.WriteFile(n.kubeletCfg, []byte(kubeletCfg), 0o644)
}

func (n *Node) startContainerd(ctx context.Context) error {
	p, err := n.env.StartProcess(framework.ProcessSpec{Name: Containerd + "-" + n.opts.Name, Path: mustLook("containerd"),
		Args: []string{"--config", n.path("containerd", "config.toml")}})
	if err != nil {
		return err
	}
	n.containerd = p
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, werr := p.Exited(); exited {
			return false, fmt.Errorf("containerd exited (%v):\n%s", werr, p.LogTail(30))
		}
		_, err := run(ctx, "ctr", "--address", n.sock(), "version")
		return err == nil, nil
	})
}

func mustLook(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return name
	}
	return p
}

// Ctr runs ctr against the node's containerd in the Kubernetes namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", n.sock(), "--namespace", "k8s.io"}, args...)...)
}

func (n *Node) loadImages(ctx context.Context) error {
	dir, err := ImagesDir()
	if err != nil {
		return err
	}
	images := n.opts.Images
	if len(images) == 0 {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
		for _, m := range matches {
			images = append(images, filepath.Base(m))
		}
	}
	if len(images) == 0 {
		return fmt.Errorf("no image tarballs in %s: run hack/realnode-prereqs.sh", dir)
	}
	for _, img := range images {
		if _, err := n.Ctr(ctx, "images", "import", "--no-unpack=false", filepath.Join(dir, img)); err != nil {
			return fmt.Errorf("loading %s: %w", img, err)
		}
	}
	return nil
}

// newBootID writes a fresh boot ID for the next kubelet start.
func (n *Node) newBootID() error {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	n.bootN++
	return os.WriteFile(n.path("boot_id"), []byte(id), 0o644)
}

// BootID is the boot ID the kubelet reports (the file bind-mounted over
// /proc/sys/kernel/random/boot_id in its mount namespace).
func (n *Node) BootID() string {
	b, _ := os.ReadFile(n.path("boot_id"))
	return strings.TrimSpace(string(b))
}

// startKubelet runs the kubelet in a mount namespace of its own in which the
// node's boot_id file is bind-mounted over /proc/sys/kernel/random/boot_id.
// The kubelet's root dir is a shared mount, so the volumes the kubelet mounts
// there propagate back to the host's namespace, where containerd and runc
// see them.
func (n *Node) startKubelet() error {
	root := n.path("kubelet")
	if !n.isMounted(root) {
		if _, err := run(context.Background(), "mount", "--bind", root, root); err != nil {
			return err
		}
		n.mounted = append(n.mounted, root)
		if _, err := run(context.Background(), "mount", "--make-shared", root); err != nil {
			return err
		}
	}
	args := []string{
		"--config=" + n.kubeletCfg,
		"--kubeconfig=" + n.kubeconfig,
		"--root-dir=" + root,
		"--cert-dir=" + n.path("kubelet-pki"),
		"--hostname-override=" + n.opts.Name,
		"--node-ip=" + NodeIP,
		"--v=2",
	}
	if len(n.opts.Labels) > 0 {
		var ls []string
		for k, v := range n.opts.Labels {
			ls = append(ls, k+"="+v)
		}
		args = append(args, "--node-labels="+strings.Join(ls, ","))
	}
	script := `mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"`
	p, err := n.env.StartProcess(framework.ProcessSpec{Name: Kubelet + "-" + n.opts.Name, Path: mustLook("unshare"),
		Args: append([]string{"--mount", "--propagation", "unchanged", "sh", "-c", script, n.path("boot_id"), n.env.Binary(Kubelet)}, args...)})
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

func (n *Node) isMounted(path string) bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// WaitReady waits until the Node is Ready with the current boot ID.
func (n *Node) WaitReady(ctx context.Context) error {
	boot := n.BootID()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, werr := n.kubelet.Exited(); exited {
			return false, fmt.Errorf("kubelet exited (%v):\n%s", werr, n.kubelet.LogTail(40))
		}
		node, err := n.env.Client.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if node.Status.NodeInfo.BootID != boot {
			last = "boot ID " + node.Status.NodeInfo.BootID + ", want " + boot
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w; kubelet log:\n%s", n.opts.Name, last, err, n.kubelet.LogTail(30))
	}
	return nil
}

// KillContainer kills (SIGKILL) the running container of a pod on this node,
// as an OOM kill or a crash would; the kubelet then restarts it per the pod's
// restartPolicy.
func (n *Node) KillContainer(ctx context.Context, pod *corev1.Pod, container string) error {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != container {
			continue
		}
		id := strings.TrimPrefix(s.ContainerID, "containerd://")
		if id == "" || s.State.Running == nil {
			return fmt.Errorf("container %s of %s/%s is not running", container, pod.Namespace, pod.Name)
		}
		_, err := n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		return err
	}
	return fmt.Errorf("pod %s/%s has no container %s", pod.Namespace, pod.Name, container)
}

// Reboot emulates a reboot (PowerCycle) and returns once the Node is Ready
// with the new boot ID.
func (n *Node) Reboot(ctx context.Context) error {
	if err := n.PowerCycle(ctx); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// PowerCycle emulates a reboot without waiting for the node: the kubelet
// stops (SIGKILL, like a power cut), every container of the node is killed,
// containerd restarts, the boot ID changes and the kubelet starts again.
// What it does not emulate: the kernel, the network and the host's other
// processes (the API server, a Bottlerocket API emulator) stay up, and
// tmpfs volumes survive.
func (n *Node) PowerCycle(ctx context.Context) error {
	n.killKubelet()
	n.killContainers()
	if n.containerd != nil {
		_ = n.containerd.Stop(10 * time.Second)
	}
	n.killShims()
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.newBootID(); err != nil {
		return err
	}
	n.env.Logf("real node %s: rebooted, boot ID %s", n.opts.Name, n.BootID())
	return n.startKubelet()
}

func (n *Node) killKubelet() {
	if n.kubelet == nil {
		return
	}
	_ = syscall.Kill(-n.kubelet.Pid(), syscall.SIGKILL)
	<-n.kubelet.Done()
}

// killContainers kills every process in the node's cgroups until none is left.
func (n *Node) killContainers() {
	for attempt := 0; attempt < 50; attempt++ {
		pids := n.cgroupPids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) cgroupPids() []int {
	var pids []int
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", n.cgroupRoot), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killShims kills the containerd shims of this node's containerd, found by
// the containerd address on their command line (they outlive containerd).
func (n *Node) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(cmdline), n.sock()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// startKubeProxy publishes the "kubernetes" Service's endpoint (the node
// IP's forwarder to the API server) and runs kube-proxy in iptables mode
// as system:kube-proxy (bound to system:node-proxier by the default RBAC).
func (n *Node) startKubeProxy(ctx context.Context) error {
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(n.env.APIServerURL, "https://"))
	port, _ := strconv.Atoi(portStr)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "nodehealth-realnode"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{NodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := n.env.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the kubernetes Service's EndpointSlice: %w", err)
	}
	cfg, err := n.env.NewClientCertConfig("system:kube-proxy")
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["nodehealth"] = &clientcmdapi.Cluster{Server: n.env.APIServerURL, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kube-proxy"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["nodehealth"] = &clientcmdapi.Context{Cluster: "nodehealth", AuthInfo: "kube-proxy"}
	kc.CurrentContext = "nodehealth"
	kubeconfig := n.path("kube-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return err
	}
	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	config := n.path("kube-proxy.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %q
clusterCIDR: %q
healthzBindAddress: "127.0.0.1:%d"
metricsBindAddress: "127.0.0.1:%d"
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`, kubeconfig, n.opts.Name, subnet, ports[0], ports[1])), 0o644); err != nil {
		return err
	}
	p, err := n.env.StartProcess(framework.ProcessSpec{Name: "kube-proxy-" + n.opts.Name, Path: n.env.Binary("kube-proxy"),
		Args: []string{"--config=" + config, "--v=2"}})
	if err != nil {
		return err
	}
	n.kubeProxy = p
	n.kubeProxyHealth = fmt.Sprintf("127.0.0.1:%d", ports[0])
	url := n.KubeProxyHealthURL("/healthz")
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, werr := p.Exited(); exited {
			return false, fmt.Errorf("kube-proxy exited (%v):\n%s", werr, p.LogTail(30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// KubeProxyHealthURL is the URL of path (/healthz or /livez) on the node's
// kube-proxy health server (Options.KubeProxy).
func (n *Node) KubeProxyHealthURL(path string) string {
	return "http://" + n.kubeProxyHealth + path
}

// Stop stops the kubelet, kills every container, stops containerd and
// removes the node's mounts, cgroups, bridge and DNAT rule. The Node object
// stays in the API.
func (n *Node) Stop() {
	n.killKubelet()
	n.killContainers()
	if n.containerd != nil {
		_ = n.containerd.Stop(10 * time.Second)
	}
	n.killShims()
	if n.kubeProxy != nil {
		_ = n.kubeProxy.Stop(10 * time.Second)
		// kube-proxy leaves its rules behind when it exits.
		_, _ = run(context.Background(), n.env.Binary("kube-proxy"), "--cleanup")
	}
	if n.forwarder != nil {
		_ = n.forwarder.Close()
	}
	ctx := context.Background()
	if n.dnatRule != nil {
		_, _ = run(ctx, "iptables", append([]string{"-w", "-t", "nat", "-D"}, n.dnatRule...)...)
	}
	// The kubelet's own chains (kube-proxy --cleanup leaves them).
	for _, rule := range [][]string{
		{"-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-D", "OUTPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-F", "KUBE-FIREWALL"}, {"-t", "filter", "-X", "KUBE-FIREWALL"},
		{"-t", "filter", "-X", "KUBE-KUBELET-CANARY"}, {"-t", "nat", "-X", "KUBE-KUBELET-CANARY"},
		{"-t", "mangle", "-X", "KUBE-KUBELET-CANARY"}, {"-t", "mangle", "-X", "KUBE-IPTABLES-HINT"},
	} {
		_, _ = run(ctx, "iptables", append([]string{"-w"}, rule...)...)
	}
	// Every mount under the node's folder: the kubelet's volumes, containerd's
	// rootfs and shm mounts, the kubelet root's own bind mount. Deepest first.
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], n.dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	for _, c := range cgroupControllers() {
		removeCgroupTree(filepath.Join("/sys/fs/cgroup", c, n.cgroupRoot))
	}
	_, _ = run(ctx, "ip", "link", "delete", bridgeName)
}

// removeCgroupTree removes a cgroup folder and its children, deepest first
// (cgroup folders are removed with rmdir, never with their files).
func removeCgroupTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(dirs[i])
	}
}

// ServiceAccountToken returns the service account token the kubelet wrote
// into a pod's projected volume (kube-api-access-*): the pod- and
// node-bound token the pod's containers use.
func (n *Node) ServiceAccountToken(pod *corev1.Pod) (string, error) {
	matches, _ := filepath.Glob(n.path("kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	if len(matches) == 0 {
		return "", fmt.Errorf("no projected token of pod %s/%s under %s", pod.Namespace, pod.Name, n.path("kubelet", "pods", string(pod.UID)))
	}
	b, err := os.ReadFile(matches[0])
	return strings.TrimSpace(string(b)), err
}
