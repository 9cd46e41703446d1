// Command footprint measures what the per-node processes cost a node, side by
// side in one run on the real local control plane of test/framework: the
// extension-heartbeat sidecar with each probe type (http, https, tcp, grpc,
// file) at production defaults (renew every 10 s, Lease 40 s, probe every
// 10 s), and two reference Lease renewers the benchmark builds itself — one
// on client-go's full clientset (refclientset), one on a REST client with a
// scheme of coordination/v1 only (refrest) — so that every figure can be read
// as a ratio on the same machine; and a third, libclientset, which embeds
// nodehealth.io/heartbeat in a process that has the full clientset (what the
// library adds to such an extension). Every binary is built with the release
// flags of `make release-build`: extension-heartbeat without the grpc probe
// and extension-heartbeat-grpc beside it, which the grpc subject's
// extension-heartbeat executes in its place.
//
// For each process it prints the binary size, VmRSS (and its file-backed and
// anonymous parts) after --settle and at the end of --duration, and the CPU
// used between the two, per second and per renewal. docs/benchmarks.md
// records the results. Run it from the repository root after
// `make controlplane`:
//
//	go run ./test/bench/footprint --duration=10m --results=docs/benchmarks/data/footprint.json
//
// or `make bench-footprint`. --results writes the figures as JSON (package
// test/bench/results, benchmark "footprint"): one Point per process, in the
// order the Notes list, Nodes 0.
package main

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/bench/internal/measure"
	"nodehealth.io/nodehealth/test/bench/results"
	"nodehealth.io/nodehealth/test/framework"
)

const nodeName = "bench-node"

// releaseFlags are those of `make release-build`; extension-heartbeat is
// built lean too (leanBuild), and in full as extension-heartbeat-grpc.
var releaseFlags = []string{"-trimpath", "-ldflags=-s -w"}

// leanBuild reads the lean extension-heartbeat's build tags and go build
// -gcflags arguments from hack/heartbeat-lean.conf, the file the Makefile and
// hack/images build it from. The subject "(http, inlined)" is the same build
// with inlining, to show what the gcflags save and cost.
func leanBuild(root string) (tags string, gcflags []string, err error) {
	path := filepath.Join(root, "hack", "heartbeat-lean.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "tags="); ok {
			tags = v
		}
		if v, ok := strings.CutPrefix(line, "gcflags="); ok {
			for _, f := range strings.Fields(v) {
				gcflags = append(gcflags, "-gcflags="+f)
			}
		}
	}
	if tags == "" {
		return "", nil, fmt.Errorf("%s: no tags= line", path)
	}
	return tags, gcflags, nil
}

const releaseTags = "grpcnotrace"

func main() {
	duration := flag.Duration("duration", 10*time.Minute, "how long every process runs after --settle")
	settle := flag.Duration("settle", 30*time.Second, "time after start before the first sample")
	interval := flag.Duration("interval", 10*time.Second, "renew interval (and probe period) of every process")
	keep := flag.Bool("keep", false, "keep the control plane's directory (logs)")
	resultsFile := flag.String("results", "", "also write the figures as JSON (package test/bench/results) to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *duration, *settle, *interval, *keep, *resultsFile); err != nil {
		fmt.Fprintf(os.Stderr, "footprint: %v\n", err)
		os.Exit(1)
	}
}

// subject is one measured process.
type subject struct {
	name   string
	binary string
	size   string // the executable whose size is reported (after any exec)
	args   []string
	env    []string
	proc   *framework.Process

	start, end sample
}

type sample struct {
	at                   time.Time
	rss, rssFile, rssAno int64 // KiB
	pss                  int64 // KiB; shared pages divided among their users
	cpuTicks             int64 // utime+stime, in USER_HZ (100/s on Linux)
}

func run(ctx context.Context, duration, settle, interval time.Duration, keep bool, resultsFile string) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	leanTags, leanGCFlags, err := leanBuild(root)
	if err != nil {
		return err
	}
	bins := map[string]string{}
	for _, b := range []struct {
		name, pkg, tags string
		gcflags         []string
	}{
		{"extension-heartbeat", "./cmd/extension-heartbeat", releaseTags + "," + leanTags, leanGCFlags},
		{"extension-heartbeat-grpc", "./cmd/extension-heartbeat", releaseTags, nil},
		{"refclientset", "./test/bench/footprint/refclientset", releaseTags, nil},
		{"refrest", "./test/bench/footprint/refrest", releaseTags, nil},
		{"libclientset", "./test/bench/footprint/libclientset", releaseTags, nil},
		{"inlined/extension-heartbeat", "./cmd/extension-heartbeat", releaseTags + "," + leanTags, nil},
		{"update-agent", "./cmd/update-agent", releaseTags, nil},
	} {
		name, pkg := b.name, b.pkg
		bins[name] = filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(bins[name]), 0o755); err != nil {
			return err
		}
		args := append(append([]string{"build", "-tags=" + b.tags}, releaseFlags...), b.gcflags...)
		cmd := exec.CommandContext(ctx, "go", append(args, "-o", bins[name], pkg)...)
		cmd.Dir, cmd.Env, cmd.Stderr = root, append(os.Environ(), "CGO_ENABLED=0"), os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
	}

	opts := []framework.Option{framework.WithoutControllerManager(), framework.WithoutScheduler(), framework.WithoutKwok()}
	if keep {
		opts = append(opts, framework.WithKeepArtifacts())
	}
	env, err := framework.Start(ctx, opts...)
	if err != nil {
		return err
	}
	defer env.Stop()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodev1alpha1.DefaultLeaseNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := env.CreateNode(ctx, nodeName, nil); err != nil {
		return err
	}

	probes, err := startProbeTargets(ctx, work)
	if err != nil {
		return err
	}
	ports, err := framework.FreeLoopbackPorts(2*(len(probes)+2) + 1)
	if err != nil {
		return err
	}
	// heartbeat writes the configuration of one extension-heartbeat subject
	// (its own extension name, Lease and ports) and returns the subject.
	heartbeat := func(name, suffix, binary, size string, metricsPort, healthzPort int, probe string) (*subject, error) {
		cfg := filepath.Join(work, "heartbeat-"+suffix+".yaml")
		data := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
extensionName: bench-%s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
lease:
  renewInterval: %s
probe:
  period: %s
%s`, suffix, metricsPort, healthzPort, interval, interval, probe)
		if err := os.WriteFile(cfg, []byte(data), 0o600); err != nil {
			return nil, err
		}
		return &subject{
			name:   name,
			binary: binary,
			size:   size,
			args:   []string{"--config=" + cfg, "--kubeconfig=" + env.Kubeconfig},
			env:    []string{"NODE_NAME=" + nodeName, "POD_NAME=bench-" + suffix},
		}, nil
	}
	var subjects []*subject
	for i, p := range probes {
		// The grpc subject starts extension-heartbeat like the others; it
		// executes extension-heartbeat-grpc in its place, whose size counts.
		size := bins["extension-heartbeat"]
		if p.kind == "grpc" {
			size = bins["extension-heartbeat-grpc"]
		}
		s, err := heartbeat("extension-heartbeat ("+p.kind+")", p.kind, bins["extension-heartbeat"], size, ports[2*i], ports[2*i+1], p.config)
		if err != nil {
			return err
		}
		subjects = append(subjects, s)
	}
	// The http subject again, built with inlining, with the same probe target.
	for _, p := range probes {
		if p.kind != "http" {
			continue
		}
		inlined := bins["inlined/extension-heartbeat"]
		s, err := heartbeat("extension-heartbeat (http, inlined)", "http-inlined", inlined, inlined, ports[2*len(probes)], ports[2*len(probes)+1], p.config)
		if err != nil {
			return err
		}
		subjects = append(subjects, s)
		// And the full build (every probe, profiling; what the grpc
		// subject executes) on its own, to show what the lean build saves.
		full := bins["extension-heartbeat-grpc"]
		if s, err = heartbeat("extension-heartbeat (http), full build", "http-full", full, full, ports[2*len(probes)+2], ports[2*len(probes)+3], p.config); err != nil {
			return err
		}
		subjects = append(subjects, s)
	}
	agent, err := updateAgentSubject(ctx, env, work, bins["update-agent"], ports[len(ports)-1], interval)
	if err != nil {
		return err
	}
	defer agent.emulator.Close()
	subjects = append(subjects, agent.subject)
	for _, ref := range []string{"refclientset", "refrest"} {
		subjects = append(subjects, &subject{
			name:   ref + " (reference)",
			binary: bins[ref],
			size:   bins[ref],
			args:   []string{"--kubeconfig=" + env.Kubeconfig, "--interval=" + interval.String(), "--name=" + ref + "." + nodeName},
		})
	}
	subjects = append(subjects, &subject{
		name:   "libclientset (refclientset + the library)",
		binary: bins["libclientset"],
		size:   bins["libclientset"],
		args:   []string{"--kubeconfig=" + env.Kubeconfig, "--interval=" + interval.String(), "--node=" + nodeName},
	})

	for i, s := range subjects {
		s.proc, err = env.StartProcess(framework.ProcessSpec{Name: fmt.Sprintf("subject-%d", i), Path: s.binary, Args: s.args, Env: s.env})
		if err != nil {
			return fmt.Errorf("starting %s: %w", s.name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "footprint: %d processes started; first sample in %s, last after %s more\n", len(subjects), settle, duration)
	loadStart := measure.LoadAverage()
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	for _, s := range subjects {
		if s.start, err = sampleOf(s); err != nil {
			return err
		}
	}
	if err := sleep(ctx, duration); err != nil {
		return err
	}
	for _, s := range subjects {
		if s.end, err = sampleOf(s); err != nil {
			return err
		}
	}
	loadEnd := measure.LoadAverage()
	printTable(os.Stdout, subjects, interval)
	fmt.Printf("Load averages (1, 5, 15 min) at the first sample: %s; at the last: %s.\n", loadStart, loadEnd)
	if resultsFile == "" {
		return nil
	}
	doc := results.New("footprint", time.Now())
	var names []string
	for _, s := range subjects {
		names = append(names, s.name)
		doc.Points = append(doc.Points, s.point(interval))
	}
	doc.Notes = fmt.Sprintf("One point per process, in this order: %s. Release builds; renew interval and probe period %s, lease 40s; "+
		"rssStartMiB after %s, rssAfterMiB %s later (rssFileMiB + rssAnonMiB, pssMiB at the end); cpuPercent of one core between the two samples. "+
		"Load averages (1, 5, 15 min) at the first sample %s, at the last %s (the machine was shared with other work).",
		strings.Join(names, "; "), interval, settle, duration, loadStart, loadEnd)
	if err := doc.Write(resultsFile); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "footprint: wrote %s\n", resultsFile)
	return nil
}

// point is s's figures for the results document.
func (s *subject) point(interval time.Duration) results.Point {
	mib := func(kib int64) float64 { return math.Round(float64(kib)/1024*10) / 10 }
	var size int64
	if st, err := os.Stat(s.size); err == nil {
		size = st.Size()
	}
	elapsed := s.end.at.Sub(s.start.at)
	cpu := time.Duration(s.end.cpuTicks-s.start.cpuTicks) * 10 * time.Millisecond
	return results.Point{Label: s.name, Metrics: map[string]float64{
		"binaryMB":        math.Round(float64(size)/1e5) / 10,
		"rssStartMiB":     mib(s.start.rss),
		"rssAfterMiB":     mib(s.end.rss),
		"rssFileMiB":      mib(s.end.rssFile),
		"rssAnonMiB":      mib(s.end.rssAno),
		"pssMiB":          mib(s.end.pss),
		"cpuPercent":      math.Round(100*cpu.Seconds()/elapsed.Seconds()*1000) / 1000,
		"cpuMsPerRenewal": math.Round(float64(cpu.Milliseconds())/(float64(elapsed)/float64(interval))*10) / 10,
	}}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func sampleOf(s *subject) (sample, error) {
	if exited, err := s.proc.Exited(); exited {
		return sample{}, fmt.Errorf("%s exited (%v): %s", s.name, err, s.proc.LogTail(20))
	}
	pid := s.proc.Pid()
	smp := sample{at: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return smp, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			smp.rss = v
		case "RssFile:":
			smp.rssFile = v
		case "RssAnon:":
			smp.rssAno = v
		}
	}
	rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return smp, err
	}
	for _, line := range strings.Split(string(rollup), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			smp.pss, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return smp, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are fields 14 and 15 of the whole line.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseInt(rest[11], 10, 64)
	stime, _ := strconv.ParseInt(rest[12], 10, 64)
	smp.cpuTicks = utime + stime
	return smp, nil
}

func printTable(w io.Writer, subjects []*subject, interval time.Duration) {
	mib := func(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
	var refREST int64
	for _, s := range subjects {
		if strings.HasPrefix(s.name, "refrest") {
			refREST = s.end.rss
		}
	}
	fmt.Fprintln(w, "| process | binary MB | RSS after start MiB | RSS at end MiB (file + anon) | ÷ refrest | PSS at end MiB | CPU % of a core | CPU ms per renewal |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range subjects {
		st, _ := os.Stat(s.size)
		elapsed := s.end.at.Sub(s.start.at)
		cpu := time.Duration(s.end.cpuTicks-s.start.cpuTicks) * 10 * time.Millisecond
		renewals := float64(elapsed) / float64(interval)
		ratio := "–"
		if refREST > 0 {
			ratio = fmt.Sprintf("%.2f", float64(s.end.rss)/float64(refREST))
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %s (%s + %s) | %s | %s | %.3f | %.1f |\n", s.name, float64(st.Size())/1e6,
			mib(s.start.rss), mib(s.end.rss), mib(s.end.rssFile), mib(s.end.rssAno), ratio, mib(s.end.pss),
			100*cpu.Seconds()/elapsed.Seconds(), float64(cpu.Milliseconds())/renewals)
	}
	fmt.Fprintf(w, "\nPSS divides the pages of the one extension-heartbeat binary among the sidecars running it, as the kernel shares them.\n")
	fmt.Fprintf(w, "CPU is utime+stime from /proc/<pid>/stat (10 ms ticks) over %s; renewals are counted as elapsed ÷ %s.\n",
		subjects[0].end.at.Sub(subjects[0].start.at).Round(time.Second), interval)
}

// probeTarget is something for one sidecar to probe, and the probe section of
// its configuration.
type probeTarget struct {
	kind, config string
}

// startProbeTargets serves one healthy target per probe type; they live until
// ctx ends.
func startProbeTargets(ctx context.Context, dir string) ([]probeTarget, error) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	plain := httptest.NewServer(ok)
	secure := httptest.NewTLSServer(ok)
	caFile := filepath.Join(dir, "ca.pem")
	// httptest's certificate is its own CA, valid for 127.0.0.1.
	cert := secure.Certificate()
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		return nil, err
	}

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()

	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(grpcLis) }()

	file := filepath.Join(dir, "alive")
	touch := func() error { return os.WriteFile(file, nil, 0o600) }
	if err := touch(); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = touch()
			}
		}
	}()
	go func() {
		<-ctx.Done()
		plain.Close()
		secure.Close()
		_ = tcp.Close()
		srv.Stop()
	}()

	return []probeTarget{
		{"http", "  http:\n    url: " + plain.URL + "/healthz\n"},
		{"https", "  http:\n    url: " + secure.URL + "/healthz\n    caFile: " + caFile + "\n"},
		{"tcp", "  tcp:\n    address: " + tcp.Addr().String() + "\n"},
		{"grpc", "  grpc:\n    address: " + grpcLis.Addr().String() + "\n"},
		{"file", "  file:\n    path: " + file + "\n    maxAge: 1m\n"},
	}, nil
}

// agentSubject is the update agent and the emulated Bottlerocket API it talks to.
type agentSubject struct {
	subject  *subject
	emulator *emulator.Emulator
}

// updateAgentSubject prepares the update agent of nodeName as it idles on a
// node with no update offered: the shadow CRD installed, the node's
// Bottlerocket API emulated on a socket, the agent's shipped defaults except
// the update check, which runs every interval like the heartbeats' probes. It
// uses the admin kubeconfig: the pod-bound token of deploy/update-agent needs
// a pod, and the token does not change what the process holds in memory.
func updateAgentSubject(ctx context.Context, env *framework.Environment, work, binary string, port int, interval time.Duration) (*agentSubject, error) {
	if err := env.InstallCRDs(ctx); err != nil {
		return nil, err
	}
	socket := filepath.Join(work, "api.sock")
	em, err := emulator.New(emulator.Config{SocketPath: socket, StateFile: filepath.Join(work, "api-state.json"), Version: "1.20.0"})
	if err != nil {
		return nil, err
	}
	if err := em.Start(); err != nil {
		em.Close()
		return nil, err
	}
	cfg := filepath.Join(work, "update-agent.yaml")
	data := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateAgentConfiguration
clientConnection:
  kubeconfig: %s
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
apiSocketPath: %s
updateCheckInterval: %s
`, env.Kubeconfig, port, port, socket, interval)
	if err := os.WriteFile(cfg, []byte(data), 0o600); err != nil {
		em.Close()
		return nil, err
	}
	return &agentSubject{
		subject: &subject{
			name:   "update-agent (idle, no update offered)",
			binary: binary,
			size:   binary,
			args:   []string{"--config=" + cfg, "--node-name=" + nodeName},
			env:    []string{"POD_NAME=update-agent-" + nodeName},
		},
		emulator: em,
	}, nil
}
