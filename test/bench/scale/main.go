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
// plane and takes 3-5 minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	flag.StringVar(&c.profileDir, "profile-dir", "", "write the controller's CPU profile (over the steady window) and heap profile (at its end) here, per node count")
	flag.StringVar(&c.resultsPath, "results", "docs/benchmarks/data/scale.json", "write machine-readable results here (test/bench/results); empty: none")
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
