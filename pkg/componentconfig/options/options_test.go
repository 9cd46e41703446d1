package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/features"
)

const controllerHeader = "apiVersion: config.nodehealth.io/v1alpha1\nkind: NodeHealthControllerConfiguration\n"

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseController(t *testing.T, args ...string) (*Options[*config.NodeHealthControllerConfiguration], *config.NodeHealthControllerConfiguration, error) {
	t.Helper()
	o, err := New(NodeHealthController())
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.Parse(args)
	if err != nil {
		return o, nil, err
	}
	return o, res.Config, nil
}

// TestAnExplicitFlagWinsOverTheFileAndAnUnsetFlagLeavesTheFilesValue checks, for each flag that mirrors a field, the three
// cases: value only in the file, flag set explicitly (wins), flag not set
// (the file's value, not the flag's default, stays).
func TestAnExplicitFlagWinsOverTheFileAndAnUnsetFlagLeavesTheFilesValue(t *testing.T) {
	file := controllerHeader + `clientConnection:
  kubeconfig: /from/file
leaderElection:
  leaderElect: false
  leaseDuration: 30s
serving:
  metricsBindAddress: 127.0.0.1:9000
logging:
  verbosity: 3
dryRun: true
`
	type check struct {
		name string
		get  func(*config.NodeHealthControllerConfiguration) any
		file any
		flag string
		want any
	}
	checks := []check{
		{"kubeconfig", func(c *config.NodeHealthControllerConfiguration) any { return c.ClientConnection.Kubeconfig }, "/from/file", "--kubeconfig=/from/flag", "/from/flag"},
		{"leader-elect", func(c *config.NodeHealthControllerConfiguration) any { return c.LeaderElection.LeaderElect }, false, "--leader-elect=true", true},
		{"leader-elect-lease-duration", func(c *config.NodeHealthControllerConfiguration) any { return c.LeaderElection.LeaseDuration.Duration }, 30 * time.Second, "--leader-elect-lease-duration=45s", 45 * time.Second},
		{"metrics-bind-address", func(c *config.NodeHealthControllerConfiguration) any { return c.Serving.MetricsBindAddress }, "127.0.0.1:9000", "--metrics-bind-address=127.0.0.1:9100", "127.0.0.1:9100"},
		{"v", func(c *config.NodeHealthControllerConfiguration) any { return int(c.Logging.Verbosity) }, 3, "-v=5", 5},
		{"dry-run", func(c *config.NodeHealthControllerConfiguration) any { return c.DryRun }, true, "--dry-run=false", false},
	}
	path := writeConfig(t, file)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			_, cfg, err := parseController(t, "--config", path)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.get(cfg); got != c.file {
				t.Errorf("flag not set: got %v, want the file's %v", got, c.file)
			}
			_, cfg, err = parseController(t, "--config", path, c.flag)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.get(cfg); got != c.want {
				t.Errorf("flag set: got %v, want the flag's %v", got, c.want)
			}
			// The flag given before --config wins just the same.
			_, cfg, err = parseController(t, c.flag, "--config", path)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.get(cfg); got != c.want {
				t.Errorf("flag before --config: got %v, want %v", got, c.want)
			}
		})
	}

	// Without --config, flags apply over the defaults.
	_, _, err := parseController(t, "--kubeconfig=/k", "--no-such-flag=1")
	if err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("unknown flag: got %v", err)
	}
	_, cfg, err := parseController(t, "--kubeconfig=/k")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientConnection.Kubeconfig != "/k" || cfg.Workers != 10 {
		t.Errorf("got kubeconfig %q workers %d", cfg.ClientConnection.Kubeconfig, cfg.Workers)
	}
}

func TestFeatureGatesMergePerKey(t *testing.T) {
	path := writeConfig(t, controllerHeader+"featureGates:\n  ConfigFileWatch: false\n  LoggingAlphaOptions: true\n")

	o, cfg, err := parseController(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if o.FeatureGate().Enabled(features.ConfigFileWatch) {
		t.Errorf("ConfigFileWatch enabled; the file disabled it")
	}
	if v, ok := cfg.FeatureGates["ConfigFileWatch"]; !ok || v {
		t.Errorf("featureGates = %v, want the file's ConfigFileWatch=false kept", cfg.FeatureGates)
	}

	o, cfg, err = parseController(t, "--config", path, "--feature-gates=ConfigFileWatch=true")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ConfigFileWatch": true, "LoggingAlphaOptions": true}
	if len(cfg.FeatureGates) != len(want) || cfg.FeatureGates["ConfigFileWatch"] != true || cfg.FeatureGates["LoggingAlphaOptions"] != true {
		t.Errorf("featureGates = %v, want %v (flag wins per key, other file keys stay)", cfg.FeatureGates, want)
	}
	if !o.FeatureGate().Enabled(features.ConfigFileWatch) || !o.FeatureGate().Enabled("LoggingAlphaOptions") {
		t.Errorf("gate not set from the merged map")
	}

	_, _, err = parseController(t, "--feature-gates=NoSuchGate=true")
	if err == nil || !strings.Contains(err.Error(), "NoSuchGate") {
		t.Errorf("unknown gate: got %v", err)
	}
}

func TestInstanceFlagsAreNotConfig(t *testing.T) {
	var node string
	o, err := NewWithInstanceFlags(ExtensionHeartbeat(), func(fs *pflag.FlagSet) {
		fs.StringVar(&node, "node-name", "", "")
	})
	if err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "apiVersion: config.nodehealth.io/v1alpha1\nkind: ExtensionHeartbeatConfiguration\nextensionName: x\n")
	if _, err := o.Parse([]string{"--node-name", "n1", "--config", path}); err != nil {
		t.Fatal(err)
	}
	if node != "n1" {
		t.Errorf("node = %q", node)
	}
}

func TestValidateNamesFieldPath(t *testing.T) {
	path := writeConfig(t, controllerHeader+"eviction:\n  mode: Sometimes\nblastRadius:\n  zoneThresholdPercent: 120\n")
	o, cfg, err := parseController(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Validate(cfg)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"config.yaml", `eviction.mode: Unsupported value: "Sometimes"`, "blastRadius.zoneThresholdPercent: Invalid value: 120"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not contain %q", err, want)
		}
	}
	// An override of mode Evict without the mode, as a file written when
	// Evict was the default would have it, is refused rather than never
	// evicting.
	path = writeConfig(t, controllerHeader+"eviction:\n  force: true\n")
	if o, cfg, err = parseController(t, "--config", path); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(cfg); err == nil || !strings.Contains(err.Error(), "eviction.force: Invalid value: true: only applies to mode Evict") {
		t.Errorf("force without mode Evict: got %v", err)
	}
	path = writeConfig(t, controllerHeader+"eviction:\n  mode: Evict\n  force: true\n  deleteEmptyDirData: true\n")
	if o, cfg, err = parseController(t, "--config", path); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(cfg); err != nil {
		t.Errorf("mode Evict with both overrides: %v", err)
	}
	// Logging is validated with the rest.
	_, cfg, err = parseController(t, "--logging-format=xml")
	if err == nil {
		err = o.Validate(cfg)
	}
	if err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("bad logging format: got %v", err)
	}
}

func TestAReloadSaysWhetherTheFileChangedAndNeverTouchesTheRunningConfiguration(t *testing.T) {
	path := writeConfig(t, controllerHeader+"workers: 3\n")
	args := []string{"--config", path, "--dry-run"}
	o, cfg, err := parseController(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		content     string
		wantChanged bool
		wantErr     string
	}{
		{"comment only", controllerHeader + "# a comment\nworkers: 3\n", false, ""},
		{"flag still wins", controllerHeader + "workers: 3\ndryRun: false\n", false, ""},
		{"changed", controllerHeader + "workers: 4\n", true, ""},
		{"invalid value", controllerHeader + "workers: -1\n", false, "workers"},
		{"typo", controllerHeader + "wrkers: 4\n", false, `unknown field "wrkers"`},
		{"empty", "", false, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := o.Reload([]byte(tc.content), args, cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
		})
	}
	// The running configuration was not touched.
	if cfg.Workers != 3 || !cfg.DryRun {
		t.Errorf("running configuration modified: %+v", cfg)
	}
}

func TestDeployExamplesLoadAndValidate(t *testing.T) {
	root := filepath.Join("..", "..", "..", "deploy", "config")
	check := func(name string, parse func(path string) error) {
		t.Run(name, func(t *testing.T) {
			if err := parse(filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		})
	}
	check("nodehealth-controller.yaml", func(path string) error { return parseAndValidate(NodeHealthController(), path) })
	check("extension-heartbeat.yaml", func(path string) error { return parseAndValidate(ExtensionHeartbeat(), path) })
	check("update-operator.yaml", func(path string) error { return parseAndValidate(UpdateOperator(), path) })
	check("update-agent.yaml", func(path string) error { return parseAndValidate(UpdateAgent(), path) })
}

func parseAndValidate[T runtime.Object](c Component[T], path string) error {
	o, err := New(c)
	if err != nil {
		return err
	}
	res, err := o.Parse([]string{"--config", path})
	if err != nil {
		return err
	}
	return o.Validate(res.Config)
}

// A DaemonSet binds a per-node binary to its pod's IP with
// --metrics-bind-address=$(POD_IP):port, and the kubelet substitutes the IP
// as it is: an IPv6 pod IP arrives without brackets. The flag takes the
// last colon as the port's.
func TestABindAddressFlagTakesAPodIPOfEitherFamily(t *testing.T) {
	for flag, want := range map[string]string{
		"--metrics-bind-address=10.0.3.7:10370":         "10.0.3.7:10370",
		"--metrics-bind-address=fd00:10:244::7:10370":   "[fd00:10:244::7]:10370",
		"--metrics-bind-address=[fd00:10:244::7]:10370": "[fd00:10:244::7]:10370",
		"--healthz-bind-address=2001:db8::1:10371":      "[2001:db8::1]:10371",
		"--healthz-bind-address=localhost:10371":        "localhost:10371",
		"--metrics-bind-address=:10370":                 ":10370",
	} {
		_, cfg, err := parseController(t, flag)
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		got := cfg.Serving.MetricsBindAddress
		if strings.HasPrefix(flag, "--healthz") {
			got = cfg.Serving.HealthzBindAddress
		}
		if got != want {
			t.Errorf("%s: %q, want %q", flag, got, want)
		}
	}
}
