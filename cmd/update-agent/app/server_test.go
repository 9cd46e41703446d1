package app

import (
	"strings"
	"testing"
	"time"

	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
	"nodehealth.io/nodehealth/pkg/componentconfig/options/optionstest"
)

func runCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return optionstest.Run(NewCommand, args...)
}

// The example in deploy/ and the DaemonSet's copy are complete files the
// binary accepts as they are.
func TestTheExampleConfigurationsAreAcceptedAsTheyAre(t *testing.T) {
	for _, path := range []string{"../../../deploy/config/update-agent.yaml", "../../../deploy/update-agent/config.yaml"} {
		out, stderr, code := runCommand(t, "--config", path, "--write-config-to", "-")
		if code != 0 || stderr != "" {
			t.Fatalf("%s: exit %d: %s", path, code, stderr)
		}
		for _, want := range []string{"kind: UpdateAgentConfiguration", "updateCheckInterval: 2m0s", "apiSocketPath: /run/api.sock"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the effective configuration lacks %q:\n%s", path, want, out)
			}
		}
	}
}

func TestBadConfigExitsWithOneLine(t *testing.T) {
	optionstest.BadInputExitsWithOneLine(t, NewCommand, "UpdateAgentConfiguration")
}

func TestHelpListsOnlyOwnFlags(t *testing.T) {
	stdout, _, code := runCommand(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--config", "--write-config-to", "--kubeconfig", "--node-name", "-v, --v", "never boots twice into one update"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, unwanted := range []string{"--log-dir", "--alsologtostderr", "--leader-elect", "--dry-run"} {
		if strings.Contains(stdout, unwanted) {
			t.Errorf("--help shows %q", unwanted)
		}
	}
}

func TestNodeNameRequired(t *testing.T) {
	t.Setenv(NodeNameEnv, "")
	_, stderr, code := runCommand(t, "--config", "../../../deploy/config/update-agent.yaml", "--healthz-bind-address=127.0.0.1:1", "--metrics-bind-address=127.0.0.1:1")
	if code == 0 || !strings.Contains(stderr, "NODE_NAME") {
		t.Errorf("exit %d: %q", code, stderr)
	}
}

func TestVersionPrintsAndExits(t *testing.T) {
	optionstest.VersionPrintsAndExits(t, NewCommand, "update-agent")
}

// TestTheAgentRegistersItsLeaseAsNotAffectingReadiness: the updater is one
// more system extension whose planned releases (reason Updating) gate the
// node, but whose outages — a crash-looping agent, a bad image — must never
// gate or evict (docs/updater.md). The node-health controller's side, a planned
// release gating even with affects-readiness=false, is pkg/nodehealth's.
func TestTheAgentRegistersItsLeaseAsNotAffectingReadiness(t *testing.T) {
	cfg, err := latest.UpdateAgentConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	opts := heartbeatOptions(cfg, "node-1", nil)
	if !opts.Register || opts.AffectsReadiness == nil || *opts.AffectsReadiness {
		t.Errorf("register %v, affectsReadiness %v: want a self-registered Lease labelled affects-readiness=false", opts.Register, opts.AffectsReadiness)
	}
	if opts.Extension != "bottlerocket-updater" || opts.NodeName != "node-1" {
		t.Errorf("Lease of %s for %s, want bottlerocket-updater for node-1", opts.Extension, opts.NodeName)
	}
}

// TestTheReadinessTaintKeyComesFromTheConfiguration: a node-health
// controller configured with another taint key would otherwise fail every
// update (the taint the agent waits for never comes) and back each node off
// to 24 h.
func TestTheReadinessTaintKeyComesFromTheConfiguration(t *testing.T) {
	cfg, err := latest.UpdateAgentConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadinessTaintKey = "example.com/not-ready"
	cfg.RebootGrace.Duration = 5 * time.Minute
	opts := agentOptions(cfg, "node-1")
	if opts.ReadinessTaintKey != "example.com/not-ready" || opts.RebootGrace != 5*time.Minute || opts.NodeName != "node-1" {
		t.Errorf("agent options %+v, want the configured taint key and reboot grace", opts)
	}
}
