package framework

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names and addresses every Environment uses.
const (
	// KwokNodeAnnotation marks the nodes kwok simulates (kwok's own convention);
	// nodes without it are left alone, so tests can also create nodes nobody manages.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeAnnotationValue is the value of KwokNodeAnnotation on simulated nodes.
	KwokNodeAnnotationValue = "fake"

	// AdminUser is the user of Config and Kubeconfig (group system:masters).
	AdminUser = "nodehealth-admin"

	// defaultServiceAccountIssuer is what kubeadm clusters use; tokens name it as "iss".
	defaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// podCIDR is where kwok takes pod IPs from; it only has to not overlap the service range.
	podCIDR = "10.244.0.0/16"
	// kwokNodeIP is the InternalIP kwok reports for every simulated node.
	kwokNodeIP = "10.240.0.1"
	// nodeLeaseDurationSeconds matches the kubelet default: kwok then renews every 10s.
	nodeLeaseDurationSeconds = 40
	// portAttempts bounds retries when another process grabs a probed free port.
	portAttempts = 3
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// start runs the components in dependency order. The deferred Stop in Start cleans up
// after any error here.
func (e *Environment) start(ctx context.Context) error {
	if err := e.writePKI(); err != nil {
		return err
	}
	var etcdURL string
	if err := e.retryPorts(Etcd, func() (err error) {
		etcdURL, err = e.startEtcd(ctx)
		return err
	}); err != nil {
		return err
	}
	if err := e.retryPorts(KubeAPIServer, func() error { return e.startAPIServer(ctx, etcdURL) }); err != nil {
		return err
	}

	// kube-controller-manager, kube-scheduler and kwok only need the apiserver:
	// start all of them, then wait for each, so start-up takes as long as the slowest.
	var readiness []func() error
	if !e.opts.withoutKCM {
		wait, err := e.startControllerManager(ctx)
		if err != nil {
			return err
		}
		readiness = append(readiness, wait)
	}
	if !e.opts.withoutScheduler {
		wait, err := e.startScheduler(ctx)
		if err != nil {
			return err
		}
		readiness = append(readiness, wait)
	}
	if !e.opts.withoutKwok {
		wait, err := e.startKwok(ctx)
		if err != nil {
			return err
		}
		readiness = append(readiness, wait)
	}
	var errs []error
	for _, wait := range readiness {
		errs = append(errs, wait())
	}
	return errors.Join(errs...)
}

// retryPorts retries start when its process lost a race for a probed free port.
func (e *Environment) retryPorts(name string, start func() error) error {
	for attempt := 1; ; attempt++ {
		err := start()
		if err == nil || attempt == portAttempts || !portInUse(err) {
			return err
		}
		e.opts.logf("%s: a port was taken meanwhile, retrying with new ports", name)
	}
}

func (e *Environment) path(elem ...string) string {
	return filepath.Join(append([]string{e.Dir}, elem...)...)
}

// writePKI writes the CA, the apiserver serving certificate, the service-account
// signing key and one kubeconfig per identity. Each component gets its own identity so
// RBAC applies to it as in a kubeadm cluster, and audit/log lines say who did what.
func (e *Environment) writePKI() error {
	var err error
	if e.ca, err = newCA(); err != nil {
		return err
	}
	serving, err := e.ca.newServingCert("kube-apiserver",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	e.CAFile = e.path("pki", "ca.crt")
	for name, data := range map[string][]byte{
		"ca.crt":        e.ca.certPEM,
		"apiserver.crt": serving.certPEM,
		"apiserver.key": serving.keyPEM,
		"sa.key":        saKey,
		"sa.pub":        saPub,
	} {
		if err := writeFile(e.path("pki", name), data); err != nil {
			return fmt.Errorf("writing PKI: %w", err)
		}
	}
	return nil
}

// startEtcd starts a single-member etcd and returns its client URL.
func (e *Environment) startEtcd(ctx context.Context) (string, error) {
	clientPort, err := freePort()
	if err != nil {
		return "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return "", err
	}
	clientURL, peerURL := "http://"+hostPort(clientPort), "http://"+hostPort(peerPort)
	dataDir := e.path("etcd")
	// A data dir left by a failed attempt remembers the old peer URL; start afresh.
	if err := os.RemoveAll(dataDir); err != nil {
		return "", err
	}
	p, err := e.StartProcess(ProcessSpec{Name: Etcd, Path: e.Binary(Etcd), Args: []string{
		"--name=default",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--initial-cluster-state=new",
		// Throwaway data: durability buys nothing and fsync dominates test latency.
		"--unsafe-no-fsync=true",
	}})
	if err != nil {
		return "", err
	}
	started := time.Now()
	ready := func(ctx context.Context, p *Process) error {
		httpClient := &http.Client{}
		return waitUntil(ctx, p, "healthy", func(ctx context.Context) error {
			body, err := httpGet(ctx, httpClient, clientURL+"/health")
			if err == nil && !strings.Contains(body, `"health":"true"`) {
				err = fmt.Errorf("unhealthy: %s", body)
			}
			return err
		})
	}
	e.setReady(Etcd, ready)
	if err := ready(ctx, p); err != nil {
		return "", err
	}
	e.opts.logf("etcd ready on %s in %s", clientURL, time.Since(started).Round(100*time.Millisecond))
	return clientURL, nil
}

func (e *Environment) startAPIServer(ctx context.Context, etcdURL string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	e.APIServerURL = "https://" + hostPort(port)
	e.ServiceAccountIssuer = defaultServiceAccountIssuer
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + fmt.Sprint(port),
		// Without it the apiserver advertises the host's default-route address.
		"--advertise-address=127.0.0.1",
		// The "kubernetes" Service endpoints would be 127.0.0.1, which EndpointSlice
		// validation rejects; nothing here reaches the apiserver through the Service.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + e.path("apiserver-certs"),
		"--tls-cert-file=" + e.path("pki", "apiserver.crt"),
		"--tls-private-key-file=" + e.path("pki", "apiserver.key"),
		"--client-ca-file=" + e.CAFile,
		"--authorization-mode=Node,RBAC",
		// NodeRestriction on top of the default plugins (which include
		// ServiceAccount, TaintNodesByCondition, ValidatingAdmissionPolicy and,
		// from v1.36, MutatingAdmissionPolicy). Every flag here is also
		// understood by v1.30, the oldest release make test-compat runs.
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=" + e.ServiceAccountIssuer,
		"--service-account-key-file=" + e.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + e.path("pki", "sa.key"),
		"--service-cluster-ip-range=" + e.opts.serviceClusterIPs,
		"--allow-privileged=true",
		// On SIGTERM, close the HTTP server after 2s instead of waiting up to the 60s
		// request timeout for open connections: a test's leftover watch must not
		// turn Stop into a SIGKILL.
		"--shutdown-send-retry-after=true",
		"--v=2",
	}
	p, err := e.StartProcess(ProcessSpec{Name: KubeAPIServer, Path: e.Binary(KubeAPIServer), Args: append(args, e.opts.apiServerFlags...)})
	if err != nil {
		return err
	}

	admin, err := e.ca.newClientCert(AdminUser, "system:masters")
	if err != nil {
		return err
	}
	e.admin = admin
	e.Kubeconfig = e.path("admin.kubeconfig")
	if err := e.writeKubeconfig(e.Kubeconfig, AdminUser, admin); err != nil {
		return err
	}
	e.Config = &rest.Config{
		Host:            e.APIServerURL,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.ca.certPEM, CertData: admin.certPEM, KeyData: admin.keyPEM},
		// Tests create objects in bursts; the client-side default (5 QPS) would make
		// them measure the rate limiter instead of the control plane.
		QPS:   200,
		Burst: 400,
	}
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return err
	}

	started := time.Now()
	ready := func(ctx context.Context, p *Process) error {
		return waitUntil(ctx, p, "ready", func(ctx context.Context) error {
			body, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("%w: %s", err, body)
			}
			return nil
		})
	}
	e.setReady(KubeAPIServer, ready)
	if err := ready(ctx, p); err != nil {
		return err
	}
	e.opts.logf("kube-apiserver ready on %s in %s", e.APIServerURL, time.Since(started).Round(100*time.Millisecond))
	return nil
}

// startControllerManager starts kube-controller-manager and returns a function that
// waits until it works: the serviceaccount controller has created the "default"
// ServiceAccount (it has no serving port to probe, see --secure-port=0).
func (e *Environment) startControllerManager(ctx context.Context) (func() error, error) {
	kubeconfig, err := e.componentKubeconfig(KubeControllerManager, "system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(e.opts.controllers, ","),
		// One instance; leader election would only delay start-up by a lease period.
		"--leader-elect=false",
		// No serving port: parallel test packages cannot collide on it.
		"--secure-port=0",
		// Each controller acts as its own kube-system ServiceAccount with the RBAC of
		// a real cluster (tokens come from the TokenRequest API).
		"--use-service-account-credentials=true",
		"--root-ca-file=" + e.CAFile,
		"--v=2",
	}
	p, err := e.StartProcess(ProcessSpec{Name: KubeControllerManager, Path: e.Binary(KubeControllerManager), Args: append(args, e.opts.kcmFlags...)})
	if err != nil {
		return nil, err
	}
	started := time.Now()
	return func() error {
		if err := waitWatching(ctx, p, `ready (no "default" ServiceAccount in namespace "default")`, func(ctx context.Context) error {
			lw := cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "serviceaccounts", metav1.NamespaceDefault,
				fields.OneTermEqualSelector("metadata.name", "default"))
			_, err := WaitFor(ctx, lw, func(*corev1.ServiceAccount) bool { return true })
			return err
		}); err != nil {
			return err
		}
		e.opts.logf("kube-controller-manager ready in %s", time.Since(started).Round(100*time.Millisecond))
		return nil
	}, nil
}

func (e *Environment) startScheduler(ctx context.Context) (func() error, error) {
	kubeconfig, err := e.componentKubeconfig(KubeScheduler, "system:kube-scheduler")
	if err != nil {
		return nil, err
	}
	// A serving port (on loopback) is what gives the scheduler a /readyz to wait on.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := e.StartProcess(ProcessSpec{Name: KubeScheduler, Path: e.Binary(KubeScheduler), Args: []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + fmt.Sprint(port),
		"--cert-dir=" + e.path("kube-scheduler-certs"),
		"--v=2",
	}})
	if err != nil {
		return nil, err
	}
	url := "https://" + hostPort(port) + "/readyz"
	started := time.Now()
	return func() error {
		// The scheduler serves a self-signed certificate it generates at start; there
		// is nothing to verify it against, and the connection never leaves loopback.
		httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
		if err := waitUntil(ctx, p, "ready", func(ctx context.Context) error {
			_, err := httpGet(ctx, httpClient, url)
			if err != nil && strings.Contains(err.Error(), "404 Not Found") {
				// Older schedulers (v1.30, make test-compat) have no /readyz:
				// their /healthz is the readiness they offer.
				_, err = httpGet(ctx, httpClient, strings.TrimSuffix(url, "/readyz")+"/healthz")
			}
			return err
		}); err != nil {
			return err
		}
		e.opts.logf("kube-scheduler ready in %s", time.Since(started).Round(100*time.Millisecond))
		return nil
	}, nil
}

func (e *Environment) startKwok(ctx context.Context) (func() error, error) {
	kubeconfig, err := e.componentKubeconfig(Kwok, "system:masters")
	if err != nil {
		return nil, err
	}
	config := e.path("kwok.yaml")
	if err := writeFile(config, kwokStages); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := e.StartProcess(ProcessSpec{
		Name: Kwok,
		Path: e.Binary(Kwok),
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + config,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			"--node-lease-duration-seconds=" + fmt.Sprint(nodeLeaseDurationSeconds),
			"--cidr=" + podCIDR,
			"--node-ip=" + kwokNodeIP,
			// kwok's server only provides /healthz here; without an address it binds nothing.
			"--server-address=" + hostPort(port),
		},
		// kwok also loads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a
		// developer's own kwok configuration out of the tests.
		Env: []string{"HOME=" + e.path("kwok-home")},
	})
	if err != nil {
		return nil, err
	}
	url := "http://" + hostPort(port) + "/healthz"
	started := time.Now()
	return func() error {
		httpClient := &http.Client{}
		if err := waitUntil(ctx, p, "healthy", func(ctx context.Context) error {
			_, err := httpGet(ctx, httpClient, url)
			return err
		}); err != nil {
			return err
		}
		e.opts.logf("kwok ready in %s", time.Since(started).Round(100*time.Millisecond))
		return nil
	}, nil
}

// componentKubeconfig writes a kubeconfig for a component identity. For
// "system:masters" the user is named after the component and is in that group.
func (e *Environment) componentKubeconfig(component, user string) (string, error) {
	var groups []string
	if user == "system:masters" {
		user, groups = component, []string{"system:masters"}
	}
	kp, err := e.ca.newClientCert(user, groups...)
	if err != nil {
		return "", err
	}
	path := e.path(component + ".kubeconfig")
	return path, e.writeKubeconfig(path, user, kp)
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// service account namespace/name does in a cluster (user
// system:serviceaccount:NAMESPACE:NAME, its service-account groups) and is
// authorized for everything (system:masters): a component a test runs with
// it is seen by admission policies as the in-cluster component it stands
// for, without the test writing its RBAC.
func (e *Environment) ServiceAccountKubeconfig(namespace, name string) (string, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	kp, err := e.ca.newClientCert(user, "system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:masters")
	if err != nil {
		return "", err
	}
	path := e.path("serviceaccount-" + namespace + "-" + name + ".kubeconfig")
	return path, e.writeKubeconfig(path, user, kp)
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded).
func (e *Environment) writeKubeconfig(path, user string, kp *keyPair) error {
	return e.writeKubeconfigFor(e.APIServerURL, path, user, kp)
}

// WriteAdminKubeconfig writes a kubeconfig like Kubeconfig's (the admin user)
// that reaches the API server at server instead, e.g. through a Proxy:
// "https://" + proxy.Addr(). The serving certificate is valid for 127.0.0.1.
func (e *Environment) WriteAdminKubeconfig(path, server string) error {
	return e.writeKubeconfigFor(server, path, AdminUser, e.admin)
}

func (e *Environment) writeKubeconfigFor(server, path, user string, kp *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodehealth"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: e.ca.certPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
	cfg.Contexts["nodehealth"] = &clientcmdapi.Context{Cluster: "nodehealth", AuthInfo: user}
	cfg.CurrentContext = "nodehealth"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// NewClientCertConfig returns a rest.Config authenticating with a client certificate
// for user in groups, signed by the Environment's CA. For example
// NewClientCertConfig("system:node:n1", "system:nodes") acts as n1's kubelet, which
// the Node authorizer and NodeRestriction then confine to n1.
func (e *Environment) NewClientCertConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := e.ca.newClientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.TLSClientConfig.CertData = kp.certPEM
	cfg.TLSClientConfig.KeyData = kp.keyPEM
	return cfg, nil
}

func httpGet(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

// waitWatching runs fn (which blocks, typically on a watch) until it returns, the
// process exits, or ctx is done, and turns failures into a startError with the log tail.
func waitWatching(ctx context.Context, p *Process, what string, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := fn(ctx)
	if err == nil {
		return nil
	}
	if exited, waitErr := p.Exited(); exited {
		return &startError{name: p.Name, msg: fmt.Sprintf("exited (%v) before it was %s", waitErr, what), p: p}
	}
	return &startError{name: p.Name, msg: fmt.Sprintf("not %s: %v", what, err), p: p}
}
