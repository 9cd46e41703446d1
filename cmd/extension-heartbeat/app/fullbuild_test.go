package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The release build without the grpc probe and profiling runs the full build
// in its place when the configuration names a grpc probe or enables
// profiling, and says clearly when the full build is missing. Builds both
// binaries, so it does not run with -short.
func TestLeanBuildExecutesFullBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	lean := filepath.Join(dir, "extension-heartbeat")
	build := func(out string, tags ...string) {
		t.Helper()
		args := []string{"build", "-o", out}
		if len(tags) > 0 {
			args = append(args, "-tags="+strings.Join(tags, ","))
		}
		cmd := exec.CommandContext(ctx, "go", append(args, "nodehealth.io/nodehealth/cmd/extension-heartbeat")...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", tags, err, b)
		}
	}
	build(lean, "nogrpcprobe", "noprofiling")

	// An API server nobody listens on: the process only has to start.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	config := filepath.Join(dir, "heartbeat.yaml")
	write(t, config, fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
extensionName: csi
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
probe:
  grpc:
    address: 127.0.0.1:9808
`, freePort(t), freePort(t)))
	logFile := filepath.Join(dir, "log")
	start := func(config string) *exec.Cmd {
		t.Helper()
		log, err := os.Create(logFile)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = log.Close() })
		cmd := exec.CommandContext(ctx, lean, "--config="+config, "--kubeconfig="+kubeconfig, "--node-name=n1")
		cmd.Stdout, cmd.Stderr = log, log
		return cmd
	}
	output := func() string {
		t.Helper()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if err := start(config).Run(); err == nil {
		t.Fatalf("started a grpc probe without the full build:\n%s", output())
	}
	if want := "the grpc probe is not in this build of extension-heartbeat (nogrpcprobe and noprofiling build tags), and the full build " + filepath.Join(dir, FullBuildName) + " it runs for it is missing"; !strings.Contains(output(), want) {
		t.Errorf("output does not say %q:\n%s", want, output())
	}

	build(filepath.Join(dir, FullBuildName))
	// runFull starts the lean build with config, waits until the log says
	// started, and checks that the full build runs in its place.
	runFull := func(config, started, needs string, check func()) {
		t.Helper()
		cmd := start(config)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		defer func() { _ = cmd.Process.Kill(); <-exited }()
		for !strings.Contains(output(), started) {
			select {
			case <-exited:
				t.Fatalf("exited before logging %s:\n%s", started, output())
			case <-ctx.Done():
				t.Fatalf("the full build did not log %s:\n%s", started, output())
			case <-time.After(100 * time.Millisecond):
			}
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(exe) != FullBuildName {
			t.Errorf("process %d runs %s, want %s in its place", cmd.Process.Pid, exe, FullBuildName)
		}
		if want := `needs="` + needs + `"`; !strings.Contains(output(), "executing it in this process's place") || !strings.Contains(output(), want) {
			t.Errorf("the lean build did not log the hand-over (%s):\n%s", want, output())
		}
		if check != nil {
			check()
		}
	}
	runFull(config, `probe="grpc 127.0.0.1:9808"`, "the grpc probe", nil)

	// Profiling: served by the full build in the lean one's place.
	metricsPort := freePort(t)
	profiling := filepath.Join(dir, "profiling.yaml")
	write(t, profiling, fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
extensionName: kube-proxy
serving:
  metricsBindAddress: 127.0.0.1:%d
  healthzBindAddress: 127.0.0.1:%d
debugging:
  enableProfiling: true
probe:
  tcp:
    address: 127.0.0.1:1
`, metricsPort, freePort(t)))
	runFull(profiling, `address="127.0.0.1:`+fmt.Sprint(metricsPort)+`"`, "profiling (debugging.enableProfiling)", func() {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/cmdline", metricsPort))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /debug/pprof/cmdline: %s, want 200 from the full build", resp.Status)
		}
	})
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
