package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
	"nodehealth.io/nodehealth/pkg/componentconfig/options/optionstest"
)

func runCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return optionstest.Run(NewCommand, args...)
}

// --write-config-to - prints a complete file the binary accepts unchanged;
// the shipped example is accepted too.
func TestWriteConfigToRoundTrip(t *testing.T) {
	first, stderr, code := runCommand(t, "--write-config-to", "-")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(first, "kind: UpdateOperatorConfiguration") || !strings.Contains(first, "rebootedIntoUpdate: 30m0s") {
		t.Fatalf("not the defaulted v1alpha1 file:\n%s", first)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	second, stderr, code := runCommand(t, "--config", path, "--write-config-to", "-")
	if code != 0 || stderr != "" || second != first {
		t.Fatalf("exit %d: %s\nre-written configuration differs:\n%s\n---\n%s", code, stderr, first, second)
	}
	for _, example := range []string{"../../../deploy/config/update-operator.yaml", "../../../deploy/update-operator/config.yaml"} {
		if _, stderr, code := runCommand(t, "--config", example, "--write-config-to", filepath.Join(t.TempDir(), "out.yaml")); code != 0 || stderr != "" {
			t.Fatalf("%s: exit %d: %s", example, code, stderr)
		}
	}
}

func TestBadConfigExitsWithOneLine(t *testing.T) {
	optionstest.BadInputExitsWithOneLine(t, NewCommand, "UpdateOperatorConfiguration")
}

func TestHelpListsTheOperatorsFlagsAndHidesKlogsLegacyOnes(t *testing.T) {
	stdout, _, code := runCommand(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--config", "--write-config-to", "--kubeconfig", "--leader-elect", "--dry-run", "--node-name", "-v, --v"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, unwanted := range []string{"--log-dir", "--alsologtostderr"} {
		if strings.Contains(stdout, unwanted) {
			t.Errorf("--help shows %q", unwanted)
		}
	}
}

func TestTheOperatorsOptionsComeFromItsDefaultConfiguration(t *testing.T) {
	cfg, err := latest.UpdateOperatorConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := updaterOptions(cfg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Selector.Matches(labels.Set{"bottlerocket.aws/updater-interface-version": "2.0.0"}) || opts.Selector.Matches(labels.Set{}) {
		t.Errorf("selector %v", opts.Selector)
	}
	if opts.OwnNode != "n1" || opts.Deadlines.RebootedIntoUpdate != 30*time.Minute {
		t.Errorf("options %+v", opts)
	}
}

// Where hooks run is the configuration's hooks, and only that: the Job
// client and informer are the wiring's (internal/setup/operator).
func TestTheHooksNamespaceAndServiceAccountComeFromTheConfiguration(t *testing.T) {
	cfg, err := latest.UpdateOperatorConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := updaterOptions(cfg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Hooks.Namespace != "" || opts.Hooks.ServiceAccountName != "" {
		t.Errorf("the defaults name where hooks run: %+v", opts.Hooks)
	}
	cfg.Hooks.Namespace, cfg.Hooks.ServiceAccountName = "storage-hooks", "ceph-hooks"
	if opts, err = updaterOptions(cfg, "n1"); err != nil {
		t.Fatal(err)
	}
	if opts.Hooks.Namespace != "storage-hooks" || opts.Hooks.ServiceAccountName != "ceph-hooks" {
		t.Errorf("hooks %+v, want storage-hooks and ceph-hooks", opts.Hooks)
	}
}

func TestVersionPrintsAndExits(t *testing.T) {
	optionstest.VersionPrintsAndExits(t, NewCommand, "update-operator")
}
