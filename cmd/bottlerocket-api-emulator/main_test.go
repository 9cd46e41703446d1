package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--socket", "/tmp/x.sock", "extra"},
		{"--socket", "/tmp/x.sock", "--prepare-delay", "soon"},
		{"--nope"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
	o, err := parse([]string{"--socket", "/tmp/x.sock", "--offer", "1.21.0,1.22.0", "--offer", "1.23.0", "--fail-prepare", "--api-down-calls", "3", "--prepare-delay", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if strings.Join(c.Offered, " ") != "1.21.0 1.22.0 1.23.0" || !c.Faults.PrepareFails || c.Faults.DropNext != 3 || c.Delays.Prepare != 2*time.Second || c.Version != "1.20.0" || c.VersionLock != "latest" {
		t.Errorf("parsed %+v", c)
	}
}

// TestRunUpdatesThroughHook runs the command's wiring end to end: a client
// updates the emulated host, the reboot runs the shell hook with the
// reboot's facts, and the host boots the new version.
func TestRunUpdatesThroughHook(t *testing.T) {
	dir, err := os.MkdirTemp("", "brem")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock, out := filepath.Join(dir, "api.sock"), filepath.Join(dir, "hook.out")
	o, err := parse([]string{"--socket", sock, "--state-file", filepath.Join(dir, "state.json"), "--offer", "1.21.0",
		"--reboot-hook", `echo "$EMULATOR_REBOOT_FROM $EMULATOR_REBOOT_TO $EMULATOR_REBOOT_NUMBER" > ` + out}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	// Short real back-off: the socket appears, and the API drops requests
	// while the hook runs.
	c := brapi.New(brapi.Options{SocketPath: sock, Retry: brapi.Backoff{Initial: 10 * time.Millisecond, Factor: 2, Max: 200 * time.Millisecond, Attempts: 30}, PollInterval: 10 * time.Millisecond})
	for _, step := range []func(context.Context) (*brapi.UpdateStatus, error){c.RefreshUpdates, c.PrepareUpdate, c.ActivateUpdate} {
		if _, err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	// Requests are dropped from the reboot's answer until the boot, so the
	// first answer comes from the booted host.
	if os, err := c.OS(ctx); err != nil || os.VersionID != "1.21.0" {
		t.Fatalf("after reboot: %+v, %v; want 1.21.0", os, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "1.20.0 1.21.0 1" {
		t.Errorf("hook saw %q, want %q", got, "1.20.0 1.21.0 1")
	}
}
