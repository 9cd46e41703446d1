package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
	"nodehealth.io/nodehealth/pkg/componentconfig/options/optionstest"
	"nodehealth.io/nodehealth/pkg/nodehealth"
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
	if stderr != "" {
		t.Errorf("defaults are not a valid configuration: %s", stderr)
	}
	if !strings.Contains(first, "kind: NodeHealthControllerConfiguration") || !strings.Contains(first, "apiVersion: config.nodehealth.io/v1alpha1") {
		t.Fatalf("not a v1alpha1 file:\n%s", first)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	second, stderr, code := runCommand(t, "--config", path, "--write-config-to", "-")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if second != first {
		t.Errorf("re-written configuration differs:\n%s\n---\n%s", first, second)
	}

	// The example file is accepted as well, and writing to a file works.
	out := filepath.Join(t.TempDir(), "out.yaml")
	if _, stderr, code := runCommand(t, "--config", "../../../deploy/config/nodehealth-controller.yaml", "--write-config-to", out); code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestBadConfigExitsWithOneLine(t *testing.T) {
	optionstest.BadInputExitsWithOneLine(t, NewCommand, "NodeHealthControllerConfiguration")
}

func TestHelpListsOnlyOwnFlags(t *testing.T) {
	stdout, _, code := runCommand(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--config", "--write-config-to", "--kubeconfig", "--leader-elect", "--feature-gates", "ConfigFileWatch=true|false", "--dry-run", "-v, --v"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	// Flags that libraries register globally must not leak in.
	for _, unwanted := range []string{"--log-dir", "--alsologtostderr", "--add-dir-header", "--node-name"} {
		if strings.Contains(stdout, unwanted) {
			t.Errorf("--help shows %q", unwanted)
		}
	}
}

func TestControllerOptionsRenderTheLeaseNameTemplatePerNode(t *testing.T) {
	cfg, err := latest.NodeHealthControllerConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ExtensionRules = []config.ExtensionRule{
		{Name: "ebs-csi", NodeSelector: &metav1.LabelSelector{}, LeaseNameTemplate: "{extension}-node.{node}", AffectsReadiness: true},
		{Name: "kube-proxy", NodeSelector: &metav1.LabelSelector{}, AffectsReadiness: true},
	}
	opts, err := controllerOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.Rules[0].LeaseName("n1.example"); got != "ebs-csi-node.n1.example" {
		t.Errorf("templated lease name %q", got)
	}
	if opts.Rules[1].LeaseName != nil {
		t.Error("a rule without a template must use the default <extension>.<node>")
	}
}

// Escalation is opt-in: the defaults never evict, and the Evict mode's
// overrides reach the controller's options.
func TestControllerOptionsEviction(t *testing.T) {
	cfg, err := latest.NodeHealthControllerConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := controllerOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e := opts.Eviction; e.Mode != nodehealth.EvictionModeNone || e.Force || e.DeleteEmptyDirData {
		t.Errorf("default eviction options %+v, want mode None without overrides", e)
	}
	cfg.Eviction.Mode, cfg.Eviction.Force, cfg.Eviction.DeleteEmptyDirData = config.EvictionModeEvict, true, true
	if opts, err = controllerOptions(cfg); err != nil {
		t.Fatal(err)
	}
	if e := opts.Eviction; e.Mode != nodehealth.EvictionModeEvict || !e.Force || !e.DeleteEmptyDirData {
		t.Errorf("eviction options %+v, want mode Evict with force and deleteEmptyDirData", e)
	}
}

func TestVersionPrintsAndExits(t *testing.T) {
	optionstest.VersionPrintsAndExits(t, NewCommand, "nodehealth-controller")
}

// autoscalerStartupTaintKey is a readiness taint key under the prefix
// cluster-autoscaler treats as a start-up taint without --startup-taint
// (StartupTaintPrefix in its utils/taints/taints.go), the one lever the
// managed autoscalers of GKE and AKS leave (docs/autoscalers.md).
const autoscalerStartupTaintKey = "startup-taint.cluster-autoscaler.kubernetes.io/nodehealth-not-ready"

// A taint key under the autoscaler's start-up prefix goes through the whole
// configuration path: the file passes validation as it is, is written back
// with the key, and the controller's options carry it; a key that is the
// prefix alone or whose name part is too long is refused, naming the field
// and the qualified-name rule it breaks.
func TestATaintKeyUnderTheAutoscalersStartupPrefixIsAcceptedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	write := func(name, key string) string {
		path := filepath.Join(dir, name)
		body := "apiVersion: config.nodehealth.io/v1alpha1\nkind: NodeHealthControllerConfiguration\ntaint:\n  key: " + key + "\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	out, stderr, code := runCommand(t, "--config", write("prefixed.yaml", autoscalerStartupTaintKey), "--write-config-to", "-")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "  key: "+autoscalerStartupTaintKey+"\n") || !strings.Contains(out, "  effect: NoSchedule\n") {
		t.Errorf("the written configuration lacks the key (or the defaulted effect):\n%s", out)
	}

	cfg, err := latest.NodeHealthControllerConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Taint.Key = autoscalerStartupTaintKey
	opts, err := controllerOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TaintKey != autoscalerStartupTaintKey {
		t.Errorf("the controller's taint key is %q, want %q", opts.TaintKey, autoscalerStartupTaintKey)
	}

	for _, tc := range []struct{ name, key, want string }{
		// The prefix alone has no name part: not a qualified name.
		{"prefix alone", "startup-taint.cluster-autoscaler.kubernetes.io/", "name part must be non-empty"},
		// The name part after the prefix is limited to 63 characters.
		{"name part too long", "startup-taint.cluster-autoscaler.kubernetes.io/" + strings.Repeat("n", 64), "name part must be no more than 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// --write-config-to writes any file it can parse and says on
			// stderr why it would not start (the valid case above says
			// nothing): the validation the binary runs before starting.
			_, stderr, code := runCommand(t, "--config", write(tc.name+".yaml", tc.key), "--write-config-to", "-")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "does not start as is") || !strings.Contains(stderr, "taint.key") || !strings.Contains(stderr, tc.want) {
				t.Errorf("taint.key %q: stderr does not refuse it naming taint.key and %q:\n%s", tc.key, tc.want, stderr)
			}
		})
	}
}
