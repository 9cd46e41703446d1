package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/options/optionstest"
	"nodehealth.io/nodehealth/pkg/probe"
	"nodehealth.io/nodehealth/pkg/process"
)

func runCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return optionstest.Run(NewCommand, args...)
}

// --write-config-to - prints a complete file that the binary accepts
// unchanged, and writing it again gives identical bytes.
func TestWriteConfigToRoundTrip(t *testing.T) {
	first, stderr, code := runCommand(t, "--write-config-to", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The defaults lack the two required fields (extensionName, probe); the
	// file is written anyway, as a starting point, with a note.
	if !strings.HasPrefix(stderr, "note: ") || !strings.Contains(stderr, "extensionName: Required value") {
		t.Errorf("want a note naming the missing fields, got %q", stderr)
	}
	if !strings.Contains(first, "kind: ExtensionHeartbeatConfiguration") || !strings.Contains(first, "apiVersion: config.nodehealth.io/v1alpha1") {
		t.Fatalf("not a v1alpha1 file:\n%s", first)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	second, stderr, code := runCommand(t, "--config", path, "--write-config-to", "-")
	if code != 0 || !strings.HasPrefix(stderr, "note: ") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if second != first {
		t.Errorf("re-written configuration differs:\n%s\n---\n%s", first, second)
	}

	// The complete example starts as is (no note), with a node name.
	if _, stderr, code := runCommand(t, "--config", "../../../deploy/config/extension-heartbeat.yaml", "--write-config-to", "-"); code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The example file is accepted as well, and writing to a file works.
	out := filepath.Join(t.TempDir(), "out.yaml")
	if _, stderr, code := runCommand(t, "--config", "../../../deploy/config/extension-heartbeat.yaml", "--write-config-to", out); code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestBadConfigExitsWithOneLine(t *testing.T) {
	optionstest.BadInputExitsWithOneLine(t, NewCommand, "ExtensionHeartbeatConfiguration")
}

// A renew interval longer than a quarter of the lease duration is refused
// before anything starts, in one line naming both values: the node-health
// controller assumes every renewer renews at least every duration/4.
func TestRenewIntervalOverAQuarterOfTheDurationRefused(t *testing.T) {
	example, err := os.ReadFile("../../../deploy/config/extension-heartbeat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	config := strings.Replace(string(example), "renewInterval: 10s", "renewInterval: 11s", 1)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCommand(t, "--config", path, "--node-name", "n1")
	if code == 0 {
		t.Fatal("exit 0")
	}
	if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("want one line starting with \"error: \", got %q", stderr)
	}
	for _, want := range []string{"lease.renewInterval", `"11s"`, "quarter of duration (40s / 4 = 10s)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("error %q does not say %s", stderr, want)
		}
	}
}

func TestHelpListsOnlyOwnFlags(t *testing.T) {
	stdout, _, code := runCommand(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--config", "--write-config-to", "--kubeconfig", "--node-name", "--feature-gates", "ConfigFileWatch=true|false", "-v, --v"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	// Flags that libraries register globally must not leak in.
	for _, unwanted := range []string{"--log-dir", "--alsologtostderr", "--add-dir-header", "--leader-elect", "--dry-run"} {
		if strings.Contains(stdout, unwanted) {
			t.Errorf("--help shows %q", unwanted)
		}
	}
}

func TestNodeNameRequired(t *testing.T) {
	t.Setenv(NodeNameEnv, "")
	_, stderr, code := runCommand(t, "--config", "../../../deploy/config/extension-heartbeat.yaml", "--healthz-bind-address=127.0.0.1:1", "--metrics-bind-address=127.0.0.1:1")
	if code == 0 || !strings.Contains(stderr, "--node-name or the NODE_NAME environment variable") {
		t.Errorf("exit %d: %q", code, stderr)
	}
}

// SIGTERM releases the Lease; a restart for a changed configuration file
// does not (docs/heartbeat.md), and neither does any other end of the run.
func TestSIGTERMReleasesTheLeaseAndARestartForANewConfigurationDoesNot(t *testing.T) {
	if release, reason, msg := ReleaseOnExit(process.ErrTerminated); !release || reason != "Terminating" || msg == "" {
		t.Errorf("SIGTERM: release=%v reason=%q message=%q", release, reason, msg)
	}
	if release, _, _ := ReleaseOnExit(fmt.Errorf("wrapped: %w", process.ErrTerminated)); !release {
		t.Error("a wrapped ErrTerminated did not release")
	}
	for _, cause := range []error{process.ErrConfigChanged, nil, context.Canceled} {
		if release, _, _ := ReleaseOnExit(cause); release {
			t.Errorf("%v released the Lease", cause)
		}
	}
}

// Every field of every probe kind reaches the probe package.
func TestEveryFieldOfEveryProbeKindReachesTheProbePackage(t *testing.T) {
	for name, tc := range map[string]struct {
		in   config.ProbeConfiguration
		want probe.Spec
	}{
		"https": {
			in:   config.ProbeConfiguration{HTTP: &config.HTTPProbe{URL: "https://127.0.0.1:9443/healthz", CAFile: "/ca.pem", InsecureSkipTLSVerify: true}},
			want: probe.Spec{HTTP: &probe.HTTPOptions{URL: "https://127.0.0.1:9443/healthz", CAFile: "/ca.pem", InsecureSkipTLSVerify: true}},
		},
		"tcp": {
			in:   config.ProbeConfiguration{TCP: &config.TCPProbe{Address: "127.0.0.1:9099"}},
			want: probe.Spec{TCP: &probe.TCPOptions{Address: "127.0.0.1:9099"}},
		},
		"grpc": {
			in:   config.ProbeConfiguration{GRPC: &config.GRPCProbe{Address: "127.0.0.1:9808", Service: "csi"}},
			want: probe.Spec{GRPC: &probe.GRPCOptions{Address: "127.0.0.1:9808", Service: "csi"}},
		},
		"file": {
			in:   config.ProbeConfiguration{File: &config.FileProbe{Path: "/run/plugin/alive", MaxAge: metav1.Duration{Duration: 2 * time.Minute}}},
			want: probe.Spec{File: &probe.FileOptions{Path: "/run/plugin/alive", MaxAge: 2 * time.Minute}},
		},
		"none": {},
	} {
		if diff := cmp.Diff(tc.want, ProbeSpec(tc.in)); diff != "" {
			t.Errorf("%s: -want +got:\n%s", name, diff)
		}
	}
}

func TestVersionPrintsAndExits(t *testing.T) {
	optionstest.VersionPrintsAndExits(t, NewCommand, "extension-heartbeat")
}
