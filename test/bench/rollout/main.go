// Command rollout benchmarks the update operator (docs/updater.md) on the real local
// control plane of test/framework: kwok simulates N nodes labelled for the
// updater and listing the bottlerocket-updater extension, the real
// update-operator binary (built by this program) runs as a process with
// maxConcurrentUpdates 10 % and a short postRebootSoak, and the agents' side
// and the node-health side are played in-process (hundreds of agent processes
// do not fit a small machine), with instant updates. For each node count it
// measures the total rollout time, the delay from one node's healthy end to
// the next node leaving Idle, and the operator's CPU and memory, and prints a
// markdown table. docs/benchmarks.md records the results.
//
// Run it from the repository root after `make controlplane`:
//
//	go run ./test/bench/rollout --nodes=100,500
//
// or `make bench-rollout BENCH_NODES=100,500`. Each node count runs on a fresh
// control plane. --results writes the figures and each run's progress over
// time (nodes updated, in progress and idle) as a results document
// (test/bench/results) for the plots of docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/bench/internal/measure"
	"nodehealth.io/nodehealth/test/bench/results"
	"nodehealth.io/nodehealth/test/framework"
)

const (
	oldVersion        = "1.19.0"
	newVersion        = "1.20.0"
	operatorNamespace = "nodehealth-system"
	interfaceLabel    = "bottlerocket.aws/updater-interface-version"
)

type config struct {
	nodes       []int
	concurrency string
	soak        time.Duration
	agentWork   int
	timeout     time.Duration
	keep        bool
	qps         int
	// sampleEvery is how often the rollout's progress is sampled for
	// --results.
	sampleEvery time.Duration
}

type result struct {
	nodes, limit     int
	total            time.Duration // operator start → every node updated
	rollout          time.Duration // first start → last healthy end
	starts, maxSeen  int
	twice            int
	freeP50, freeP99 time.Duration // healthy end (status Idle) → next start
	freeMax          time.Duration
	gateP50, gateP99 time.Duration // operator's gate decision (spec Idle) → next start
	pairs            int
	opMeanDelay      float64 // the operator's own next_start_delay_seconds mean
	cpuSeconds       float64
	cpuShare         float64
	rss, hwm         int64
	agentErrors      int64
	loadAvg          string
	// progress is the rollout over time, from the operator's start.
	progress []results.Sample
}

// progressColumns name the values of each progress sample: nodes on the new
// version, nodes counted toward maxConcurrentUpdates, and the rest.
var progressColumns = []string{"updated", "inProgress", "idle"}

func main() {
	var c config
	nodes := flag.String("nodes", "100,500", "comma-separated node counts; each runs on a fresh control plane")
	flag.StringVar(&c.concurrency, "max-concurrent", "10%", "maxConcurrentUpdates of the UpdatePolicy")
	flag.DurationVar(&c.soak, "soak", time.Second, "postRebootSoak of the UpdatePolicy")
	flag.IntVar(&c.agentWork, "agent-workers", 16, "concurrent workers of the in-process agents")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "give up on a rollout after this long")
	flag.IntVar(&c.qps, "operator-qps", 0, "clientConnection.qps of the operator, burst twice that (0: the operator's default, 20 and 40)")
	flag.BoolVar(&c.keep, "keep", false, "keep each run's control-plane directory (logs)")
	flag.DurationVar(&c.sampleEvery, "sample-every", time.Second, "how often the rollout's progress is sampled for --results")
	resultsPath := flag.String("results", "", "if set, write the figures and each run's progress over time to this JSON file (test/bench/results format, e.g. docs/benchmarks/data/rollout.json)")
	flag.Parse()
	if c.sampleEvery <= 0 {
		fmt.Fprintf(os.Stderr, "rollout: --sample-every must be positive\n")
		os.Exit(2)
	}
	for _, s := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "rollout: bad --nodes value %q\n", s)
			os.Exit(2)
		}
		c.nodes = append(c.nodes, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	bin, cleanup, err := buildOperator(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rollout: %v\n", err)
		os.Exit(1)
	}
	defer cleanup()

	var rs []*result
	for _, n := range c.nodes {
		logf("=== %d nodes, maxConcurrentUpdates %s, postRebootSoak %s", n, c.concurrency, c.soak)
		r, err := runRollout(ctx, c, n, bin)
		if r != nil {
			rs = append(rs, r)
			fmt.Println()
			fmt.Println(markdown(c, rs))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rollout: %d nodes: %v\n", n, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(rs) == 0 {
		os.Exit(1)
	}
	if *resultsPath != "" {
		if err := document(c, rs, time.Now()).Write(*resultsPath); err != nil {
			fmt.Fprintf(os.Stderr, "rollout: %v\n", err)
			os.Exit(1)
		}
		logf("wrote %s", *resultsPath)
	}
}

// document is the machine-readable form of the runs: one point of figures
// and one progress series per node count.
func document(c config, rs []*result, now time.Time) *results.Document {
	d := results.New("rollout", now)
	qps := "operator qps default (20, burst 40)"
	if c.qps > 0 {
		qps = fmt.Sprintf("operator qps %d, burst %d", c.qps, 2*c.qps)
	}
	var loads []string
	for _, r := range rs {
		loads = append(loads, fmt.Sprintf("%d nodes: %s", r.nodes, r.loadAvg))
		d.Points = append(d.Points, results.Point{Nodes: r.nodes, Metrics: map[string]float64{
			"totalSeconds":            r.total.Seconds(),
			"rolloutSeconds":          r.rollout.Seconds(),
			"limit":                   float64(r.limit),
			"maxUpdating":             float64(r.maxSeen),
			"nextStartP50Ms":          float64(r.freeP50.Milliseconds()),
			"nextStartP99Ms":          float64(r.freeP99.Milliseconds()),
			"operatorCPUPercent":      100 * r.cpuShare,
			"operatorCPUSeconds":      r.cpuSeconds,
			"operatorRSSMiB":          float64(r.rss) / (1 << 20),
			"operatorPeakRSSMiB":      float64(r.hwm) / (1 << 20),
			"agentErrors":             float64(r.agentErrors),
			"nodesStartedTwice":       float64(r.twice),
			"operatorNextStartMeanMs": r.opMeanDelay * 1000,
		}})
		d.Series = append(d.Series, results.Series{
			Name: fmt.Sprintf("rollout of %d nodes", r.nodes), Nodes: r.nodes,
			Columns: progressColumns, Samples: r.progress,
		})
	}
	d.Notes = fmt.Sprintf("maxConcurrentUpdates %s, postRebootSoak %s, instant updates, agents in-process (%d workers), %s; progress sampled every %s from the operator's start; load average (1/5/15 min) at the end of each run: %s",
		c.concurrency, c.soak, c.agentWork, qps, c.sampleEvery, strings.Join(loads, "; "))
	return d
}

// buildOperator builds cmd/update-operator into a temporary directory, so the
// figures are always of the checked-out code.
func buildOperator(ctx context.Context) (string, func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "bench-rollout-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "update-operator")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/update-operator")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building the update operator: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

func runRollout(ctx context.Context, c config, nodeCount int, bin string) (*result, error) {
	opts := []framework.Option{framework.WithCRDs(), framework.WithoutScheduler(), framework.WithLogf(logf)}
	if c.keep {
		opts = append(opts, framework.WithKeepArtifacts())
	}
	env, err := framework.Start(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.UserAgent = "nodehealth-bench-rollout"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	shadows, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}

	// Nodes: kwok-simulated, managed by the updater, fully ready.
	names := make([]string, nodeCount)
	started := time.Now()
	err = measure.Parallel(ctx, nodeCount, 16, func(i int) error {
		names[i] = fmt.Sprintf("bench-node-%04d", i)
		n := framework.NewKwokNode(names[i], map[string]string{interfaceLabel: "2.0.0"})
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"bottlerocket-updater","source":"lease"}]`
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return err
		}
		return setReady(ctx, client, names[i], true)
	})
	if err != nil {
		return nil, fmt.Errorf("creating nodes: %w", err)
	}
	// kwok initialises each node's status after it appears; make sure the
	// condition survived that before the operator looks.
	if err := measure.WaitUntil(ctx, 2*time.Minute, nil, func() bool {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ok := 0
		for i := range list.Items {
			n := &list.Items[i]
			kwokReady, ours := false, false
			for _, c := range n.Status.Conditions {
				kwokReady = kwokReady || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
				ours = ours || (c.Type == nodev1alpha1.SystemExtensionsReadyCondition && c.Status == corev1.ConditionTrue)
			}
			if kwokReady && !ours {
				_ = setReady(ctx, client, n.Name, true)
			}
			if kwokReady && ours {
				ok++
			}
		}
		return ok == nodeCount
	}); err != nil {
		return nil, fmt.Errorf("waiting for kwok to make the nodes ready: %w", err)
	}
	logf("created %d ready nodes in %s", nodeCount, time.Since(started).Round(100*time.Millisecond))

	agentCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	a, err := startAgents(agentCtx, shadows, client, c.agentWork)
	if err != nil {
		return nil, err
	}
	limit := limitOf(c.concurrency, nodeCount)
	tl, err := watchShadows(agentCtx, shadows, limit)
	if err != nil {
		return nil, err
	}

	// The rollout is an UpdatePolicy: every managed node, the benchmark's
	// concurrency and soak.
	pol := &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: updatesv1alpha1.UpdatePolicySpec{
		NodeSelector: &metav1.LabelSelector{}, MaxConcurrentUpdates: intstr.Parse(c.concurrency), PostRebootSoak: &metav1.Duration{Duration: c.soak}}}
	if _, err := shadows.UpdatesV1alpha1().UpdatePolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the UpdatePolicy: %w", err)
	}
	metricsURL, proc, err := startOperator(env, c, bin)
	if err != nil {
		return nil, err
	}
	opStart := time.Now()
	before := measure.ReadProc(proc.Pid())
	stopSampling := sampleProgress(ctx, tl, nodeCount, opStart, c.sampleEvery)
	err = measure.WaitUntil(ctx, c.timeout, proc, func() bool {
		_, _, done := tl.progress()
		return done == nodeCount
	})
	progress := stopSampling()
	if err != nil {
		s, rep, done := tl.progress()
		return nil, fmt.Errorf("%d shadows, %d reporting, %d updated: %w", s, rep, done, err)
	}
	total := time.Since(opStart)
	after := measure.ReadProc(proc.Pid())
	r := &result{nodes: nodeCount, total: total, loadAvg: measure.LoadAverage(), agentErrors: a.errors.Load(), rss: after.RSS, hwm: after.HWM, progress: progress}
	// The process had started before the first reading; its CPU before that is
	// only exec and runtime start, counted too.
	r.cpuSeconds = after.CPU.Seconds()
	r.cpuShare = (after.CPU - before.CPU).Seconds() / total.Seconds()

	tl.mu.Lock()
	r.starts, r.maxSeen = len(tl.starts), tl.maxUpdating
	for _, n := range tl.startsPer {
		if n > 1 {
			r.twice++
		}
	}
	r.limit = limit
	free, gate := tl.reaction, tl.gateReaction
	if s, e := sorted(tl.starts), sorted(tl.healthyEnds); len(s) > 0 && len(e) > 0 {
		r.rollout = e[len(e)-1].Sub(s[0])
	}
	tl.mu.Unlock()
	r.pairs = len(free)
	r.freeP50, r.freeP99, r.freeMax = measure.Percentile(free, 50), measure.Percentile(free, 99), measure.Percentile(free, 100)
	r.gateP50, r.gateP99 = measure.Percentile(gate, 50), measure.Percentile(gate, 99)
	if m, err := measure.Scrape(ctx, metricsURL); err == nil && m["update_operator_next_start_delay_seconds_count"] > 0 {
		r.opMeanDelay = m["update_operator_next_start_delay_seconds_sum"] / m["update_operator_next_start_delay_seconds_count"]
	}
	logf("%d nodes updated in %s (%d starts, at most %d updating, limit %d); healthy end → next start p50 %s p99 %s (n=%d); operator %.1f%% of a core, RSS %.1f MiB",
		nodeCount, total.Round(100*time.Millisecond), r.starts, r.maxSeen, r.limit, r.freeP50, r.freeP99, r.pairs, 100*r.cpuShare, float64(r.rss)/(1<<20))
	if exited, err := proc.Exited(); exited {
		return r, fmt.Errorf("the operator exited (%v): %s", err, proc.LogTail(20))
	}
	return r, nil
}

// limitOf is maxConcurrentUpdates scaled as docs/updater.md says: a
// percentage of the nodes the policy governs (here every managed node)
// rounded down, at least 1.
func limitOf(v string, nodes int) int {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, _ := strconv.Atoi(p)
		return max(1, n*nodes/100)
	}
	n, _ := strconv.Atoi(v)
	return max(1, n)
}

func startOperator(env *framework.Environment, c config, bin string) (string, *framework.Process, error) {
	ports, err := framework.FreeLoopbackPorts(2)
	if err != nil {
		return "", nil, err
	}
	cfg := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateOperatorConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: %s
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
managedNodeSelector:
  matchLabels:
    %s: "2.0.0"
`, operatorNamespace, env.Kubeconfig, ports[0], ports[1], interfaceLabel)
	if c.qps > 0 {
		cfg = strings.Replace(cfg, "  kubeconfig:", fmt.Sprintf("  qps: %d\n  burst: %d\n  kubeconfig:", c.qps, 2*c.qps), 1)
	}
	path := filepath.Join(env.Dir, "update-operator.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	p, err := env.StartProcess(framework.ProcessSpec{Name: "update-operator", Path: bin, Args: []string{"--config", path}})
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]), p, nil
}

func markdown(c config, rs []*result) string {
	var b strings.Builder
	row := measure.Columns(&b, rs, func(r *result) string { return fmt.Sprintf("%d nodes", r.nodes) })
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	mib := func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	row("maxConcurrentUpdates "+c.concurrency+" → limit", func(r *result) string { return fmt.Sprint(r.limit) })
	row("Most nodes counted as updating (watch)", func(r *result) string { return fmt.Sprint(r.maxSeen) })
	row("Starts / nodes started twice", func(r *result) string { return fmt.Sprintf("%d / %d", r.starts, r.twice) })
	row("Operator start → every node updated", func(r *result) string { return fmt.Sprintf("%.1f s", r.total.Seconds()) })
	row("First start → last healthy end", func(r *result) string { return fmt.Sprintf("%.1f s", r.rollout.Seconds()) })
	row("Healthy end (status back to Idle) → next node leaves Idle, p50 / p99 (max)", func(r *result) string {
		return fmt.Sprintf("%s / %s (%s), n=%d", ms(r.freeP50), ms(r.freeP99), ms(r.freeMax), r.pairs)
	})
	row("Operator's gate decision (spec back to Idle) → next node leaves Idle, p50 / p99", func(r *result) string {
		return ms(r.gateP50) + " / " + ms(r.gateP99)
	})
	row("Operator's next_start_delay_seconds, mean", func(r *result) string { return fmt.Sprintf("%d ms", int(r.opMeanDelay*1000)) })
	row("Operator CPU over the rollout (% of one core)", func(r *result) string { return fmt.Sprintf("%.1f%%", 100*r.cpuShare) })
	row("Operator CPU time in total", func(r *result) string { return fmt.Sprintf("%.1f s", r.cpuSeconds) })
	row("Operator RSS at the end (peak)", func(r *result) string { return mib(r.rss) + " (" + mib(r.hwm) + ")" })
	row("In-process agent errors (not conflicts)", func(r *result) string { return fmt.Sprint(r.agentErrors) })
	row("Load average at the end", func(r *result) string { return r.loadAvg })
	qps := "the default client rate limit (qps 20, burst 40)"
	if c.qps > 0 {
		qps = fmt.Sprintf("client rate limit qps %d, burst %d", c.qps, 2*c.qps)
	}
	fmt.Fprintf(&b, "\npostRebootSoak %s; instant updates; agents and node-health side in-process (%d workers); operator with %s.\n", c.soak, c.agentWork, qps)
	return b.String()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s rollout: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
