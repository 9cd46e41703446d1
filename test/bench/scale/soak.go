package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nodehealth.io/nodehealth/test/bench/internal/measure"
	"nodehealth.io/nodehealth/test/bench/results"
)

// soakConfig is the soak mode of the benchmark (--soak): one node count for a long
// time, a share of the extensions flapping, sampled at an interval.
type soakConfig struct {
	duration  time.Duration
	flapShare float64
	// flapPeriod: each flapping extension releases its Lease for flapDown once
	// per period, staggered over the period.
	flapPeriod, flapDown time.Duration
	sample               time.Duration
	out                  string
}

// soakResult summarises a soak run.
type soakResult struct {
	nodes, leases, flapping                 int
	flaps                                   int
	stableWrites, flappingWrites            int
	flappingTransitions, stableTransitions  int
	rssFirstMiB, rssLastMiB, rssMaxMiB      float64
	heapFirstMiB, heapLastMiB               float64
	goroutinesMin, goroutinesMax            float64
	goroutinesFirst, goroutinesLast         float64
	cpuPercent                              float64
	achievedRate, targetRate                float64
	loadAvg                                 string
	renewalFailures                         int64
	samples                                 []results.Sample
	flapFailures                            int
	ctrlExited                              bool
	elapsed                                 time.Duration
	exit                                    string
	evaluationsPerSecond, rechecksPerSecond float64
}

// runSoak holds nodeCount nodes at steady state for s.duration while flapShare of the
// extension Leases (each on a different node) release and retake their Lease, and
// samples the controller's memory, goroutines and Node writes. Writes on nodes with no
// flapping extension must stay zero; memory and goroutines must stay flat.
func runSoak(ctx context.Context, c config, s soakConfig, nodeCount int, controllerBin string) (*soakResult, error) {
	b, stop, err := setUp(ctx, c, nodeCount, controllerBin)
	defer stop()
	if err != nil {
		return nil, err
	}
	// The flapping Leases: spread over the fleet and the extensions, one per node.
	k := max(1, int(math.Round(float64(b.leases)*s.flapShare)))
	k = min(k, nodeCount)
	flapNode := map[string]bool{}
	var flapLease []int
	for i := range k {
		ni := i * nodeCount / k
		e := i % c.extensions
		flapLease = append(flapLease, e*nodeCount+ni)
		flapNode[b.nodes[ni]] = true
	}
	r := &soakResult{nodes: nodeCount, leases: b.leases, flapping: k, targetRate: float64(b.leases) / c.renewInterval.Seconds()}
	stable := func(n string) bool { return !flapNode[n] }
	flapping := func(n string) bool { return flapNode[n] }
	stableW0, stableT0 := b.watch.ownWritesWhere(stable)
	flapW0, flapT0 := b.watch.ownWritesWhere(flapping)
	logf("soak: %s with %d of %d extension Leases flapping (released %s of every %s), sampled every %s",
		s.duration, k, b.leases, s.flapDown, s.flapPeriod, s.sample)

	// The flapper: Lease i releases at start + i·period/k (mod period), retakes flapDown later.
	flapCtx, stopFlap := context.WithCancel(ctx)
	defer stopFlap()
	flapErrs := make(chan error, 1024)
	flapCount := make(chan int, 1)
	start := time.Now()
	go func() {
		n := 0
		defer func() { flapCount <- n }()
		type action struct {
			at      time.Time
			lease   int
			release bool
		}
		for cycle := 0; ; cycle++ {
			var actions []action
			base := start.Add(time.Duration(cycle) * s.flapPeriod)
			for i, l := range flapLease {
				at := base.Add(time.Duration(i) * s.flapPeriod / time.Duration(k))
				actions = append(actions, action{at, l, true}, action{at.Add(s.flapDown), l, false})
			}
			sortActions := func() {
				for i := 1; i < len(actions); i++ {
					for j := i; j > 0 && actions[j].at.Before(actions[j-1].at); j-- {
						actions[j], actions[j-1] = actions[j-1], actions[j]
					}
				}
			}
			sortActions()
			for _, a := range actions {
				select {
				case <-flapCtx.Done():
					// Leave every flapping Lease held.
					for _, l := range flapLease {
						_ = b.gen.setReleased(context.Background(), l, false)
					}
					return
				case <-time.After(time.Until(a.at)):
				}
				if err := b.gen.setReleased(flapCtx, a.lease, a.release); err != nil && flapCtx.Err() == nil {
					select {
					case flapErrs <- err:
					default:
					}
				}
				if a.release {
					n++
				}
			}
		}
	}()

	m0, err := measure.Scrape(ctx, b.metricsURL)
	if err != nil {
		return nil, err
	}
	p0 := measure.ReadProc(b.proc.Pid())
	renewals0, failures0 := b.gen.renewals.Load(), b.gen.failures.Load()
	prev := p0
	prevAt := time.Now()
	tick := time.NewTicker(s.sample)
	defer tick.Stop()
	end := start.Add(s.duration)
	var rss, gor []float64
	var heap []float64
	var exitErr error
sampling:
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if exited, err := b.proc.Exited(); exited {
			// Keep what was sampled: a soak that ends early still shows the trend
			// up to its end, and why it ended.
			r.ctrlExited = true
			exitErr = fmt.Errorf("the controller exited after %s (%v): %s", time.Since(start).Round(time.Second), err, b.proc.LogTail(5))
			break sampling
		}
		now := time.Now()
		st := measure.ReadProc(b.proc.Pid())
		m, err := measure.Scrape(ctx, b.metricsURL)
		if err != nil {
			logf("soak: scrape: %v", err)
			continue
		}
		sw, _ := b.watch.ownWritesWhere(stable)
		fw, ft := b.watch.ownWritesWhere(flapping)
		cpu := 100 * (st.CPU - prev.CPU).Seconds() / now.Sub(prevAt).Seconds()
		prev, prevAt = st, now
		sample := results.Sample{Seconds: now.Sub(start).Seconds(), Values: []float64{
			float64(st.RSS) / (1 << 20), m.Sum("go_goroutines"), float64(sw - stableW0),
			float64(fw - flapW0), float64(ft - flapT0), m.Sum("go_memstats_heap_inuse_bytes") / (1 << 20), cpu,
		}}
		r.samples = append(r.samples, sample)
		rss = append(rss, sample.Values[0])
		gor = append(gor, sample.Values[1])
		heap = append(heap, sample.Values[5])
		logf("soak %s: RSS %.1f MiB, heap %.1f MiB, %.0f goroutines, %.0f writes on stable nodes, %.0f on flapping nodes (%.0f taint transitions), CPU %.1f%%",
			now.Sub(start).Round(time.Second), sample.Values[0], sample.Values[5], sample.Values[1], sample.Values[2], sample.Values[3], sample.Values[4], cpu)
	}
	elapsed := time.Since(start)
	stopFlap()
	r.flaps = <-flapCount
	close(flapErrs)
	for range flapErrs {
		r.flapFailures++
	}
	if r.ctrlExited {
		// Up to the last sample.
		r.cpuPercent = 100 * (prev.CPU - p0.CPU).Seconds() / prevAt.Sub(start).Seconds()
	} else {
		p1 := measure.ReadProc(b.proc.Pid())
		m1, err := measure.Scrape(ctx, b.metricsURL)
		if err != nil {
			return nil, err
		}
		r.cpuPercent = 100 * (p1.CPU - p0.CPU).Seconds() / elapsed.Seconds()
		r.evaluationsPerSecond = (m1.Sum("nodehealth_evaluations_total") - m0.Sum("nodehealth_evaluations_total")) / elapsed.Seconds()
		r.rechecksPerSecond = (m1.Sum("nodehealth_timer_rechecks_total") - m0.Sum("nodehealth_timer_rechecks_total")) / elapsed.Seconds()
	}
	r.achievedRate = float64(b.gen.renewals.Load()-renewals0) / elapsed.Seconds()
	r.renewalFailures = b.gen.failures.Load() - failures0
	r.loadAvg = measure.LoadAverage()
	sw, st := b.watch.ownWritesWhere(stable)
	fw, ft := b.watch.ownWritesWhere(flapping)
	r.stableWrites, r.stableTransitions = sw-stableW0, st-stableT0
	r.flappingWrites, r.flappingTransitions = fw-flapW0, ft-flapT0
	if len(rss) == 0 {
		return r, exitErr
	}
	// First and last fifth of the run: is anything growing?
	fifth := max(1, len(rss)/5)
	r.rssFirstMiB, r.rssLastMiB = mean(rss[:fifth]), mean(rss[len(rss)-fifth:])
	r.heapFirstMiB, r.heapLastMiB = mean(heap[:fifth]), mean(heap[len(heap)-fifth:])
	r.goroutinesFirst, r.goroutinesLast = mean(gor[:fifth]), mean(gor[len(gor)-fifth:])
	r.rssMaxMiB, r.goroutinesMin, r.goroutinesMax = maxOf(rss), minOf(gor), maxOf(gor)
	r.elapsed = elapsed
	if exitErr != nil {
		r.exit = exitErr.Error()
	}
	return r, exitErr
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

var soakColumns = []string{"rssMiB", "goroutines", "nodeWrites", "flappingNodeWrites", "flappingTaintTransitions", "heapMiB", "controllerCPUPercent"}

func (r *soakResult) markdown(c config, s soakConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Soak: %d nodes × %d extensions, %s | |\n|---|---:|\n", r.nodes, c.extensions, s.duration)
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("Flapping extension Leases (one per node)", fmt.Sprintf("%d of %d (%.1f%%), released %s of every %s", r.flapping, r.leases, 100*float64(r.flapping)/float64(r.leases), s.flapDown, s.flapPeriod))
	row("Releases played (failed writes)", fmt.Sprintf("%d (%d)", r.flaps, r.flapFailures))
	row("Renewals/s: target / achieved (failed renewals)", fmt.Sprintf("%.0f / %.0f (%d)", r.targetRate, r.achievedRate, r.renewalFailures))
	row("Node writes of nodehealth's fields on the other nodes", fmt.Sprintf("**%d** (taint transitions %d)", r.stableWrites, r.stableTransitions))
	row("… on the flapping nodes (taint transitions)", fmt.Sprintf("%d (%d)", r.flappingWrites, r.flappingTransitions))
	row("Controller RSS: first fifth / last fifth / max", fmt.Sprintf("%.1f / %.1f / %.1f MiB", r.rssFirstMiB, r.rssLastMiB, r.rssMaxMiB))
	row("Controller heap in use: first fifth / last fifth", fmt.Sprintf("%.1f / %.1f MiB", r.heapFirstMiB, r.heapLastMiB))
	row("Goroutines: first fifth / last fifth (min–max)", fmt.Sprintf("%.0f / %.0f (%.0f–%.0f)", r.goroutinesFirst, r.goroutinesLast, r.goroutinesMin, r.goroutinesMax))
	row("Controller CPU over the run", fmt.Sprintf("%.1f%% of a core", r.cpuPercent))
	row("Evaluations/s; timer rechecks/s", fmt.Sprintf("%.1f; %.1f", r.evaluationsPerSecond, r.rechecksPerSecond))
	row("Load average at the end", r.loadAvg)
	if r.exit != "" {
		row("Ended early", fmt.Sprintf("after %s: %s", r.elapsed.Round(time.Second), strings.SplitN(r.exit, "\n", 2)[0]))
	}
	return b.String()
}

func writeSoakResults(root string, c config, s soakConfig, r *soakResult) error {
	doc := results.New("soak", time.Now())
	doc.Notes = fmt.Sprintf("%d nodes x %d extensions on the local control plane (kwok), %d of %d extension Leases flapping (released %s of every %s); sampled every %s; load average at the end %s",
		r.nodes, c.extensions, r.flapping, r.leases, s.flapDown, s.flapPeriod, s.sample, r.loadAvg)
	if r.exit != "" {
		doc.Notes += fmt.Sprintf("; ENDED EARLY after %s: %s", r.elapsed.Round(time.Second), strings.SplitN(r.exit, "\n", 2)[0])
	}
	doc.Points = []results.Point{{Nodes: r.nodes, Extensions: c.extensions, Metrics: map[string]float64{
		"stableNodeWrites": float64(r.stableWrites), "flappingNodeWrites": float64(r.flappingWrites),
		"flappingTaintTransitions": float64(r.flappingTransitions), "flaps": float64(r.flaps),
		"rssFirstMiB": r.rssFirstMiB, "rssLastMiB": r.rssLastMiB, "rssMaxMiB": r.rssMaxMiB,
		"heapFirstMiB": r.heapFirstMiB, "heapLastMiB": r.heapLastMiB,
		"goroutinesFirst": r.goroutinesFirst, "goroutinesLast": r.goroutinesLast,
		"controllerCPUPercent": r.cpuPercent, "renewalsPerSecond": r.achievedRate,
		"evaluationsPerSecond": r.evaluationsPerSecond, "timerRechecksPerSecond": r.rechecksPerSecond,
	}}}
	doc.Series = []results.Series{{Name: "soak", Nodes: r.nodes, Columns: soakColumns, Samples: r.samples}}
	path := s.out
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if err := doc.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}
