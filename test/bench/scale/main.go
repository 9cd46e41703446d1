// Command scale benchmarks the node-health controller against the real local control
// plane of test/framework: kwok simulates N nodes, an in-process load generator renews
// 5 extension Leases per node every 10 s (Lease duration 40 s), and the real
// _output/bin/nodehealth-controller binary runs as a process. For each node count it
// measures the achieved renewal rate, detection and ungate latency, Node writes at
// steady state, the controller's CPU and memory, and the controller's own latency
// histograms, and prints a markdown table. docs/benchmarks.md records the results.
//
// Run it from the repository root after `make controlplane build`:
//
//	go run ./test/bench/scale --nodes=100,500,1000
//
// or `make bench-scale NODES=100,500,1000`. Each node count runs on a fresh control
// plane; docs/benchmarks.md says how long a run takes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nodehealth.io/nodehealth/test/bench/results"
	"nodehealth.io/nodehealth/test/framework"
)

type config struct {
	nodes         []int
	extensions    int
	renewInterval time.Duration
	leaseDuration time.Duration
	renewalGrace  time.Duration
	steady        time.Duration
	sampleShare   float64
	workers       int
	out           string
	keep          bool
	controllerEnv []string
	profileDir    string
	resultsPath   string
	ungateTimeout time.Duration
}

func main() {
	var c config
	nodes := flag.String("nodes", "100,500", "comma-separated node counts; each runs on a fresh control plane")
	flag.IntVar(&c.extensions, "extensions", 5, "extensions (Leases) per node")
	flag.DurationVar(&c.renewInterval, "renew-interval", 10*time.Second, "how often each Lease is renewed")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 40*time.Second, "spec.leaseDurationSeconds of every Lease")
	flag.DurationVar(&c.renewalGrace, "renewal-grace", 10*time.Second, "the controller's renewalGrace")
	flag.DurationVar(&c.steady, "steady", 60*time.Second, "length of the steady-state window")
	flag.Float64Var(&c.sampleShare, "sample", 0.1, "share of nodes on which one extension stops renewing (kept below the blast-radius threshold of 20%)")
	flag.IntVar(&c.workers, "workers", 64, "concurrent requests of the load generator")
	flag.StringVar(&c.out, "out", "", "also append the markdown results to this file")
	flag.BoolVar(&c.keep, "keep", false, "keep each run's control-plane directory (logs)")
	flag.DurationVar(&c.ungateTimeout, "ungate-timeout", 5*time.Minute, "how long the controller may take to ungate every node after it started (longer on a loaded machine)")
	flag.StringVar(&c.profileDir, "profile-dir", "", "write the controller's CPU profile (over the steady window) and heap profile (at its end) here, per node count")
	flag.StringVar(&c.resultsPath, "results", "docs/benchmarks/data/scale.json", "write machine-readable results here (test/bench/results); empty: none")
	var soak soakConfig
	flag.DurationVar(&soak.duration, "soak", 0, "soak mode: hold the (single) node count this long with --flap-share of the extensions flapping, and write --soak-out instead of the scale results")
	flag.Float64Var(&soak.flapShare, "flap-share", 0.01, "soak: share of the extension Leases that flap (one per node)")
	flag.DurationVar(&soak.flapPeriod, "flap-period", time.Minute, "soak: each flapping extension releases its Lease once per period")
	flag.DurationVar(&soak.flapDown, "flap-down", 20*time.Second, "soak: how long a flapping extension keeps its Lease released")
	flag.DurationVar(&soak.sample, "soak-sample", 30*time.Second, "soak: sampling interval")
	flag.StringVar(&soak.out, "soak-out", "docs/benchmarks/data/soak.json", "soak: machine-readable results")
	env := flag.String("controller-env", "", "comma-separated NAME=VALUE environment of the controller process, e.g. GOMEMLIMIT=48MiB")
	flag.Parse()
	for _, s := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "scale: bad --nodes value %q\n", s)
			os.Exit(2)
		}
		c.nodes = append(c.nodes, n)
	}

	if *env != "" {
		c.controllerEnv = strings.Split(*env, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(1)
	}
	controllerBin := filepath.Join(root, "_output", "bin", "nodehealth-controller")
	if _, err := os.Stat(controllerBin); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v (run `make build`)\n", err)
		os.Exit(1)
	}

	if soak.duration > 0 {
		if len(c.nodes) != 1 {
			fmt.Fprintln(os.Stderr, "scale: --soak takes one node count")
			os.Exit(2)
		}
		r, err := runSoak(ctx, c, soak, c.nodes[0], controllerBin)
		if r != nil && len(r.samples) > 0 {
			fmt.Println(r.markdown(c, soak))
			if soak.out != "" {
				if err := writeSoakResults(root, c, soak, r); err != nil {
					fmt.Fprintf(os.Stderr, "scale: %v\n", err)
				}
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "scale: soak: %v\n", err)
			os.Exit(1)
		}
		return
	}

	var results []*result
	for _, n := range c.nodes {
		logf("=== %d nodes x %d extensions, renewed every %s (target %.0f renewals/s)", n, c.extensions, c.renewInterval,
			float64(n*c.extensions)/c.renewInterval.Seconds())
		r, err := runScale(ctx, c, n, controllerBin)
		if r != nil {
			results = append(results, r)
			fmt.Println()
			fmt.Println(markdown(c, results))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "scale: %d nodes: %v\n", n, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(results) == 0 {
		os.Exit(1)
	}
	table := markdown(c, results)
	if c.resultsPath != "" {
		if err := writeResults(root, c, results); err != nil {
			fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		}
	}
	if c.out != "" {
		f, err := os.OpenFile(c.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "\n<!-- %s -->\n%s\n", time.Now().UTC().Format(time.RFC3339), table)
			f.Close()
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scale: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// writeResults stores one Point per node count in c.resultsPath, keeping the points of
// other node counts already in the file (each run measures one or a few sizes; each
// point records the load average it was taken under).
func writeResults(root string, c config, rs []*result) error {
	path := c.resultsPath
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	doc := results.New("scale", time.Now())
	if old, err := results.Read(path); err == nil {
		for _, p := range old.Points {
			if !slices.ContainsFunc(rs, func(r *result) bool { return r.nodes == p.Nodes && c.extensions == p.Extensions }) {
				doc.Points = append(doc.Points, p)
			}
		}
	}
	for _, r := range rs {
		load1, _ := strconv.ParseFloat(strings.Fields(r.loadAvg + " 0")[0], 64)
		m := map[string]float64{
			"detectionP50Ms": ms(r.detectP50), "detectionP99Ms": ms(r.detectP99),
			"ungateP50Ms": ms(r.ungateP50), "ungateP99Ms": ms(r.ungateP99),
			"ungateLastP99Ms":      ms(r.ungateLastP99),
			"controllerCPUPercent": 100 * r.ctrlCPU, "controllerRSSMiB": float64(r.ctrlRSS) / (1 << 20),
			"controllerPeakRSSMiB": float64(r.ctrlHWM) / (1 << 20),
			"apiserverCPUPercent":  100 * r.cpuByProcess["kube-apiserver"], "etcdCPUPercent": 100 * r.cpuByProcess["etcd"],
			"renewalsPerSecond": r.achievedRate, "targetRenewalsPerSecond": r.targetRate,
			"renewalP99Ms": ms(r.renewLatP99), "evaluationsPerSecond": r.evalsPerSec,
			"steadyNodeWritesPerMinute": r.steadyOwnWritesPerMin, "initialUngateSeconds": r.initialUngate.Seconds(),
			"loadAverage1m": load1,
		}
		doc.Points = append(doc.Points, results.Point{Nodes: r.nodes, Extensions: c.extensions, Metrics: m})
	}
	slices.SortFunc(doc.Points, func(a, b results.Point) int { return a.Nodes - b.Nodes })
	doc.Notes = fmt.Sprintf("Real control plane on loopback with kwok nodes, shared 2-core machine (loadAverage1m per point); Leases of %s renewed every %s; renewalGrace %s; steady window %s; controller env %q",
		c.leaseDuration, c.renewInterval, c.renewalGrace, c.steady, strings.Join(c.controllerEnv, " "))
	if err := doc.Write(path); err != nil {
		return err
	}
	logf("wrote %s", path)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
