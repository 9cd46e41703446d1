package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/bench/internal/measure"
	"nodehealth.io/nodehealth/test/framework"
)

const (
	leaseNamespace      = nodev1alpha1.DefaultLeaseNamespace
	controllerNamespace = "nodehealth-system"
	taintKey            = nodev1alpha1.DefaultReadinessTaintKey
)

// extensionNames are the simulated extensions, in order; --extensions takes a prefix
// (more than five get numbered names).
var extensionNames = []string{"kube-proxy", "cni", "csi-node", "device-plugin", "log-agent"}

func extensionName(i int) string {
	if i < len(extensionNames) {
		return extensionNames[i]
	}
	return fmt.Sprintf("extension-%d", i)
}

// result is what one node count measured.
type result struct {
	nodes, leases int
	loadAvg       string

	targetRate, achievedRate float64
	renewalFailures          int64
	renewLatP50, renewLatP99 time.Duration
	lagP50, lagP99           time.Duration

	initialUngate time.Duration

	sample               int
	detected, ungated    int
	detectP50, detectP99 time.Duration
	detectMax            time.Duration
	ungateP50, ungateP99 time.Duration
	ungateMax            time.Duration
	// After the last renewal the controller waited for (every required extension
	// renewed after the gate began).
	ungateLastP50, ungateLastP99, ungateLastMax time.Duration
	ungateLastN                                 int
	ctrlDetectP50                               float64
	ctrlDetectP99                               float64
	ctrlUngateP50                               float64
	ctrlUngateP99                               float64
	ctrlDetectN, ctrlUngN                       float64
	steadyNodeWritesPerMin                      float64
	steadyOwnWritesPerMin                       float64
	steadyCtrlWrites                            float64
	evalsPerSec                                 float64

	ctrlCPU          float64 // share of one core over the steady window
	ctrlRSS, ctrlHWM int64
	cpuByProcess     map[string]float64
}

// bench is a running control plane with kwok nodes, renewed Leases and the controller,
// every node ungated and the controller's start-up writes drained.
type bench struct {
	env           *framework.Environment
	client        kubernetes.Interface
	nodes         []string
	leases        int
	gen           *loadGen
	watch         *nodeWatch
	proc          *framework.Process
	metricsURL    string
	initialUngate time.Duration
}

// setUp starts a bench of nodeCount nodes; stop (always returned) tears it down.
func setUp(ctx context.Context, c config, nodeCount int, controllerBin string) (b *bench, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	opts := []framework.Option{framework.WithoutScheduler(), framework.WithLogf(logf)}
	if c.keep {
		opts = append(opts, framework.WithKeepArtifacts())
	}
	env, err := framework.Start(ctx, opts...)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() {
		if err := env.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	})

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 10000, 20000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.UserAgent = "nodehealth-scale-loadgen"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, stop, err
	}
	for _, ns := range []string{leaseNamespace, controllerNamespace} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, stop, err
		}
	}

	// Nodes, registered with the readiness taint (kubelet registerWithTaints).
	nodes := make([]string, nodeCount)
	started := time.Now()
	err = measure.Parallel(ctx, nodeCount, 32, func(i int) error {
		nodes[i] = fmt.Sprintf("bench-node-%04d", i)
		n := framework.NewKwokNode(nodes[i], nil)
		n.Spec.Taints = []corev1.Taint{{Key: taintKey, Effect: corev1.TaintEffectNoSchedule}}
		_, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, stop, fmt.Errorf("creating nodes: %w", err)
	}
	logf("created %d nodes in %s", nodeCount, time.Since(started).Round(100*time.Millisecond))
	watch, err := startNodeWatch(ctx, client, taintKey)
	if err != nil {
		return nil, stop, err
	}

	// Leases and the load generator.
	var leaseNames []string
	for e := range c.extensions {
		for _, n := range nodes {
			leaseNames = append(leaseNames, extensionName(e)+"."+n)
		}
	}
	gen := newLoadGen(client, leaseNamespace, c.renewInterval, c.leaseDuration, c.workers)
	started = time.Now()
	if err := gen.create(ctx, leaseNames); err != nil {
		return nil, stop, err
	}
	logf("created %d leases in %s", len(leaseNames), time.Since(started).Round(100*time.Millisecond))
	genCtx, stopGen := context.WithCancel(ctx)
	stops = append(stops, stopGen)
	go gen.run(genCtx)

	// The controller.
	metricsURL, proc, err := startController(env, c, controllerBin)
	if err != nil {
		return nil, stop, err
	}
	ctrlStart := time.Now()
	if err := measure.WaitUntil(ctx, c.ungateTimeout, proc, func() bool {
		tainted, total := watch.counts()
		return total == nodeCount && tainted == 0
	}); err != nil {
		tainted, _ := watch.counts()
		return nil, stop, fmt.Errorf("waiting for every node to be ungated (%d still tainted): %w", tainted, err)
	}
	b = &bench{env: env, client: client, nodes: nodes, leases: len(leaseNames), gen: gen, watch: watch, proc: proc,
		metricsURL: metricsURL, initialUngate: time.Since(ctrlStart)}
	logf("controller ungated all %d nodes %s after it started", nodeCount, b.initialUngate.Round(100*time.Millisecond))

	// Let the start-up writes (conditions, boot records) drain: no write of
	// nodehealth's fields for 5s.
	_ = measure.WaitUntil(ctx, 2*time.Minute, proc, func() bool { return time.Since(watch.lastOwnWrite()) > 5*time.Second })
	return b, stop, nil
}

func runScale(ctx context.Context, c config, nodeCount int, controllerBin string) (*result, error) {
	b, stop, err := setUp(ctx, c, nodeCount, controllerBin)
	defer stop()
	if err != nil {
		return nil, err
	}
	env, nodes, gen, watch, proc, metricsURL := b.env, b.nodes, b.gen, b.watch, b.proc, b.metricsURL
	r := &result{nodes: nodeCount, leases: b.leases, targetRate: float64(b.leases) / c.renewInterval.Seconds(), initialUngate: b.initialUngate}

	// Steady state.
	logf("steady state for %s", c.steady)
	procs := env.Processes()
	before := map[string]measure.Proc{}
	for _, p := range procs {
		before[p.Name] = measure.ReadProc(p.Pid())
	}
	before["load generator (this process)"] = measure.ReadProc(os.Getpid())
	m0, err := measure.Scrape(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	renewals0, failures0 := gen.renewals.Load(), gen.failures.Load()
	gen.startMeasuring()
	windowStart := time.Now()
	profiled := make(chan struct{})
	if c.profileDir != "" {
		go func() {
			defer close(profiled)
			saveProfiles(ctx, metricsURL, c.profileDir, nodeCount, c.steady)
		}()
	} else {
		close(profiled)
	}
	select {
	case <-time.After(c.steady):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	window := time.Since(windowStart)
	<-profiled
	latencies, lags := gen.stopMeasuring()
	r.loadAvg = measure.LoadAverage()
	r.achievedRate = float64(gen.renewals.Load()-renewals0) / window.Seconds()
	r.renewalFailures = gen.failures.Load() - failures0
	r.renewLatP50, r.renewLatP99 = measure.Percentile(latencies, 50), measure.Percentile(latencies, 99)
	r.lagP50, r.lagP99 = measure.Percentile(lags, 50), measure.Percentile(lags, 99)
	r.cpuByProcess = map[string]float64{}
	after := map[string]measure.Proc{}
	for _, p := range procs {
		after[p.Name] = measure.ReadProc(p.Pid())
	}
	after["load generator (this process)"] = measure.ReadProc(os.Getpid())
	for name, b := range before {
		if a := after[name]; a.Valid && b.Valid {
			r.cpuByProcess[name] = (a.CPU - b.CPU).Seconds() / window.Seconds()
		}
	}
	r.ctrlCPU = r.cpuByProcess["nodehealth-controller"]
	m1, err := measure.Scrape(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	all, own := watch.writesBetween(windowStart, windowStart.Add(window))
	r.steadyNodeWritesPerMin = float64(all) / window.Minutes()
	r.steadyOwnWritesPerMin = float64(own) / window.Minutes()
	r.steadyCtrlWrites = (m1.Sum("nodehealth_taint_writes_total") + m1.Sum("nodehealth_condition_writes_total")) -
		(m0.Sum("nodehealth_taint_writes_total") + m0.Sum("nodehealth_condition_writes_total"))
	r.evalsPerSec = (m1.Sum("nodehealth_evaluations_total") - m0.Sum("nodehealth_evaluations_total")) / window.Seconds()
	logf("steady: %.0f/%.0f renewals/s, %.1f%% of a core for the controller, %.1f node writes/min",
		r.achievedRate, r.targetRate, 100*r.ctrlCPU, r.steadyNodeWritesPerMin)

	// Detection: one extension stops renewing (no release, like a crash) on a sample
	// of nodes, spread over the fleet.
	r.sample = max(1, int(math.Round(float64(nodeCount)*c.sampleShare)))
	type victim struct {
		node  string
		lease int
	}
	var victims []victim
	for s := range r.sample {
		ni := s * nodeCount / r.sample
		e := s % c.extensions
		victims = append(victims, victim{node: nodes[ni], lease: e*nodeCount + ni})
	}
	logf("stopping one extension on %d nodes", len(victims))
	for _, v := range victims {
		gen.stop(v.lease)
	}
	expiry := map[string]time.Time{}
	var lastExpiry time.Time
	for _, v := range victims {
		expiry[v.node] = gen.lastAck(v.lease).Add(c.leaseDuration + c.renewalGrace)
		if expiry[v.node].After(lastExpiry) {
			lastExpiry = expiry[v.node]
		}
	}
	_ = measure.WaitUntil(ctx, time.Until(lastExpiry)+time.Minute, proc, func() bool {
		for _, v := range victims {
			if !watch.isTainted(v.node) {
				return false
			}
		}
		return true
	})
	var detect []time.Duration
	for _, v := range victims {
		if at := watch.taintAdded(v.node); !at.IsZero() && watch.isTainted(v.node) {
			detect = append(detect, at.Sub(expiry[v.node]))
		}
	}
	r.detected = len(detect)
	r.detectP50, r.detectP99, r.detectMax = measure.Percentile(detect, 50), measure.Percentile(detect, 99), measure.Percentile(detect, 100)
	logf("detected %d/%d: p50 %s, p99 %s beyond expiry", r.detected, len(victims), r.detectP50, r.detectP99)

	// Ungate: the stopped extensions renew again.
	firstRenewal := map[string]time.Time{}
	for _, v := range victims {
		at, err := gen.resume(ctx, v.lease)
		if err != nil {
			return nil, err
		}
		firstRenewal[v.node] = at
	}
	_ = measure.WaitUntil(ctx, time.Minute, proc, func() bool {
		for _, v := range victims {
			if watch.isTainted(v.node) {
				return false
			}
		}
		return true
	})
	var ungate []time.Duration
	for _, v := range victims {
		if at := watch.taintRemoved(v.node); !watch.isTainted(v.node) && at.After(firstRenewal[v.node].Add(-time.Second)) {
			ungate = append(ungate, at.Sub(firstRenewal[v.node]))
		}
	}
	// The controller ungates once every required extension renewed after the gate
	// began (docs/controller.md), so the instant a node could be ungated is the latest of
	// those first renewals, not only the resumed one's. The gate began just before
	// the taint became visible; 50ms covers the patch and watch delivery.
	var ungateLast []time.Duration
	for _, v := range victims {
		if watch.isTainted(v.node) {
			continue
		}
		gateStart := watch.taintAdded(v.node).Add(-50 * time.Millisecond)
		ni := v.lease % nodeCount
		latest := firstRenewal[v.node]
		complete := true
		for e := range c.extensions {
			a := gen.firstAckAfter(e*nodeCount+ni, gateStart)
			if a.IsZero() {
				complete = false
				break
			}
			if a.After(latest) {
				latest = a
			}
		}
		if complete {
			ungateLast = append(ungateLast, watch.taintRemoved(v.node).Sub(latest))
		}
	}
	r.ungateLastP50, r.ungateLastP99, r.ungateLastMax = measure.Percentile(ungateLast, 50), measure.Percentile(ungateLast, 99), measure.Percentile(ungateLast, 100)
	r.ungateLastN = len(ungateLast)
	r.ungated = len(ungate)
	r.ungateP50, r.ungateP99, r.ungateMax = measure.Percentile(ungate, 50), measure.Percentile(ungate, 99), measure.Percentile(ungate, 100)
	logf("ungated %d/%d: p50 %s, p99 %s after the first renewal of the stopped extension; p50 %s, p99 %s after the last required renewal",
		r.ungated, len(victims), r.ungateP50, r.ungateP99, r.ungateLastP50, r.ungateLastP99)

	// The controller's own view of the same events.
	time.Sleep(time.Second)
	m2, err := measure.Scrape(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	dh := m2.Histogram("nodehealth_detection_latency_seconds", m1)
	uh := m2.Histogram("nodehealth_ungate_latency_seconds", m1)
	r.ctrlDetectP50, r.ctrlDetectP99 = measure.Quantile(0.5, dh), measure.Quantile(0.99, dh)
	r.ctrlUngateP50, r.ctrlUngateP99 = measure.Quantile(0.5, uh), measure.Quantile(0.99, uh)
	if len(dh) > 0 {
		r.ctrlDetectN = dh[len(dh)-1].Count
	}
	if len(uh) > 0 {
		r.ctrlUngN = uh[len(uh)-1].Count
	}
	st := measure.ReadProc(proc.Pid())
	r.ctrlRSS, r.ctrlHWM = st.RSS, st.HWM
	if exited, err := proc.Exited(); exited {
		return r, fmt.Errorf("the controller exited (%v): %s", err, proc.LogTail(20))
	}
	return r, nil
}

// startController writes the controller's configuration and starts the binary.
func startController(env *framework.Environment, c config, bin string) (string, *framework.Process, error) {
	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return "", nil, err
	}
	metricsPort, healthzPort := ports[0], ports[1]
	var rules strings.Builder
	for e := range c.extensions {
		fmt.Fprintf(&rules, "- name: %s\n  nodeSelector: {}\n", extensionName(e))
	}
	cfg := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: %s
clientConnection:
  kubeconfig: %s
debugging:
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
%srenewalGrace: %s
`, controllerNamespace, env.Kubeconfig, metricsPort, healthzPort, leaseNamespace, rules.String(), c.renewalGrace)
	path := filepath.Join(env.Dir, "nodehealth-controller.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	p, err := env.StartProcess(framework.ProcessSpec{Name: "nodehealth-controller", Path: bin, Args: []string{"--config", path}, Env: c.controllerEnv})
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort), p, nil
}

// markdown renders the results as one column per node count.
func markdown(c config, rs []*result) string {
	var b strings.Builder
	row := measure.Columns(&b, rs, func(r *result) string { return fmt.Sprintf("%d nodes", r.nodes) })
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	sec := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%d ms", int(math.Round(v*1000)))
	}
	mib := func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	row("Leases (nodes × extensions)", func(r *result) string { return fmt.Sprint(r.leases) })
	row("Renewals/s: target", func(r *result) string { return fmt.Sprintf("%.0f", r.targetRate) })
	row("Renewals/s: achieved", func(r *result) string {
		return fmt.Sprintf("%.0f (%.0f%%)", r.achievedRate, 100*r.achievedRate/r.targetRate)
	})
	row("Renewal round trip p50 / p99", func(r *result) string { return ms(r.renewLatP50) + " / " + ms(r.renewLatP99) })
	row("Renewal sent late vs schedule p50 / p99", func(r *result) string { return ms(r.lagP50) + " / " + ms(r.lagP99) })
	row("Failed renewals in the window", func(r *result) string { return fmt.Sprint(r.renewalFailures) })
	row("Controller start → all nodes ungated", func(r *result) string { return fmt.Sprintf("%.1f s", r.initialUngate.Seconds()) })
	row("Sample (one extension stops on N nodes)", func(r *result) string { return fmt.Sprint(r.sample) })
	row("Detection beyond expiry p50 / p99 (max), watch", func(r *result) string {
		return fmt.Sprintf("%s / %s (%s), %d/%d", ms(r.detectP50), ms(r.detectP99), ms(r.detectMax), r.detected, r.sample)
	})
	row("Ungate after the stopped extension's first renewal p50 / p99 (max), watch", func(r *result) string {
		return fmt.Sprintf("%s / %s (%s), %d/%d", ms(r.ungateP50), ms(r.ungateP99), ms(r.ungateMax), r.ungated, r.sample)
	})
	row("Ungate after the last required renewal p50 / p99 (max), watch", func(r *result) string {
		return fmt.Sprintf("%s / %s (%s), n=%d", ms(r.ungateLastP50), ms(r.ungateLastP99), ms(r.ungateLastMax), r.ungateLastN)
	})
	row("Controller's detection_latency p50 / p99", func(r *result) string {
		return fmt.Sprintf("%s / %s (n=%.0f)", sec(r.ctrlDetectP50), sec(r.ctrlDetectP99), r.ctrlDetectN)
	})
	row("Controller's ungate_latency p50 / p99", func(r *result) string {
		return fmt.Sprintf("%s / %s (n=%.0f)", sec(r.ctrlUngateP50), sec(r.ctrlUngateP99), r.ctrlUngN)
	})
	row("Node writes/min at steady state, nodehealth's fields / any (watch)", func(r *result) string {
		return fmt.Sprintf("%.1f / %.1f", r.steadyOwnWritesPerMin, r.steadyNodeWritesPerMin)
	})
	row("Controller writes in the steady window", func(r *result) string { return fmt.Sprintf("%.0f", r.steadyCtrlWrites) })
	row("Controller evaluations/s", func(r *result) string { return fmt.Sprintf("%.0f", r.evalsPerSec) })
	row("Controller CPU (% of one core)", func(r *result) string { return fmt.Sprintf("%.1f%%", 100*r.ctrlCPU) })
	row("Controller RSS (peak)", func(r *result) string { return mib(r.ctrlRSS) + " (" + mib(r.ctrlHWM) + ")" })
	var names []string
	seen := map[string]bool{}
	for _, r := range rs {
		for n := range r.cpuByProcess {
			if !seen[n] && n != "nodehealth-controller" {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		row("CPU: "+n, func(r *result) string {
			if v, ok := r.cpuByProcess[n]; ok {
				return fmt.Sprintf("%.0f%%", 100*v)
			}
			return "–"
		})
	}
	row("Load average at the end of the window", func(r *result) string { return r.loadAvg })
	fmt.Fprintf(&b, "\nLeases of %s renewed every %s; renewalGrace %s; steady window %s; %d load-generator workers.\n",
		c.leaseDuration, c.renewInterval, c.renewalGrace, c.steady, c.workers)
	if len(c.controllerEnv) > 0 {
		fmt.Fprintf(&b, "Controller environment: %s.\n", strings.Join(c.controllerEnv, " "))
	}
	return b.String()
}

// saveProfiles fetches the controller's CPU profile over most of the steady window and
// its heap profile at the end (the benchmark turns pprof on, on the metrics port; it is off by default).
func saveProfiles(ctx context.Context, metricsURL, dir string, nodes int, window time.Duration) {
	base := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/"
	secs := max(1, int((window - 5*time.Second).Seconds()))
	fetch := func(path, file string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			logf("profile %s: %v", path, err)
			return
		}
		defer resp.Body.Close()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
		logf("saved %s", filepath.Join(dir, file))
	}
	fetch(fmt.Sprintf("profile?seconds=%d", secs), fmt.Sprintf("cpu-%d.pprof", nodes))
	fetch("heap?gc=1", fmt.Sprintf("heap-%d.pprof", nodes))
	fetch("allocs", fmt.Sprintf("allocs-%d.pprof", nodes))
}
