// Package optionstest holds the checks every nodehealth binary's command must
// pass, so that each binary's tests run them against its own command.
package optionstest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/version"
)

// Run executes a fresh command of a binary with args, as its main would, and
// returns what it printed and its exit code.
func Run(newCommand func() *cobra.Command, args ...string) (stdout, stderr string, code int) {
	cmd := newCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	code = options.Run(cmd)
	return out.String(), errOut.String(), code
}

// BadInputExitsWithOneLine checks that bad input (an unknown field in a file
// of the binary's Kind, a missing file, an unknown flag, an invalid logging
// format) makes the binary exit non-zero with one "error: ..." line on
// standard error and nothing on standard output.
func BadInputExitsWithOneLine(t *testing.T, newCommand func() *cobra.Command, kind string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: config.nodehealth.io/v1alpha1\nkind: "+kind+"\nworkerz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"unknown field":   {"--config", path},
		"missing file":    {"--config", path + ".missing"},
		"invalid value":   {"--workers-flag-does-not-exist"},
		"invalid logging": {"--logging-format", "xml"},
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := Run(newCommand, args...)
			if code == 0 {
				t.Fatal("exit 0")
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("want one line starting with \"error: \", got %q", stderr)
			}
		})
	}
}

// VersionPrintsAndExits checks that --version prints one line, the binary's
// name and the stamped version, and exits 0 before looking at anything else:
// a container image's entrypoint answers it without a configuration file.
func VersionPrintsAndExits(t *testing.T, newCommand func() *cobra.Command, name string) {
	t.Helper()
	stdout, stderr, code := Run(newCommand, "--version", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 0 || stderr != "" {
		t.Fatalf("--version: exit %d: %q", code, stderr)
	}
	want := name + " " + version.Get().String() + "\n"
	if stdout != want {
		t.Errorf("--version printed %q, want %q", stdout, want)
	}
}
