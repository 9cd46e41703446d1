package emulator

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "brapiem") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func start(t *testing.T, cfg Config) *Emulator {
	t.Helper()
	if cfg.SocketPath == "" {
		cfg.SocketPath = filepath.Join(tempDir(t), "api.sock")
	}
	if cfg.Version == "" {
		cfg.Version = "1.20.0"
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// do sends a raw request and returns status and body.
func do(t *testing.T, e *Emulator, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.cfg.SocketPath)
	}}}
	req, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func expect(t *testing.T, e *Emulator, method, path, body string, want int) string {
	t.Helper()
	code, got := do(t, e, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, got, want)
	}
	return got
}

func status(t *testing.T, e *Emulator) brapi.UpdateStatus {
	t.Helper()
	var s brapi.UpdateStatus
	if err := json.Unmarshal([]byte(expect(t, e, "GET", "/updates/status", "", 200)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTheEmulatorAnswersWithTheFieldsAndCodesOfTheBottlerocketAPI(t *testing.T) {
	e := start(t, Config{Offered: []string{"1.21.0"}, Variant: "aws-k8s-1.33", Arch: "aarch64"})
	if got := expect(t, e, "GET", "/updates/status", "", 404); !strings.Contains(got, "uninitialized") {
		t.Errorf("404 body %q", got)
	}
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	var raw map[string]any
	if err := json.Unmarshal([]byte(expect(t, e, "GET", "/updates/status", "", 200)), &raw); err != nil {
		t.Fatal(err)
	}
	// The dispatcher's snake_case field names, versions as strings.
	for _, k := range []string{"update_state", "available_updates", "chosen_update", "active_partition", "staging_partition", "most_recent_command"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("status lacks %q: %v", k, raw)
		}
	}
	if got := raw["chosen_update"]; !jsonEqual(got, map[string]any{"arch": "aarch64", "version": "1.21.0", "variant": "aws-k8s-1.33"}) {
		t.Errorf("chosen_update %v", got)
	}
	cmd := raw["most_recent_command"].(map[string]any)
	if cmd["cmd_type"] != "refresh" || cmd["cmd_status"] != "Success" || cmd["exit_status"] != 0.0 {
		t.Errorf("most_recent_command %v", cmd)
	}
	if _, err := time.Parse(time.RFC3339Nano, cmd["timestamp"].(string)); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	if raw["staging_partition"] != nil || raw["update_state"] != "Available" {
		t.Errorf("status %v", raw)
	}
	if got := expect(t, e, "GET", "/os", "", 200); !strings.Contains(got, `"version_id":"1.20.0"`) {
		t.Errorf("/os %s", got)
	}
	if got := expect(t, e, "GET", "/settings?keys=settings.updates.version-lock", "", 200); got != `{"updates":{"version-lock":"latest"}}` {
		t.Errorf("/settings %s", got)
	}
	expect(t, e, "GET", "/actions/reboot", "", 405)
	expect(t, e, "DELETE", "/settings", "", 405)
	expect(t, e, "GET", "/services", "", 404)
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestVersionLockChoosesUpdate(t *testing.T) {
	for _, tc := range []struct {
		lock, want string
	}{
		{"latest", "1.22.0"},
		{"1.21.0", "1.21.0"},
		{"v1.21.0", "1.21.0"},
		{"1.19.0", "1.19.0"}, // a lock may go back
		{"1.20.0", ""},       // the running version: nothing to do
		{"1.23.0", ""},       // not offered
	} {
		e := start(t, Config{Offered: []string{"1.19.0", "1.21.0", "1.22.0", "1.22.0-rc1"}, VersionLock: tc.lock})
		expect(t, e, "POST", "/actions/refresh-updates", "", 204)
		s := status(t, e)
		if s.ChosenVersion() != tc.want {
			t.Errorf("lock %s: chosen %q, want %q", tc.lock, s.ChosenVersion(), tc.want)
		}
		wantState := brapi.StateAvailable
		if tc.want == "" {
			wantState = brapi.StateIdle
		}
		if s.UpdateState != wantState {
			t.Errorf("lock %s: state %s, want %s", tc.lock, s.UpdateState, wantState)
		}
		if !slices.Equal(s.AvailableUpdates, []string{"1.22.0", "1.22.0-rc1", "1.21.0", "1.19.0"}) {
			t.Errorf("available %v", s.AvailableUpdates)
		}
	}
}

func TestTheEmulatorAllowsEachUpdateActionOnlyInTheStatesBottlerocketDoes(t *testing.T) {
	e := start(t, Config{Offered: []string{"1.21.0"}})
	// Nothing may happen before an update is chosen.
	expect(t, e, "POST", "/actions/prepare-update", "", 409)
	expect(t, e, "POST", "/actions/activate-update", "", 409)
	expect(t, e, "POST", "/actions/deactivate-update", "", 409)
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	expect(t, e, "POST", "/actions/activate-update", "", 409)
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	// Refreshing beyond Available keeps the state.
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.UpdateState != brapi.StateStaged {
		t.Fatalf("refresh in Staged moved to %s", s.UpdateState)
	}
	// Prepare may run again in Staged.
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	expect(t, e, "POST", "/actions/deactivate-update", "", 409)
	expect(t, e, "POST", "/actions/activate-update", "", 204)
	expect(t, e, "POST", "/actions/prepare-update", "", 409)
	expect(t, e, "POST", "/actions/activate-update", "", 409)
	// The offer is withdrawn: a refresh in Ready keeps Ready, chooses nothing.
	e.mu.Lock()
	e.state.Offered = []string{}
	e.mu.Unlock()
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	s := status(t, e)
	if s.UpdateState != brapi.StateReady || s.ChosenUpdate != nil || s.ActivatedVersion() != "1.21.0" {
		t.Fatalf("refresh in Ready: %+v", s)
	}
	expect(t, e, "POST", "/actions/deactivate-update", "", 204)
	if s := status(t, e); s.UpdateState != brapi.StateStaged || s.ActivatedVersion() != "" {
		t.Fatalf("after deactivate: %+v", s)
	}
	// Prepare with nothing chosen: 404.
	expect(t, e, "POST", "/actions/prepare-update", "", 404)
}

func TestCommandRunsForItsDelay(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, Config{Offered: []string{"1.21.0"}, Clock: clk, Delays: Delays{Refresh: time.Minute}})
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	expect(t, e, "GET", "/updates/status", "", 423)
	expect(t, e, "POST", "/actions/prepare-update", "", 423)
	if st := e.State(); st.InFlight == nil || st.InFlight.Cmd != brapi.CommandRefresh {
		t.Fatalf("in flight: %+v", st.InFlight)
	}
	clk.Step(59 * time.Second)
	expect(t, e, "GET", "/updates/status", "", 423)
	clk.Step(time.Second)
	s := status(t, e)
	if s.UpdateState != brapi.StateAvailable || !s.MostRecentCommand.Timestamp.Equal(clk.Now()) {
		t.Fatalf("after the delay: %+v", s)
	}
	// Two commands at the same instant get distinct timestamps.
	e.SetDelays(Delays{})
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s2 := status(t, e); !s2.MostRecentCommand.Timestamp.After(s.MostRecentCommand.Timestamp) {
		t.Errorf("timestamps %v then %v", s.MostRecentCommand.Timestamp, s2.MostRecentCommand.Timestamp)
	}
}

// TestAPrepareHoldsTheUpdateLockForItsDelayAsBottlerocketDoes: in
// bottlerocket-core-kit, thar-be-updates (sources/api/thar-be-updates/src/main.rs,
// run and fork_and_return!) takes the update lock before anything else and
// leaves it with the forked child that runs updog update-image, so the
// lock is held until the download ends, whoever asked for it and whether
// that caller still lives; the API server answers 423 to GET /updates/status
// (sources/api/apiserver/src/server/mod.rs get_update_status, try_lock_shared:
// UpdateShareLock) and to every update action (controller.rs
// dispatch_update_command: UpdateLockHeld) meanwhile. /os and the settings
// do not take the lock.
func TestAPrepareHoldsTheUpdateLockForItsDelayAsBottlerocketDoes(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, Config{Offered: []string{"1.21.0"}, Clock: clk, Delays: Delays{Prepare: 10 * time.Minute}})
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	clk.Step(10*time.Minute - time.Second)
	expect(t, e, "GET", "/updates/status", "", 423)
	for _, action := range []string{"refresh-updates", "prepare-update", "activate-update", "deactivate-update"} {
		expect(t, e, "POST", "/actions/"+action, "", 423)
	}
	expect(t, e, "GET", "/os", "", 200)
	expect(t, e, "GET", "/settings?keys=settings.updates.version-lock", "", 200)
	expect(t, e, "PATCH", "/settings?tx=user", `{"updates": {"version-lock": "1.20.0"}}`, 204)
	expect(t, e, "POST", "/tx/commit_and_apply?tx=user", "", 200)
	clk.Step(time.Second)
	s := status(t, e)
	if s.UpdateState != brapi.StateStaged || s.StagedVersion() != "1.21.0" || s.MostRecentCommand.CmdType != brapi.CommandPrepare {
		t.Fatalf("after the prepare's delay: %+v, want 1.21.0 Staged by the prepare", s)
	}
}

func TestTheEmulatorRefusesBadSettingsAndCommitsEachTransactionAlone(t *testing.T) {
	e := start(t, Config{})
	for _, body := range []string{
		`not json`,
		`{"motd": "hi"}`,
		`{"updates": {"ignore-waves": "yes"}}`,
		`{"updates": {"seed": 3}}`,
		`{"updates": {}}`,
		`{"updates": {"version-lock": 3}}`,
		`{"updates": {"version-lock": "banana"}}`,
	} {
		if got := expect(t, e, "PATCH", "/settings", body, 400); got == "" {
			t.Errorf("PATCH %s: 400 without a reason", body)
		}
	}
	expect(t, e, "POST", "/tx/commit_and_apply", "", 422)
	expect(t, e, "PATCH", "/settings?tx=mine", `{"updates": {"version-lock": "1.21.0"}}`, 204)
	// Another transaction commits nothing of ours.
	expect(t, e, "POST", "/tx/commit_and_apply", "", 422)
	if got := expect(t, e, "POST", "/tx/commit_and_apply?tx=mine", "", 200); got != `["settings.updates.version-lock"]` {
		t.Errorf("commit answered %s", got)
	}
	if st := e.State(); st.VersionLock != "1.21.0" {
		t.Errorf("lock %q", st.VersionLock)
	}
}

func TestStateFileSurvivesRestart(t *testing.T) {
	dir := tempDir(t)
	cfg := Config{SocketPath: filepath.Join(dir, "api.sock"), StateFile: filepath.Join(dir, "state.json"), Version: "1.20.0", Offered: []string{"1.21.0"}}
	e := start(t, cfg)
	expect(t, e, "PATCH", "/settings", `{"updates": {"version-lock": "1.21.0"}}`, 204)
	expect(t, e, "POST", "/tx/commit_and_apply", "", 200)
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	expect(t, e, "POST", "/actions/activate-update", "", 204)
	e.Close()

	// Restarted with other flags: the file wins for the host, the flags'
	// offer is added.
	cfg.Version = "1.0.0"
	cfg.Offered = []string{"1.22.0"}
	rebooted := make(chan RebootEvent, 1)
	cfg.RebootHook = func(_ context.Context, ev RebootEvent) error { rebooted <- ev; return nil }
	e2 := start(t, cfg)
	st := e2.State()
	if st.Running != "1.20.0" || st.VersionLock != "1.21.0" || st.Status == nil || st.Status.UpdateState != brapi.StateReady || !slices.Equal(st.Offered, []string{"1.22.0", "1.21.0"}) {
		t.Fatalf("restored state: %+v", st)
	}
	expect(t, e2, "POST", "/actions/reboot", "", 204)
	if ev := <-rebooted; ev.To != "1.21.0" {
		t.Errorf("rebooting into %s", ev.To)
	}
	if err := e2.WaitForReboots(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e2.Close()
	e3 := start(t, cfg)
	if st := e3.State(); st.Running != "1.21.0" || st.Reboots != 1 || st.Status != nil {
		t.Errorf("after reboot and restart: running %s reboots %d status %+v", st.Running, st.Reboots, st.Status)
	}

	// A corrupt state file is an error, not a silent reset.
	if err := os.WriteFile(cfg.StateFile, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "state.json") {
		t.Errorf("corrupt state file: %v", err)
	}
}

func TestControlAPI(t *testing.T) {
	e := start(t, Config{Faults: Faults{DropNext: 5}})
	// Control paths are exempt from faults.
	var st State
	if err := json.Unmarshal([]byte(expect(t, e, "POST", "/emulator/offer", `{"versions": ["1.21.0", "v1.20.5"]}`, 200)), &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Offered, []string{"1.21.0", "v1.20.5"}) {
		t.Errorf("offered %v", st.Offered)
	}
	expect(t, e, "POST", "/emulator/offer", `{"versions": ["1.21.0"]}`, 200)
	if got := e.State().Offered; len(got) != 2 {
		t.Errorf("offering twice duplicated: %v", got)
	}
	expect(t, e, "POST", "/emulator/offer", `{"versions": ["soon"]}`, 400)
	expect(t, e, "POST", "/emulator/offer", `{}`, 400)
	expect(t, e, "PUT", "/emulator/faults", `{"prepareFails": true, "nope": 1}`, 400)
	expect(t, e, "PUT", "/emulator/faults", `{"prepareFails": true, "neverComesUp": true}`, 200)
	if got := expect(t, e, "GET", "/emulator/faults", "", 200); !strings.Contains(got, `"prepareFails":true`) || strings.Contains(got, "dropNext") {
		t.Errorf("faults %s", got)
	}
	if got := expect(t, e, "GET", "/emulator/state", "", 200); !strings.Contains(got, `"running":"1.20.0"`) {
		t.Errorf("state %s", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	sock := filepath.Join(tempDir(t), "api.sock")
	for _, cfg := range []Config{
		{Version: "1.20.0"},
		{SocketPath: sock},
		{SocketPath: sock, Version: "one"},
		{SocketPath: sock, Version: "1.20.0", Offered: []string{"x"}},
		{SocketPath: sock, Version: "1.20.0", VersionLock: "newest"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestARefusedRebootAnswers500AndDoesNotReboot: Bottlerocket's API answers a
// reboot it could not start with an error status, and the host stays up.
func TestARefusedRebootAnswers500AndDoesNotReboot(t *testing.T) {
	rebooted := make(chan RebootEvent, 2)
	e := start(t, Config{Faults: Faults{RefuseRebootNext: 1},
		RebootHook: func(_ context.Context, ev RebootEvent) error { rebooted <- ev; return nil }})
	if body := expect(t, e, "POST", "/actions/reboot", "", 500); !strings.Contains(body, "inhibitor") {
		t.Errorf("refusal body %q, want it to say why", body)
	}
	if st := e.State(); st.RebootRequests != 0 || st.RebootsRefused != 1 || st.Rebooting {
		t.Fatalf("after a refusal: %+v", st)
	}
	expect(t, e, "POST", "/actions/reboot", "", 204)
	if err := e.WaitForReboots(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if st := e.State(); st.RebootRequests != 1 || st.Reboots != 1 {
		t.Errorf("after the second request: %d accepted, %d reboots; want 1 and 1", st.RebootRequests, st.Reboots)
	}
}

// A restart right after a start, before the first server's goroutine ran,
// keeps the restarted server's socket: that goroutine used to close its
// listener only once it ran, after the restart, and the close unlinked the
// path the restarted server listens on, so every call after the restart
// failed with "no such file or directory".
func TestARestartRightAfterAStartKeepsItsSocket(t *testing.T) {
	for i := range 100 {
		e := start(t, Config{})
		e.Stop()
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		// A late goroutine of the first server gets its chance to run.
		time.Sleep(2 * time.Millisecond)
		if _, err := os.Stat(e.cfg.SocketPath); err != nil {
			t.Fatalf("restart %d: the restarted server's socket: %v", i, err)
		}
		e.Close()
	}
}

// commit sets settings.updates in transaction "t" and commits it.
func commit(t *testing.T, e *Emulator, updates string) {
	t.Helper()
	expect(t, e, "PATCH", "/settings?tx=t", `{"updates": `+updates+`}`, 204)
	expect(t, e, "POST", "/tx/commit_and_apply?tx=t", "", 200)
}

// TestAPrepareStagesWhatTheLockChoosesAtPrepareTime: in bottlerocket-core-kit,
// prepare (sources/api/thar-be-updates/src/main.rs, prepare) runs `updog
// update-image`, which resolves its target again from the lock and waves it
// reads then (sources/updater/updog/src/main.rs, main_inner and
// update_required), and records the last refresh's chosen_update as staged
// (set_staging_partition_image_info) whatever updog wrote. When updog finds
// nothing to do it prints "No update required" and exits 0: the status says
// Staged with nothing new on the inactive partition, and the host boots
// what really is there.
func TestAPrepareStagesWhatTheLockChoosesAtPrepareTime(t *testing.T) {
	rebooted := make(chan RebootEvent, 1)
	e := start(t, Config{Offered: []string{"1.21.0", "1.22.0"}, VersionLock: "1.21.0",
		RebootHook: func(_ context.Context, ev RebootEvent) error { rebooted <- ev; return nil }})
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	commit(t, e, `{"version-lock": "1.22.0"}`)
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	s := status(t, e)
	if s.StagedVersion() != "1.21.0" || !strings.Contains(*s.MostRecentCommand.Stderr, "Starting update to 1.22.0") {
		t.Fatalf("after a prepare under another lock than the refresh's: staged %q, stderr %q; want the status to say 1.21.0 and updog to name 1.22.0",
			s.StagedVersion(), *s.MostRecentCommand.Stderr)
	}
	expect(t, e, "POST", "/actions/activate-update", "", 204)
	expect(t, e, "POST", "/actions/reboot", "", 204)
	if ev := <-rebooted; ev.To != "1.22.0" {
		t.Fatalf("the host boots %s, want 1.22.0: the image updog wrote", ev.To)
	}
	if err := e.WaitForReboots(t.Context(), 1); err != nil {
		t.Fatal(err)
	}

	// Nothing to do: the lock names the running version.
	e2 := start(t, Config{Offered: []string{"1.21.0"}})
	expect(t, e2, "POST", "/actions/refresh-updates", "", 204)
	commit(t, e2, `{"version-lock": "1.20.0"}`)
	expect(t, e2, "POST", "/actions/prepare-update", "", 204)
	s = status(t, e2)
	if s.UpdateState != brapi.StateStaged || s.StagedVersion() != "1.21.0" || s.MostRecentCommand.CmdStatus != brapi.CommandSuccess ||
		!strings.Contains(*s.MostRecentCommand.Stderr, "No update required") {
		t.Fatalf("a prepare with nothing to do: %+v, stderr %q; want Staged 1.21.0, Success, \"No update required\"", s, *s.MostRecentCommand.Stderr)
	}
	if got := e2.State().Inactive; got != "" {
		t.Errorf("the inactive partition holds %q after a prepare that wrote nothing", got)
	}
}

// TestACommittedSettingReachesTheUpdaterOnlyOnceApplied: the API server's
// commit_and_apply (sources/api/apiserver/src/server/mod.rs,
// commit_transaction_and_apply; controller.rs apply_changes) starts
// thar-be-settings --daemon and answers without waiting for it, and updog and
// thar-be-updates read the lock from the files it renders (updog's
// load_config; thar-be-updates' status.rs update_available_updates): a
// refresh right after a commit may still use the old lock, while GET
// /settings already answers the new one.
func TestACommittedSettingReachesTheUpdaterOnlyOnceApplied(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, Config{Offered: []string{"1.21.0", "1.22.0"}, Clock: clk, Delays: Delays{SettingsApply: 3 * time.Second}})
	commit(t, e, `{"version-lock": "1.21.0"}`)
	if got := expect(t, e, "GET", "/settings", "", 200); !strings.Contains(got, `"version-lock":"1.21.0"`) {
		t.Errorf("GET /settings after the commit: %s", got)
	}
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.ChosenVersion() != "1.22.0" {
		t.Fatalf("a refresh before the apply chose %q, want 1.22.0 under the old lock (latest)", s.ChosenVersion())
	}
	clk.Step(3 * time.Second)
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.ChosenVersion() != "1.21.0" {
		t.Fatalf("a refresh after the apply chose %q, want 1.21.0", s.ChosenVersion())
	}
}

// TestAFailedPrepareFromStagedLeavesNothingToActivate: updog's update_image
// (sources/updater/updog/src/main.rs) clears the inactive partition set
// (signpost's clear_inactive, sources/updater/signpost/src/state.rs: tries
// left 0) and writes that out before it downloads; a prepare that fails
// after that leaves the status as it was (thar-be-updates' prepare returns
// before set_staging_partition_image_info, and drive_state_machine keeps the
// state), Staged with the old image, but activate (`updog update-apply`,
// signpost's upgrade_to_inactive) then fails: "has not been marked valid".
func TestAFailedPrepareFromStagedLeavesNothingToActivate(t *testing.T) {
	e := start(t, Config{Offered: []string{"1.21.0"}})
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	e.SetFaults(Faults{PrepareFails: true})
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	e.SetFaults(Faults{})
	s := status(t, e)
	if s.UpdateState != brapi.StateStaged || s.StagedVersion() != "1.21.0" {
		t.Fatalf("after a failed re-prepare: %+v, want Staged 1.21.0 as before", s)
	}
	expect(t, e, "POST", "/actions/activate-update", "", 204)
	s = status(t, e)
	if r := s.MostRecentCommand; r.CmdType != brapi.CommandActivate || r.CmdStatus != brapi.CommandFailed || !strings.Contains(*r.Stderr, "not been marked valid") {
		t.Fatalf("activate after a failed re-prepare: %+v, want Failed: the inactive partition is not valid", r)
	}
	if s.UpdateState != brapi.StateStaged {
		t.Errorf("state %s after the failed activate, want Staged", s.UpdateState)
	}
	// A prepare that succeeds makes it activatable again.
	expect(t, e, "POST", "/actions/prepare-update", "", 204)
	expect(t, e, "POST", "/actions/activate-update", "", 204)
	if s := status(t, e); s.UpdateState != brapi.StateReady {
		t.Errorf("after a new prepare and activate: %s, want Ready", s.UpdateState)
	}
}

// TestIgnoreWavesOffersAVersionBeforeItsWave: updog's applicable_updates
// (sources/updater/updog/src/main.rs) keeps an update only when its version
// is at most its max_version and, unless ignore_waves (rendered from
// settings.updates.ignore-waves into updog.toml, packages/os/updog-toml),
// when the host's wave reached it (update_ready). The latest choice
// (update_required; thar-be-updates' status.rs get_latest_update) also
// takes an update when the running version is above max_version.
func TestIgnoreWavesOffersAVersionBeforeItsWave(t *testing.T) {
	e := start(t, Config{Offered: []string{"1.21.0"}, VersionLock: "1.22.0"})
	if err := e.Publish("1.22.0"); err != nil {
		t.Fatal(err)
	}
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.ChosenVersion() != "" || slices.Contains(s.AvailableUpdates, "1.22.0") {
		t.Fatalf("before the wave: chosen %q, available %v; want 1.22.0 neither", s.ChosenVersion(), s.AvailableUpdates)
	}
	if got := expect(t, e, "GET", "/settings", "", 200); !strings.Contains(got, `"ignore-waves":false`) {
		t.Errorf("GET /settings: %s, want ignore-waves false", got)
	}
	commit(t, e, `{"ignore-waves": true}`)
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.ChosenVersion() != "1.22.0" {
		t.Fatalf("with ignore-waves: chosen %q, want 1.22.0", s.ChosenVersion())
	}
	commit(t, e, `{"ignore-waves": false}`)
	if err := e.Offer("1.22.0"); err != nil { // its wave reached the host
		t.Fatal(err)
	}
	expect(t, e, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, e); s.ChosenVersion() != "1.22.0" || !slices.Equal(s.AvailableUpdates, []string{"1.22.0", "1.21.0"}) {
		t.Fatalf("in its wave: chosen %q, available %v", s.ChosenVersion(), s.AvailableUpdates)
	}

	// max_version: nothing above it is offered; a host above it goes back
	// to the newest version at most it.
	m := start(t, Config{Version: "1.23.0", Offered: []string{"1.21.0", "1.22.0"}, MaxVersion: "1.21.0"})
	expect(t, m, "POST", "/actions/refresh-updates", "", 204)
	if s := status(t, m); s.ChosenVersion() != "1.21.0" || !slices.Equal(s.AvailableUpdates, []string{"1.21.0"}) {
		t.Fatalf("under max_version 1.21.0 on 1.23.0: chosen %q, available %v; want 1.21.0 and [1.21.0]", s.ChosenVersion(), s.AvailableUpdates)
	}
}

// TestALockOnTheVersionAHostLeftBootsItAgain: the repository keeps the
// version the host updated from (updog's applicable_updates filters no
// release out by age), and a lock on an older version chooses it, as
// update_required and update_available_updates do: the rollback path.
func TestALockOnTheVersionAHostLeftBootsItAgain(t *testing.T) {
	dir := tempDir(t)
	e := start(t, Config{SocketPath: filepath.Join(dir, "api.sock"), Version: "1.20.0", Offered: []string{"1.21.0"}})
	update := func(lock string, reboots int) {
		t.Helper()
		expect(t, e, "PATCH", "/settings", `{"updates": {"version-lock": "`+lock+`"}}`, 204)
		expect(t, e, "POST", "/tx/commit_and_apply", "", 200)
		expect(t, e, "POST", "/actions/refresh-updates", "", 204)
		if s := status(t, e); s.ChosenVersion() != lock {
			t.Fatalf("under lock %s: chosen %q, available %v", lock, s.ChosenVersion(), s.AvailableUpdates)
		}
		expect(t, e, "POST", "/actions/prepare-update", "", 204)
		expect(t, e, "POST", "/actions/activate-update", "", 204)
		expect(t, e, "POST", "/actions/reboot", "", 204)
		if err := e.WaitForReboots(t.Context(), reboots); err != nil {
			t.Fatal(err)
		}
	}
	update("1.21.0", 1)
	if st := e.State(); st.Running != "1.21.0" || !slices.Equal(st.Offered, []string{"1.21.0", "1.20.0"}) {
		t.Fatalf("after the update: running %s, offered %v; want 1.21.0 and [1.21.0 1.20.0]", st.Running, st.Offered)
	}
	update("1.20.0", 2)
	if st := e.State(); st.Running != "1.20.0" {
		t.Fatalf("after the rollback: running %s, want 1.20.0", st.Running)
	}
}
