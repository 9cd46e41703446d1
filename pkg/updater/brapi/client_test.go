package brapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
)

// stepClock is a fake clock whose timers fire at once, moving time forward
// by their duration: back-off and polling cost no real time, and the
// emulator's command delays (on the same clock) pass as the client waits.
type stepClock struct {
	*testingclock.FakeClock
	mu      sync.Mutex
	slept   []time.Duration
	onSleep func(n int, d time.Duration)
}

func newStepClock() *stepClock {
	return &stepClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.mu.Lock()
	c.slept = append(c.slept, d)
	n, hook := len(c.slept), c.onSleep
	c.mu.Unlock()
	if hook != nil {
		hook(n, d)
	}
	c.FakeClock.Step(d)
	return t
}

func (c *stepClock) sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.slept)
}

func (c *stepClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = nil
}

// socketPath is short: Unix socket paths are limited to ~108 bytes.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "brapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "api.sock")
}

type env struct {
	em     *emulator.Emulator
	client *brapi.Client
	clock  *stepClock
	events chan emulator.RebootEvent
}

func newEnv(t *testing.T, cfg emulator.Config) *env {
	t.Helper()
	clk := newStepClock()
	if cfg.SocketPath == "" {
		cfg.SocketPath = socketPath(t)
	}
	if cfg.Version == "" {
		cfg.Version = "1.20.0"
	}
	cfg.Clock = clk
	events := make(chan emulator.RebootEvent, 10)
	if cfg.RebootHook == nil {
		cfg.RebootHook = func(_ context.Context, ev emulator.RebootEvent) error {
			events <- ev
			return nil
		}
	}
	em, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := em.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Close)
	client := brapi.New(brapi.Options{SocketPath: cfg.SocketPath, Clock: clk, CommandTimeout: 30 * time.Minute})
	return &env{em: em, client: client, clock: clk, events: events}
}

func TestUpdateThroughReboot(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Version: "1.20.0", Offered: []string{"1.20.5", "1.21.0"}, Variant: "aws-k8s-1.33", Arch: "x86_64"})
	c := e.client

	os, err := c.OS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&brapi.OSInfo{PrettyName: "Bottlerocket OS 1.20.0 (aws-k8s-1.33)", VariantID: "aws-k8s-1.33", VersionID: "1.20.0", BuildID: "emulated", Arch: "x86_64"}, os); diff != "" {
		t.Errorf("OS (-want +got):\n%s", diff)
	}
	if _, err := c.UpdateStatus(ctx); !brapi.IsNotFound(err) {
		t.Fatalf("status before any command: want 404 (uninitialized), got %v", err)
	}

	s, err := c.RefreshUpdates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.UpdateState != brapi.StateAvailable || s.ChosenVersion() != "1.21.0" || !slices.Equal(s.AvailableUpdates, []string{"1.21.0", "1.20.5"}) {
		t.Fatalf("after refresh: state %s chosen %q available %v; want Available, 1.21.0, [1.21.0 1.20.5]", s.UpdateState, s.ChosenVersion(), s.AvailableUpdates)
	}
	if r := s.MostRecentCommand; r == nil || r.CmdType != brapi.CommandRefresh || r.CmdStatus != brapi.CommandSuccess || r.ExitStatus == nil || *r.ExitStatus != 0 {
		t.Fatalf("most recent command: %+v", r)
	}

	// Pin an older offered version, as the agent pins spec.version.
	lock, err := c.VersionLock(ctx)
	if err != nil || lock != brapi.VersionLockLatest {
		t.Fatalf("VersionLock = %q, %v; want latest", lock, err)
	}
	if err := c.SetVersionLock(ctx, "1.20.5"); err != nil {
		t.Fatal(err)
	}
	if lock, err := c.VersionLock(ctx); err != nil || lock != "1.20.5" {
		t.Fatalf("VersionLock = %q, %v; want 1.20.5", lock, err)
	}
	if s, err = c.RefreshUpdates(ctx); err != nil || s.ChosenVersion() != "1.20.5" {
		t.Fatalf("refresh under lock: chosen %q, %v; want 1.20.5", s.ChosenVersion(), err)
	}
	if s, err = c.PrepareUpdate(ctx); err != nil || s.UpdateState != brapi.StateStaged || s.StagedVersion() != "1.20.5" || s.ActivatedVersion() != "" {
		t.Fatalf("prepare: %+v, %v", s, err)
	}
	if s, err = c.ActivateUpdate(ctx); err != nil || s.UpdateState != brapi.StateReady || s.ActivatedVersion() != "1.20.5" || s.ActivePartition.NextToBoot {
		t.Fatalf("activate: %+v, %v", s, err)
	}
	if err := c.SetVersionLock(ctx, brapi.VersionLockLatest); err != nil {
		t.Fatal(err)
	}

	if err := c.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := <-e.events; ev != (emulator.RebootEvent{From: "1.20.0", To: "1.20.5", Reboot: 1}) {
		t.Errorf("reboot hook got %+v", ev)
	}
	if err := e.em.WaitForReboots(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if os, err = c.OS(ctx); err != nil || os.VersionID != "1.20.5" {
		t.Fatalf("after reboot: %+v, %v; want 1.20.5", os, err)
	}
	if _, err := c.UpdateStatus(ctx); !brapi.IsNotFound(err) {
		t.Fatalf("status after reboot: want 404 (uninitialized), got %v", err)
	}
	if s, err = c.RefreshUpdates(ctx); err != nil || s.UpdateState != brapi.StateAvailable || s.ChosenVersion() != "1.21.0" {
		t.Fatalf("refresh after reboot: %+v, %v", s, err)
	}
	st := e.em.State()
	if st.Reboots != 1 || st.RebootRequests != 1 {
		t.Errorf("reboots %d requests %d; want 1 and 1", st.Reboots, st.RebootRequests)
	}
}

func TestDeactivateUndoesAnActivationSoARebootStaysOnTheRunningVersion(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}})
	c := e.client
	mustRun(t, c.RefreshUpdates, c.PrepareUpdate, c.ActivateUpdate)
	s, err := c.DeactivateUpdate(ctx)
	if err != nil || s.UpdateState != brapi.StateStaged || s.ActivatedVersion() != "" || !s.ActivePartition.NextToBoot {
		t.Fatalf("deactivate: %+v, %v", s, err)
	}
	if r := s.MostRecentCommand; r.CmdType != brapi.CommandDeactivate {
		t.Errorf("most recent command %s, want deactivate", r.CmdType)
	}
	// Nothing activated: deactivating again is a success (the API's 409 is
	// checked against the state), and a reboot stays on the running version.
	if s, err = c.DeactivateUpdate(ctx); err != nil || s.UpdateState != brapi.StateStaged {
		t.Fatalf("second deactivate: %+v, %v", s, err)
	}
	if err := c.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := <-e.events; ev.To != "1.20.0" {
		t.Errorf("rebooting into %s after deactivate, want 1.20.0", ev.To)
	}
}

func mustRun(t *testing.T, steps ...func(context.Context) (*brapi.UpdateStatus, error)) {
	t.Helper()
	for i, step := range steps {
		if _, err := step(t.Context()); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func TestActionsRejectedByState(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{}) // nothing offered
	c := e.client
	if s, err := c.RefreshUpdates(ctx); err != nil || s.UpdateState != brapi.StateIdle || s.ChosenUpdate != nil {
		t.Fatalf("refresh with nothing offered: %+v, %v", s, err)
	}
	_, err := c.PrepareUpdate(ctx)
	assertAPIError(t, err, "POST /actions/prepare-update", http.StatusConflict, "not allowed")
	_, err = c.ActivateUpdate(ctx)
	assertAPIError(t, err, "POST /actions/activate-update", http.StatusConflict, "not allowed")
	// A 409 is not retried.
	if got := e.clock.sleeps(); len(got) != 0 {
		t.Errorf("client waited %v; a 409 must not be retried", got)
	}

	// Activating twice is a success the second time.
	if err := e.em.Offer("1.21.0"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, c.RefreshUpdates, c.PrepareUpdate, c.ActivateUpdate)
	if s, err := c.ActivateUpdate(ctx); err != nil || s.UpdateState != brapi.StateReady {
		t.Fatalf("second activate: %+v, %v", s, err)
	}
	// Prepare is not allowed once Ready.
	_, err = c.PrepareUpdate(ctx)
	assertAPIError(t, err, "POST /actions/prepare-update", http.StatusConflict, "Ready")
}

func assertAPIError(t *testing.T, err error, call string, status int, bodyPart string) {
	t.Helper()
	var apiErr *brapi.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want a *brapi.Error for %s, got %v", call, err)
	}
	if apiErr.Call != call || apiErr.StatusCode != status || !strings.Contains(apiErr.Body, bodyPart) {
		t.Fatalf("error %+v: want call %q status %d body containing %q", apiErr, call, status, bodyPart)
	}
	for _, part := range []string{call, http.StatusText(status), bodyPart} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q lacks %q", err, part)
		}
	}
}

func TestAFailedCommandIsACommandErrorAndTheStepSucceedsOnceTheFaultClears(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults emulator.Faults
		// steps before the failing one
		before func(c *brapi.Client) []func(context.Context) (*brapi.UpdateStatus, error)
		step   func(c *brapi.Client) func(context.Context) (*brapi.UpdateStatus, error)
		cmd    brapi.CommandType
		state  brapi.UpdateState // after the failure
	}{{
		name:   "refresh fails",
		faults: emulator.Faults{RefreshFails: true},
		before: func(*brapi.Client) []func(context.Context) (*brapi.UpdateStatus, error) { return nil },
		step:   func(c *brapi.Client) func(context.Context) (*brapi.UpdateStatus, error) { return c.RefreshUpdates },
		cmd:    brapi.CommandRefresh, state: brapi.StateIdle,
	}, {
		name:   "prepare fails",
		faults: emulator.Faults{PrepareFails: true},
		before: func(c *brapi.Client) []func(context.Context) (*brapi.UpdateStatus, error) {
			return []func(context.Context) (*brapi.UpdateStatus, error){c.RefreshUpdates}
		},
		step: func(c *brapi.Client) func(context.Context) (*brapi.UpdateStatus, error) { return c.PrepareUpdate },
		cmd:  brapi.CommandPrepare, state: brapi.StateAvailable,
	}, {
		name:   "activate fails",
		faults: emulator.Faults{ActivateFails: true},
		before: func(c *brapi.Client) []func(context.Context) (*brapi.UpdateStatus, error) {
			return []func(context.Context) (*brapi.UpdateStatus, error){c.RefreshUpdates, c.PrepareUpdate}
		},
		step: func(c *brapi.Client) func(context.Context) (*brapi.UpdateStatus, error) { return c.ActivateUpdate },
		cmd:  brapi.CommandActivate, state: brapi.StateStaged,
	}, {
		name:   "deactivate fails",
		faults: emulator.Faults{DeactivateFails: true},
		before: func(c *brapi.Client) []func(context.Context) (*brapi.UpdateStatus, error) {
			return []func(context.Context) (*brapi.UpdateStatus, error){c.RefreshUpdates, c.PrepareUpdate, c.ActivateUpdate}
		},
		step: func(c *brapi.Client) func(context.Context) (*brapi.UpdateStatus, error) { return c.DeactivateUpdate },
		cmd:  brapi.CommandDeactivate, state: brapi.StateReady,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Delays: emulator.Delays{Refresh: time.Second, Prepare: time.Minute, Activate: time.Second, Deactivate: time.Second}})
			mustRun(t, tc.before(e.client)...)
			e.em.SetFaults(tc.faults)
			s, err := tc.step(e.client)(t.Context())
			var cmdErr *brapi.CommandError
			if !errors.As(err, &cmdErr) || !brapi.IsCommandFailed(err) {
				t.Fatalf("want a CommandError, got %v", err)
			}
			r := cmdErr.Result
			if r.CmdType != tc.cmd || r.CmdStatus != brapi.CommandFailed || r.ExitStatus == nil || *r.ExitStatus != 1 {
				t.Errorf("result %+v", r)
			}
			for _, part := range []string{string(tc.cmd), "Failed", "exit status 1", "fault injected"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("message %q lacks %q", err, part)
				}
			}
			if s == nil || s.UpdateState != tc.state {
				t.Errorf("state after failure: %+v, want %s", s, tc.state)
			}
			// Cleared, the same step succeeds.
			e.em.SetFaults(emulator.Faults{})
			if _, err := tc.step(e.client)(t.Context()); err != nil {
				t.Errorf("after clearing the fault: %v", err)
			}
		})
	}
}

func TestCommandDelaysAnswerLocked(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Delays: emulator.Delays{Prepare: 5 * time.Minute}})
	c := e.client
	mustRun(t, c.RefreshUpdates)
	e.clock.reset()
	s, err := c.PrepareUpdate(ctx)
	if err != nil || s.UpdateState != brapi.StateStaged {
		t.Fatalf("prepare: %+v, %v", s, err)
	}
	// The client polled every 2s (the default) for the 5 minutes prepare
	// ran, meeting 423 meanwhile.
	polls := e.clock.sleeps()
	if len(polls) != 150 || polls[0] != 2*time.Second {
		t.Errorf("polled %d times (first wait %v), want 150 waits of 2s", len(polls), polls[0])
	}

	// A second command while one runs meets 423 (on its status read as on
	// its POST), retried with back-off and reported when the lock outlasts
	// the retries.
	e.em.SetDelays(emulator.Delays{Refresh: time.Hour})
	if _, err := c.RefreshUpdates(ctx); err != nil {
		// The first refresh waits for itself: a CommandTimeout of 30m gives up.
		if !strings.Contains(err.Error(), "gave up after 30m0s") || !brapi.IsLocked(err) {
			t.Fatalf("want a give-up while the command holds the lock, got %v", err)
		}
	} else {
		t.Fatal("refresh running an hour finished within the 30m command timeout")
	}
	e.clock.reset()
	_, err = c.ActivateUpdate(ctx)
	if !brapi.IsLocked(err) {
		t.Fatalf("want 423 while refresh runs, got %v", err)
	}
	var apiErr *brapi.Error
	if errors.As(err, &apiErr) && apiErr.Attempts != 6 {
		t.Errorf("attempts %d, want 6", apiErr.Attempts)
	}
	if got, want := e.clock.sleeps(), []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("back-off %v, want %v", got, want)
	}
}

func TestWaitForCommandAfterRestart(t *testing.T) {
	// An agent restarted after posting prepare waits for the result it has
	// not seen yet, given the result it saw before.
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Delays: emulator.Delays{Prepare: time.Minute}})
	before, err := e.client.RefreshUpdates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code := rawPost(t, socketOf(e), "/actions/prepare-update"); code != http.StatusNoContent {
		t.Fatalf("raw prepare: %d", code)
	}
	s, err := e.client.WaitForCommand(ctx, brapi.CommandPrepare, before.MostRecentCommand)
	if err != nil || s.StagedVersion() != "1.21.0" {
		t.Fatalf("wait: %+v, %v", s, err)
	}
	// Waiting for a command that never comes is bounded.
	short := brapi.New(brapi.Options{SocketPath: socketOf(e), Clock: e.clock, CommandTimeout: time.Minute})
	if _, err := short.WaitForCommand(ctx, brapi.CommandActivate, s.MostRecentCommand); err == nil || !strings.Contains(err.Error(), "gave up after 1m0s") {
		t.Fatalf("want a bounded wait, got %v", err)
	}
}

func socketOf(e *env) string { return e.client.SocketPath() }

func rawPost(t *testing.T, socket, path string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	resp, err := hc.Post("http://localhost"+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestTheClientSeesARebootThatHangsNeverComesUpOrDropsTheAPI(t *testing.T) {
	ctx := t.Context()
	t.Run("hangs", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{RebootHangs: true}})
		mustRun(t, e.client.RefreshUpdates, e.client.PrepareUpdate, e.client.ActivateUpdate)
		if err := e.client.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		st := e.em.State()
		if st.RebootRequests != 1 || st.Reboots != 0 || st.Running != "1.20.0" || len(e.events) != 0 {
			t.Errorf("hung reboot: requests %d reboots %d running %s hooks %d", st.RebootRequests, st.Reboots, st.Running, len(e.events))
		}
		// The API keeps serving the old version, still Ready.
		if s, err := e.client.UpdateStatus(ctx); err != nil || s.UpdateState != brapi.StateReady {
			t.Errorf("status: %+v, %v", s, err)
		}
	})
	t.Run("never comes up", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{NeverComesUp: true}})
		mustRun(t, e.client.RefreshUpdates, e.client.PrepareUpdate, e.client.ActivateUpdate)
		if err := e.client.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		if ev := <-e.events; ev.From != "1.20.0" || ev.To != "1.20.0" {
			t.Errorf("hook got %+v, want a reboot back into 1.20.0", ev)
		}
		if err := e.em.WaitForReboots(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if os, err := e.client.OS(ctx); err != nil || os.VersionID != "1.20.0" {
			t.Errorf("after reboot: %+v, %v; want still 1.20.0", os, err)
		}
	})
	t.Run("API dropped while rebooting", func(t *testing.T) {
		release := make(chan struct{})
		e := newEnv(t, emulator.Config{RebootHook: func(ctx context.Context, _ emulator.RebootEvent) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}})
		if err := e.client.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.OS(ctx)
		var apiErr *brapi.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 0 || apiErr.Attempts != 6 {
			t.Fatalf("while the host reboots, want no answer after 6 attempts, got %v", err)
		}
		close(release)
		if err := e.em.WaitForReboots(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.OS(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTransientFailuresRetried(t *testing.T) {
	ctx := t.Context()
	t.Run("dropped connections", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Faults: emulator.Faults{DropNext: 2}})
		if os, err := e.client.OS(ctx); err != nil || os.VersionID != "1.20.0" {
			t.Fatalf("OS: %+v, %v", os, err)
		}
		if got, want := e.clock.sleeps(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("back-off %v, want %v", got, want)
		}
	})
	t.Run("server errors", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{ServerErrorNext: 3}})
		if s, err := e.client.RefreshUpdates(ctx); err != nil || s.ChosenVersion() != "1.21.0" {
			t.Fatalf("refresh: %+v, %v", s, err)
		}
		if n := len(e.clock.sleeps()); n != 3 {
			t.Errorf("retried %d times, want 3", n)
		}
	})
	t.Run("down for longer than the retries", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Faults: emulator.Faults{DropNext: 100}})
		_, err := e.client.OS(ctx)
		var apiErr *brapi.Error
		if !errors.As(err, &apiErr) || apiErr.Attempts != 6 || apiErr.Call != "GET /os" || !strings.Contains(err.Error(), "after 6 attempts") {
			t.Fatalf("want GET /os failing after 6 attempts, got %v", err)
		}
		if got, want := e.clock.sleeps(), []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("back-off %v, want %v", got, want)
		}
	})
	t.Run("connection refused while the API restarts", func(t *testing.T) {
		e := newEnv(t, emulator.Config{})
		e.em.Stop()
		e.clock.onSleep = func(n int, _ time.Duration) {
			if n == 2 {
				if err := e.em.Start(); err != nil {
					t.Error(err)
				}
			}
		}
		// Even a reboot is retried when the connection was refused: the
		// request never left.
		if err := e.client.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(e.clock.sleeps()); n != 2 {
			t.Errorf("retried %d times, want 2", n)
		}
		if err := e.em.WaitForReboots(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if st := e.em.State(); st.RebootRequests != 1 {
			t.Errorf("reboot requests %d, want 1", st.RebootRequests)
		}
	})
}

func TestRebootNeverSentTwice(t *testing.T) {
	ctx := t.Context()
	for _, f := range []emulator.Faults{{DropNext: 1}, {ServerErrorNext: 1}} {
		e := newEnv(t, emulator.Config{Faults: f})
		err := e.client.Reboot(ctx)
		var apiErr *brapi.Error
		if !errors.As(err, &apiErr) || apiErr.Attempts != 1 || apiErr.Call != "POST /actions/reboot" {
			t.Fatalf("faults %+v: want one failed attempt, got %v", f, err)
		}
		if n := len(e.clock.sleeps()); n != 0 {
			t.Errorf("faults %+v: reboot retried %d times", f, n)
		}
	}
}

func TestAMalformedAnswerIsReportedWithWhatIsWrongAndNotRetried(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}, Faults: emulator.Faults{MalformedNext: 1}})
	_, err := e.client.OS(ctx)
	if !errors.Is(err, brapi.ErrMalformed) || !strings.Contains(err.Error(), "GET /os") {
		t.Fatalf("want a malformed GET /os, got %v", err)
	}
	if n := len(e.clock.sleeps()); n != 0 {
		t.Errorf("malformed answer retried %d times", n)
	}
	mustRun(t, e.client.RefreshUpdates)
	e.em.SetFaults(emulator.Faults{MalformedNext: 1})
	if _, err := e.client.UpdateStatus(ctx); !errors.Is(err, brapi.ErrMalformed) {
		t.Fatalf("want a malformed status, got %v", err)
	}
	e.em.SetFaults(emulator.Faults{MalformedNext: 1})
	if _, err := e.client.VersionLock(ctx); !errors.Is(err, brapi.ErrMalformed) {
		t.Fatalf("want malformed settings, got %v", err)
	}

	// Well-formed JSON with values the API never sends.
	for _, tc := range []struct {
		path, body, want string
		call             func() error
	}{
		{"/os", `{"version_id": ""}`, "version_id", func() error { _, err := e.client.OS(ctx); return err }},
		{"/os", `{"version_id": "one"}`, "version_id", func() error { _, err := e.client.OS(ctx); return err }},
		{"/updates/status", `{"update_state": "Bogus", "available_updates": []}`, "update_state", func() error { _, err := e.client.UpdateStatus(ctx); return err }},
		{"/updates/status", `{"update_state": "Available", "available_updates": [], "chosen_update": {"version": "x"}}`, "chosen_update", func() error { _, err := e.client.UpdateStatus(ctx); return err }},
		{"/updates/status", `{"update_state": "Idle", "available_updates": [], "most_recent_command": {"cmd_type": "reboot", "cmd_status": "Success", "timestamp": "2026-01-02T03:04:05Z"}}`, "cmd_type", func() error { _, err := e.client.UpdateStatus(ctx); return err }},
		{"/updates/status", `[]`, "malformed", func() error { _, err := e.client.UpdateStatus(ctx); return err }},
	} {
		e.client = brapi.New(brapi.Options{SocketPath: serveOnce(t, tc.path, tc.body), Clock: e.clock})
		err := tc.call()
		if !errors.Is(err, brapi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s answering %s: want a malformed error naming %q, got %v", tc.path, tc.body, tc.want, err)
		}
	}
}

// serveOnce serves body (200, JSON) at path on a new socket.
func serveOnce(t *testing.T, path, body string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	return serveHandler(t, mux)
}

func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := socketPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

func TestACallThatTimesOutIsRetriedButATimedOutRebootIsNot(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	sock := serveHandler(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	clk := newStepClock()
	c := brapi.New(brapi.Options{SocketPath: sock, Clock: clk, CallTimeout: 20 * time.Millisecond, Retry: brapi.Backoff{Initial: time.Second, Factor: 2, Max: 4 * time.Second, Attempts: 3}})
	_, err := c.OS(t.Context())
	var apiErr *brapi.Error
	if !errors.As(err, &apiErr) || apiErr.Attempts != 3 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want 3 attempts timing out, got %v", err)
	}
	if got, want := clk.sleeps(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("back-off %v, want %v", got, want)
	}
	// A timed-out reboot was sent: never retried.
	clk.reset()
	if err := c.Reboot(t.Context()); !errors.As(err, &apiErr) || apiErr.Attempts != 1 {
		t.Fatalf("want one timed-out reboot attempt, got %v", err)
	}
}

func TestACanceledContextEndsTheRetriesWithAnErrorNamingTheCall(t *testing.T) {
	e := newEnv(t, emulator.Config{Faults: emulator.Faults{DropNext: 100}})
	ctx, cancel := context.WithCancel(t.Context())
	e.clock.onSleep = func(int, time.Duration) { cancel() }
	_, err := e.client.OS(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "GET /os") {
		t.Fatalf("want a canceled GET /os, got %v", err)
	}
}

// loseFirstAnswer passes requests to the emulator but drops the connection
// after the first one to path was processed: the answer is lost, the effect
// is not.
func loseFirstAnswer(t *testing.T, em *emulator.Emulator, path string) string {
	t.Helper()
	var once sync.Once
	h := em.Handler()
	return serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lost := false
		if r.URL.Path == path {
			once.Do(func() { lost = true })
		}
		if !lost {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	}))
}

func TestALostAnswerIsRetriedWhereTheEffectCanBeCheckedButNotForAReboot(t *testing.T) {
	ctx := t.Context()
	t.Run("commit", func(t *testing.T) {
		e := newEnv(t, emulator.Config{})
		c := brapi.New(brapi.Options{SocketPath: loseFirstAnswer(t, e.em, "/tx/commit_and_apply"), Clock: e.clock})
		if err := c.SetVersionLock(ctx, "1.21.0"); err != nil {
			t.Fatalf("a retried commit that finds its change committed must succeed: %v", err)
		}
		if st := e.em.State(); st.VersionLock != "1.21.0" || len(st.Pending) != 0 {
			t.Errorf("lock %q pending %v", st.VersionLock, st.Pending)
		}
	})
	t.Run("activate", func(t *testing.T) {
		e := newEnv(t, emulator.Config{Offered: []string{"1.21.0"}})
		mustRun(t, e.client.RefreshUpdates, e.client.PrepareUpdate)
		c := brapi.New(brapi.Options{SocketPath: loseFirstAnswer(t, e.em, "/actions/activate-update"), Clock: e.clock})
		if s, err := c.ActivateUpdate(ctx); err != nil || s.UpdateState != brapi.StateReady {
			t.Fatalf("a retried activate that meets 409 in Ready must succeed: %+v, %v", s, err)
		}
	})
	t.Run("reboot", func(t *testing.T) {
		e := newEnv(t, emulator.Config{})
		c := brapi.New(brapi.Options{SocketPath: loseFirstAnswer(t, e.em, "/actions/reboot"), Clock: e.clock})
		if err := c.Reboot(ctx); err == nil {
			t.Fatal("a reboot whose answer was lost must be reported, not retried")
		}
		if err := e.em.WaitForReboots(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if st := e.em.State(); st.RebootRequests != 1 || st.Reboots != 1 {
			t.Errorf("requests %d reboots %d; want exactly one", st.RebootRequests, st.Reboots)
		}
	})
}

func TestSetVersionLock(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, emulator.Config{Faults: emulator.Faults{DropNext: 1}})
	if err := e.client.SetVersionLock(ctx, "banana"); err == nil || !strings.Contains(err.Error(), "invalid version-lock") {
		t.Fatalf("want a rejected lock, got %v", err)
	}
	if st := e.em.State(); len(st.Pending) != 0 || st.Faults.DropNext != 1 {
		t.Fatal("an invalid lock reached the API")
	}
	for _, lock := range []string{"v1.21.0", "1.22", brapi.VersionLockLatest} {
		if err := e.client.SetVersionLock(ctx, lock); err != nil {
			t.Fatal(err)
		}
		if got, err := e.client.VersionLock(ctx); err != nil || got != lock {
			t.Errorf("VersionLock = %q, %v; want %q", got, err, lock)
		}
	}
	// The change is staged in the client's own transaction, so a pending
	// change in the default transaction is not committed with it.
	if st := e.em.State(); len(st.Pending) != 0 {
		t.Errorf("pending after commit: %v", st.Pending)
	}
	// Someone else changed the lock between our PATCH and a lost commit
	// answer: the 422 is reported.
	e2 := newEnv(t, emulator.Config{})
	c := brapi.New(brapi.Options{SocketPath: loseFirstAnswer(t, e2.em, "/tx/commit_and_apply"), Clock: e2.clock})
	e2.clock.onSleep = func(n int, _ time.Duration) {
		if n == 1 {
			if code := rawPatchLock(t, socketOf(e2), "1.19.0"); code != http.StatusNoContent {
				t.Errorf("raw patch %d", code)
			}
			if code := rawPost(t, socketOf(e2), "/tx/commit_and_apply"); code != http.StatusOK {
				t.Errorf("raw commit %d", code)
			}
		}
	}
	err := c.SetVersionLock(ctx, "1.21.0")
	if brapi.StatusCode(err) != http.StatusUnprocessableEntity {
		t.Fatalf("want the 422 reported when the lock is not ours, got %v", err)
	}
}

func rawPatchLock(t *testing.T, socket, lock string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(http.MethodPatch, "http://localhost/settings", strings.NewReader(`{"updates":{"version-lock":"`+lock+`"}}`))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestTheClientUsesRunAPISockByDefault(t *testing.T) {
	if got := brapi.New(brapi.Options{}).SocketPath(); got != "/run/api.sock" {
		t.Errorf("default socket %q", got)
	}
}

func TestPreparedVersionReadsWhatUpdogSaidItWrote(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		r       *brapi.CommandResult
		want    string
		wantOK  bool
		comment string
	}{
		{&brapi.CommandResult{CmdType: brapi.CommandPrepare, CmdStatus: brapi.CommandSuccess, Stderr: str("Starting update to 1.21.0\n")}, "1.21.0", true, "wrote 1.21.0"},
		{&brapi.CommandResult{CmdType: brapi.CommandPrepare, CmdStatus: brapi.CommandSuccess, Stderr: str("No update required\n")}, "", true, "wrote nothing"},
		{&brapi.CommandResult{CmdType: brapi.CommandPrepare, CmdStatus: brapi.CommandSuccess, Stderr: str("")}, "", false, "says neither"},
		{&brapi.CommandResult{CmdType: brapi.CommandPrepare, CmdStatus: brapi.CommandFailed, Stderr: str("Starting update to 1.21.0\n")}, "", false, "failed"},
		{&brapi.CommandResult{CmdType: brapi.CommandRefresh, CmdStatus: brapi.CommandSuccess, Stderr: str("")}, "", false, "not a prepare"},
		{nil, "", false, "no command"},
	} {
		v, ok := (&brapi.UpdateStatus{MostRecentCommand: tc.r}).PreparedVersion()
		if v != tc.want || ok != tc.wantOK {
			t.Errorf("%s: PreparedVersion() = %q, %v; want %q, %v", tc.comment, v, ok, tc.want, tc.wantOK)
		}
	}
}
