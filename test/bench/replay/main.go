// Command replay measures the node-health controller's cost beyond what the local
// control plane can carry: the real _output/bin/nodehealth-controller binary, as a
// process, with its real client path (TLS, HTTP/2, protobuf watch decoding, informers,
// workqueue), fed by a replay server in this process that speaks the part of the
// Kubernetes API the controller uses and streams Lease renewals from memory — no etcd,
// no kube-apiserver. The default load is 5,000 nodes × 10 extensions whose Leases
// renew every 10 s: 5,000 watch events/s. It reports the controller's CPU (utime +
// stime from /proc over the window) and memory, and writes
// docs/benchmarks/data/replay.json.
//
//	go run ./test/bench/replay                      # 5,000 × 10, 2-minute window
//	make bench-replay
package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/bench/internal/measure"
	"nodehealth.io/nodehealth/test/bench/results"
	"nodehealth.io/nodehealth/test/framework"
)

const (
	leaseNamespace      = nodev1alpha1.DefaultLeaseNamespace
	controllerNamespace = "nodehealth-system"
)

type config struct {
	nodes, extensions int
	renewInterval     time.Duration
	leaseDuration     time.Duration
	settle, window    time.Duration
	qps               int
	silence           int
	renewalGrace      time.Duration
	controllerEnv     []string
	results           string
	keep              bool
	profileDir        string
	bin               string
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 5000, "nodes")
	flag.IntVar(&c.extensions, "extensions", 10, "extension Leases per node")
	flag.DurationVar(&c.renewInterval, "renew-interval", 10*time.Second, "how often each Lease renews")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 40*time.Second, "spec.leaseDurationSeconds of every Lease")
	flag.DurationVar(&c.settle, "settle", 60*time.Second, "time after the controller's writes stopped before the window (a full Lease duration: every node's expiry timer has fired once)")
	flag.DurationVar(&c.window, "window", 2*time.Minute, "measurement window")
	flag.IntVar(&c.silence, "silence", 20, "after the window, stop renewing one extension's Lease on this many nodes (spread over the fleet) and measure when each is tainted")
	flag.DurationVar(&c.renewalGrace, "renewal-grace", 10*time.Second, "the controller's renewalGrace (its default), for the expiry instant")
	flag.IntVar(&c.qps, "controller-qps", 0, "clientConnection.qps of the controller (0: its default); start-up writes one condition per node")
	env := flag.String("controller-env", "", "comma-separated NAME=VALUE environment of the controller, e.g. GOMEMLIMIT=200MiB")
	flag.StringVar(&c.results, "results", "docs/benchmarks/data/replay.json", "write machine-readable results here; empty: none")
	flag.StringVar(&c.profileDir, "profile-dir", "", "save the controller's CPU profile (over the window) and heap profile (at its end) here")
	flag.StringVar(&c.bin, "controller-bin", "", "the controller binary (default: _output/bin/nodehealth-controller)")
	flag.BoolVar(&c.keep, "keep", false, "keep the run's folder (controller log, config)")
	flag.Parse()
	if *env != "" {
		c.controllerEnv = strings.Split(*env, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "replay: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s replay: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func extensionName(i int) string { return fmt.Sprintf("extension-%d", i) }

func run(ctx context.Context, c config) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "_output", "bin", "nodehealth-controller")
	if c.bin != "" {
		bin = c.bin
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%v (run `make build`)", err)
	}
	dir, err := os.MkdirTemp("", "nodehealth-replay-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	} else {
		logf("keeping %s", dir)
	}

	s := newServer(leaseNamespace)
	keys := populate(s, c)
	logf("%d nodes, %d Leases in memory", c.nodes, len(keys))

	ts := httptest.NewUnstartedServer(s)
	ts.EnableHTTP2 = true
	ts.Config.ErrorLog = nil
	ts.StartTLS()
	defer ts.Close()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, ts.URL, ts.Certificate()); err != nil {
		return err
	}
	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	cfgPath := filepath.Join(dir, "controller.yaml")
	if err := writeControllerConfig(cfgPath, kubeconfig, ports, c); err != nil {
		return err
	}

	// The renewals: Lease i of M is due at start + k·interval + i·interval/M.
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go renewLoop(genCtx, s, keys, c.renewInterval)

	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), c.controllerEnv...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	started := time.Now()

	// Wait for the controller to sync and finish its start-up writes: its evaluation
	// counter moves, and no Node write for 10 s.
	lastWrites, quietSince := int64(-1), time.Now()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the controller exited: %v (log %s)", err, logFile.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		m, err := measure.Scrape(ctx, metricsURL)
		if err != nil || m.Sum("nodehealth_evaluations_total") < float64(c.nodes) {
			continue
		}
		if w := s.nodeWrites.Load(); w != lastWrites {
			lastWrites, quietSince = w, time.Now()
		}
		if time.Since(quietSince) > 10*time.Second {
			break
		}
		if time.Since(started) > 15*time.Minute {
			return fmt.Errorf("the controller was still writing Nodes after 15 minutes")
		}
	}
	logf("controller synced and quiet %s after it started (%d Node writes at start-up); settling for %s",
		time.Since(started).Round(time.Second), s.nodeWrites.Load(), c.settle)
	select {
	case <-time.After(c.settle):
	case <-ctx.Done():
		return ctx.Err()
	case err := <-exited:
		return fmt.Errorf("the controller exited: %v", err)
	}

	pid := cmd.Process.Pid
	p0, self0 := measure.ReadProc(pid), measure.ReadProc(os.Getpid())
	m0, err := measure.Scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	ev0, nw0, dropped0, t0 := s.eventsSent.Load(), s.nodeWrites.Load(), s.dropped.Load(), time.Now()
	logf("window of %s", c.window)
	if c.profileDir != "" {
		go saveProfiles(ctx, metricsURL, c.profileDir, c.window)
	}
	var peakRSS int64
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for end := time.Now().Add(c.window); time.Now().Before(end); {
		select {
		case <-tick.C:
			peakRSS = max(peakRSS, measure.ReadProc(pid).RSS)
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("the controller exited: %v", err)
		}
	}
	elapsed := time.Since(t0)
	p1, self1 := measure.ReadProc(pid), measure.ReadProc(os.Getpid())
	m1, err := measure.Scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	load := measure.LoadAverage()
	det, err := measureDetection(ctx, s, keys, c, exited)
	if err != nil {
		return err
	}
	r := map[string]float64{
		"detected":                     float64(det.detected),
		"silenced":                     float64(det.silenced),
		"detectionP50Ms":               float64(det.p50.Milliseconds()),
		"detectionP99Ms":               float64(det.p99.Milliseconds()),
		"detectionMaxMs":               float64(det.max.Milliseconds()),
		"eventsPerSecond":              float64(s.eventsSent.Load()-ev0) / elapsed.Seconds(),
		"targetEventsPerSecond":        float64(len(keys)) / c.renewInterval.Seconds(),
		"controllerCPUPercent":         100 * (p1.CPU - p0.CPU).Seconds() / elapsed.Seconds(),
		"controllerRSSMiB":             float64(p1.RSS) / (1 << 20),
		"controllerPeakRSSMiB":         float64(max(peakRSS, p1.RSS)) / (1 << 20),
		"controllerHWMMiB":             float64(p1.HWM) / (1 << 20),
		"controllerHeapMiB":            m1.Sum("go_memstats_heap_inuse_bytes") / (1 << 20),
		"goroutines":                   m1.Sum("go_goroutines"),
		"evaluationsPerSecond":         (m1.Sum("nodehealth_evaluations_total") - m0.Sum("nodehealth_evaluations_total")) / elapsed.Seconds(),
		"nodeWritesInWindow":           float64(s.nodeWrites.Load() - nw0),
		"replayServerCPUPercent":       100 * (self1.CPU - self0.CPU).Seconds() / elapsed.Seconds(),
		"watchesDropped":               float64(s.dropped.Load()),
		"requestsNotServed":            float64(s.unknown.Load()),
		"controllerCPUMsPer1000Events": 1000 * (p1.CPU - p0.CPU).Seconds() / (float64(s.eventsSent.Load()-ev0) / 1000),
		"watchesDroppedInWindow":       float64(s.dropped.Load() - dropped0),
		"loadAverage1m":                load1(load),
	}
	fmt.Println(markdown(c, r, load))
	if c.results != "" {
		doc := results.New("replay", time.Now())
		doc.Notes = fmt.Sprintf("Replay server (TLS, HTTP/2, protobuf watch) in the benchmark process; %d nodes x %d extensions renewed every %s, leases of %s; window %s after %s settling; load average at the end %s; controller env %q",
			c.nodes, c.extensions, c.renewInterval, c.leaseDuration, c.window, c.settle, load, strings.Join(c.controllerEnv, " "))
		doc.Points = []results.Point{{Nodes: c.nodes, Extensions: c.extensions, Metrics: r}}
		path := c.results
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		if err := doc.Write(path); err != nil {
			return err
		}
		logf("wrote %s", c.results)
	}
	return nil
}

func markdown(c config, r map[string]float64, load string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %d nodes × %d extensions (replay) | |\n|---|---:|\n", c.nodes, c.extensions)
	row := func(name, v string) { fmt.Fprintf(&b, "| %s | %s |\n", name, v) }
	row("Lease watch events/s: target / delivered", fmt.Sprintf("%.0f / %.0f", r["targetEventsPerSecond"], r["eventsPerSecond"]))
	row("Controller CPU (% of one core)", fmt.Sprintf("%.1f%%", r["controllerCPUPercent"]))
	row("Controller CPU per 1,000 events", fmt.Sprintf("%.0f ms", r["controllerCPUMsPer1000Events"]))
	row("Controller RSS at the end (peak in window; VmHWM)", fmt.Sprintf("%.1f MiB (%.1f; %.1f)", r["controllerRSSMiB"], r["controllerPeakRSSMiB"], r["controllerHWMMiB"]))
	row("Controller heap in use", fmt.Sprintf("%.1f MiB", r["controllerHeapMiB"]))
	row("Controller goroutines", fmt.Sprintf("%.0f", r["goroutines"]))
	row("Controller evaluations/s", fmt.Sprintf("%.0f", r["evaluationsPerSecond"]))
	row("Node writes in the window", fmt.Sprintf("%.0f", r["nodeWritesInWindow"]))
	if r["silenced"] > 0 {
		row("Detection beyond the expiry instant, p50 / p99 (max), after the window", fmt.Sprintf("%.0f ms / %.0f ms (%.0f ms), %.0f of %.0f tainted",
			r["detectionP50Ms"], r["detectionP99Ms"], r["detectionMaxMs"], r["detected"], r["silenced"]))
	}
	row("Replay server + renewer CPU (this process)", fmt.Sprintf("%.0f%%", r["replayServerCPUPercent"]))
	row("Watches closed for falling behind (in the window) / requests not served", fmt.Sprintf("%.0f (%.0f) / %.0f", r["watchesDropped"], r["watchesDroppedInWindow"], r["requestsNotServed"]))
	row("Load average at the end of the window", load)
	fmt.Fprintf(&b, "\nWindow %s after %s of settling; Leases of %s renewed every %s.\n", c.window, c.settle, c.leaseDuration, c.renewInterval)
	if len(c.controllerEnv) > 0 {
		fmt.Fprintf(&b, "Controller environment: %s.\n", strings.Join(c.controllerEnv, " "))
	}
	return b.String()
}

type detection struct {
	silenced, detected int
	p50, p99, max      time.Duration
}

// measureDetection stops renewing one extension's Lease on c.silence nodes
// spread over the fleet (extension s % extensions on the s-th), as a crash
// would, while every other Lease keeps renewing, and measures when the
// server received each node's readiness taint against its expiry instant:
// the last renewTime + leaseDuration + renewalGrace.
func measureDetection(ctx context.Context, s *server, keys []string, c config, exited <-chan error) (detection, error) {
	if c.silence <= 0 {
		return detection{}, nil
	}
	n := min(c.silence, c.nodes)
	victims := map[string]string{} // Lease key -> node
	var silenced []string
	for i := range n {
		ni := i * c.nodes / n
		key := keys[(i%c.extensions)*c.nodes+ni]
		victims[key] = fmt.Sprintf("replay-node-%05d", ni)
		silenced = append(silenced, key)
	}
	last := s.silence(silenced)
	expiry := map[string]time.Time{}
	var lastExpiry time.Time
	for key, node := range victims {
		expiry[node] = last[key].Add(c.leaseDuration + c.renewalGrace)
		if expiry[node].After(lastExpiry) {
			lastExpiry = expiry[node]
		}
	}
	logf("stopped one extension on %d nodes; the last expires in %s", n, time.Until(lastExpiry).Round(time.Second))
	deadline := time.After(time.Until(lastExpiry) + time.Minute)
	for done := false; !done; {
		done = true
		for _, node := range victims {
			if s.taintedAt(node).IsZero() {
				done = false
				break
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return detection{}, ctx.Err()
		case err := <-exited:
			return detection{}, fmt.Errorf("the controller exited: %v", err)
		case <-deadline:
			done = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	var delays []time.Duration
	for _, node := range victims {
		if at := s.taintedAt(node); !at.IsZero() {
			delays = append(delays, at.Sub(expiry[node]))
		}
	}
	d := detection{silenced: n, detected: len(delays), p50: measure.Percentile(delays, 50),
		p99: measure.Percentile(delays, 99), max: measure.Percentile(delays, 100)}
	logf("detected %d/%d: p50 %s, p99 %s beyond expiry", d.detected, n, d.p50, d.p99)
	return d, nil
}

// populate fills the server with Nodes as kwok registers them — already carrying the
// extension list the controller's rules ask for — and one held, freshly renewed Lease
// per extension per node, shaped as extension-heartbeat writes it (labels, an
// ownerReference to the Node, the managedFields entry kube-apiserver records). It
// returns the Lease keys in renewal order.
func populate(s *server, c config) []string {
	now := metav1.NowMicro()
	var list []nodev1alpha1.SystemExtension
	for e := range c.extensions {
		list = append(list, nodev1alpha1.SystemExtension{Name: extensionName(e)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	nodeUIDs := make([]types.UID, c.nodes)
	for i := range c.nodes {
		name := fmt.Sprintf("replay-node-%05d", i)
		annotation, err := nodev1alpha1.EncodeSystemExtensions(list, name, leaseNamespace)
		if err != nil {
			panic(err)
		}
		n := framework.NewKwokNode(name, nil)
		n.UID = uuid.NewUUID()
		n.CreationTimestamp = metav1.Now()
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: annotation}
		n.Status.NodeInfo.BootID = string(uuid.NewUUID())
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
		n.Status.Allocatable = n.Status.Capacity
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		nodeUIDs[i] = n.UID
		s.put("nodes", watch.Added, n)
	}
	for e := range c.extensions {
		for i := range c.nodes {
			node := fmt.Sprintf("replay-node-%05d", i)
			name := extensionName(e) + "." + node
			fields := fmt.Sprintf(`{"f:metadata":{"f:labels":{".":{},"f:%s":{},"f:%s":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"%s\"}":{}}},"f:spec":{"f:acquireTime":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:leaseTransitions":{},"f:renewTime":{}}}`,
				nodev1alpha1.ExtensionLabel, nodev1alpha1.NodeLabel, nodeUIDs[i])
			t := metav1.NewTime(now.Time)
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: leaseNamespace, UID: uuid.NewUUID(), CreationTimestamp: metav1.Now(),
					Labels:          nodev1alpha1.LeaseLabels(extensionName(e), node),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUIDs[i]}},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "extension-heartbeat", Operation: metav1.ManagedFieldsOperationUpdate,
						APIVersion: "coordination.k8s.io/v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To(extensionName(e) + "-" + string(uuid.NewUUID())[:5]),
					LeaseDurationSeconds: ptr.To(int32(c.leaseDuration.Seconds())),
					AcquireTime:          &now,
					RenewTime:            &now,
					LeaseTransitions:     ptr.To(int32(0)),
				},
			}
			s.put("leases", watch.Added, l)
			keys = append(keys, leaseNamespace+"/"+name)
		}
	}
	// The start-up objects are not history a watch resumes from.
	s.history = nil
	return keys
}

// renewLoop renews Lease i of M at start + k·interval + i·interval/M, every 10 ms
// sending what fell due.
func renewLoop(ctx context.Context, s *server, keys []string, interval time.Duration) {
	start := time.Now()
	next := 0 // index into the endless sequence of renewals
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	m := len(keys)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			due := int(float64(now.Sub(start)) / float64(interval) * float64(m))
			t := metav1.NewMicroTime(now)
			for ; next < due; next++ {
				s.renew(keys[next%m], t)
			}
		}
	}
}

func writeKubeconfig(path, server string, cert *x509.Certificate) error {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	ca64 := encodeBase64(ca)
	return os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: replay
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: replay
  user:
    token: replay
contexts:
- name: replay
  context: {cluster: replay, user: replay}
current-context: replay
`, server, ca64)), 0o600)
}

func writeControllerConfig(path, kubeconfig string, ports []int, c config) error {
	var rules strings.Builder
	for e := range c.extensions {
		fmt.Fprintf(&rules, "- name: %s\n  nodeSelector: {}\n", extensionName(e))
	}
	qps := ""
	if c.qps > 0 {
		qps = fmt.Sprintf("  qps: %d\n  burst: %d\n", c.qps, 2*c.qps)
	}
	return os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: %s
clientConnection:
  kubeconfig: %s
%sdebugging:
  enableProfiling: true
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
leaseNamespace: %s
# Evict, the default when these figures were first measured (escalation is
# opt-in now): the controller keeps its eviction clocks and workers.
eviction:
  mode: Evict
extensionRules:
%s`, controllerNamespace, kubeconfig, qps, ports[0], ports[1], leaseNamespace, rules.String())), 0o644)
}

// saveProfiles fetches the controller's CPU profile over most of the window, then its
// heap profile (the benchmark turns pprof on, on the metrics port; it is off by default).
func saveProfiles(ctx context.Context, metricsURL, dir string, window time.Duration) {
	base := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	for _, p := range []struct{ path, file string }{
		{fmt.Sprintf("profile?seconds=%d", max(1, int((window-10*time.Second).Seconds()))), "cpu.pprof"},
		{"heap?gc=1", "heap.pprof"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p.path, nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			logf("profile: %v", err)
			return
		}
		f, err := os.Create(filepath.Join(dir, p.file))
		if err == nil {
			_, _ = io.Copy(f, resp.Body)
			f.Close()
		}
		resp.Body.Close()
	}
}

func load1(loadAvg string) float64 {
	f := strings.Fields(loadAvg)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
