// Package emulator serves an emulated Bottlerocket API (the subset the update
// agent uses, with the real paths, JSON shapes, status codes and update state
// machine) over a Unix socket, so tests, benchmarks and the sandbox run real
// agents without Bottlerocket hosts.
//
// It owns one emulated host: the running version, the versions the update
// repository offers, settings.updates.version-lock, the update dispatcher's
// status and its asynchronous commands, and reboots. It is node-local: a
// reboot runs a caller-provided hook and never touches Kubernetes itself.
// Failures and delays are injectable, and a control API under /emulator/
// (outside Bottlerocket's paths) offers versions and sets faults at runtime.
package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

// RebootEvent tells the reboot hook what is rebooting.
type RebootEvent struct {
	// From is the running version; To is the version the host boots into
	// (From when nothing is activated or NeverComesUp is set).
	From, To string
	// Reboot is the number of this reboot (1 for the first).
	Reboot int
}

// RebootHook runs when the emulated host reboots, between the shutdown and
// the boot; the API drops every request until it returns. Its error is
// logged; the host boots regardless.
type RebootHook func(ctx context.Context, ev RebootEvent) error

// Config configures an Emulator.
type Config struct {
	// SocketPath is where the API is served (required).
	SocketPath string
	// StateFile, when set, keeps the host's state across emulator restarts;
	// an existing file wins over Version, Variant, Arch and VersionLock.
	StateFile string
	// Version is the running version at the first start.
	Version string
	// Offered are versions the update repository offers (added to the
	// state file's).
	Offered []string
	// BeforeWave are versions the repository publishes whose wave has not
	// reached the host yet (added to the state file's): a refresh lists
	// them only with settings.updates.ignore-waves.
	BeforeWave []string
	// MaxVersion is the repository's max_version ("" for none).
	MaxVersion string
	// VersionLock defaults to "latest".
	VersionLock   string
	Variant, Arch string
	Delays        Delays
	Faults        Faults
	RebootHook    RebootHook
	// Clock times command delays and timestamps (default: real clock).
	Clock clock.Clock
	// Logger defaults to klog.Background().
	Logger *klog.Logger
}

// Emulator is one emulated Bottlerocket host's API.
type Emulator struct {
	cfg    Config
	clock  clock.Clock
	logger klog.Logger

	mu       sync.Mutex
	booted   chan struct{} // closed and replaced at each boot
	state    *State
	lastTime time.Time
	listener net.Listener
	server   *http.Server
	serving  chan struct{} // closed when the server's goroutine returned

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New loads or creates the host's state. Call Start to serve.
func New(cfg Config) (*Emulator, error) {
	if cfg.SocketPath == "" {
		return nil, errors.New("emulator: a socket path is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	logger := klog.Background()
	if cfg.Logger != nil {
		logger = *cfg.Logger
	}
	if err := validateVersions(cfg); err != nil {
		return nil, err
	}
	st, err := loadOrCreateState(cfg, logger)
	if err != nil {
		return nil, err
	}
	for _, v := range cfg.Offered {
		if !slices.ContainsFunc(st.Offered, func(o string) bool { return brapi.SameVersion(o, v) }) {
			st.Offered = append(st.Offered, v)
		}
	}
	sortNewestFirst(st.Offered)
	if st.Offered == nil {
		st.Offered = []string{}
	}
	st.publishLocked(cfg.BeforeWave)
	if cfg.MaxVersion != "" {
		st.MaxVersion = cfg.MaxVersion
	}
	st.Faults = cfg.Faults
	st.Delays = cfg.Delays
	ctx, cancel := context.WithCancel(context.Background())
	e := &Emulator{cfg: cfg, clock: cfg.Clock, logger: logger, state: st, ctx: ctx, cancel: cancel, booted: make(chan struct{})}
	e.saveLocked()
	return e, nil
}

// validateVersions checks every version the configuration names, so that a
// typo fails the start instead of an update.
func validateVersions(cfg Config) error {
	for _, v := range cfg.Offered {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("emulator: offered %w", err)
		}
	}
	for _, v := range cfg.BeforeWave {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("emulator: published %w", err)
		}
	}
	if cfg.MaxVersion != "" {
		if _, err := brapi.ParseVersion(cfg.MaxVersion); err != nil {
			return fmt.Errorf("emulator: max_version %w", err)
		}
	}
	return nil
}

// loadOrCreateState loads the host's state from the state file, as a host
// keeps it across reboots, or creates a host running cfg.Version when there
// is none.
func loadOrCreateState(cfg Config, logger klog.Logger) (*State, error) {
	if cfg.StateFile != "" {
		loaded, err := loadState(cfg.StateFile)
		switch {
		case err == nil:
			logger.Info("Emulator state loaded", "file", cfg.StateFile, "running", loaded.Running, "reboots", loaded.Reboots)
			return loaded, nil
		case errors.Is(err, os.ErrNotExist):
		default:
			return nil, fmt.Errorf("emulator: %w", err)
		}
	}
	if _, err := brapi.ParseVersion(cfg.Version); err != nil {
		return nil, fmt.Errorf("emulator: running %w", err)
	}
	lock := cfg.VersionLock
	if lock == "" {
		lock = brapi.VersionLockLatest
	}
	if err := brapi.ValidateVersionLock(lock); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	st := &State{Running: cfg.Version, Variant: cfg.Variant, Arch: cfg.Arch, VersionLock: lock, Applied: Applied{VersionLock: lock}}
	if st.Variant == "" {
		st.Variant = "aws-k8s-1.33"
	}
	if st.Arch == "" {
		st.Arch = "x86_64"
	}
	return st, nil
}

// Start serves the API on the socket, replacing a stale socket file.
func (e *Emulator) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listener != nil {
		return errors.New("emulator: already serving")
	}
	if err := os.Remove(e.cfg.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("emulator: removing stale socket: %w", err)
	}
	l, err := net.Listen("unix", e.cfg.SocketPath)
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	e.listener = l
	e.server = &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	e.serving = make(chan struct{})
	srv, serving := e.server, e.serving
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(serving)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.logger.Error(err, "Emulator stopped serving")
		}
	}()
	e.logger.Info("Emulated Bottlerocket API serving", "socket", e.cfg.SocketPath, "running", e.state.Running, "offered", e.state.Offered)
	return nil
}

// Stop stops serving (connections are then refused, as while the API server
// restarts) and keeps the state; Start serves again.
func (e *Emulator) Stop() {
	e.mu.Lock()
	srv, serving := e.server, e.serving
	e.server, e.listener, e.serving = nil, nil, nil
	e.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		// A server whose goroutine has not reached Serve yet is not closed
		// by Close: Serve closes its listener when it runs, which unlinks
		// the socket path. Wait for it, or that late close would remove the
		// socket of the next Start.
		<-serving
		_ = os.Remove(e.cfg.SocketPath)
	}
}

// Close stops serving, cancels a running reboot hook and waits for it.
func (e *Emulator) Close() {
	e.Stop()
	e.cancel()
	e.wg.Wait()
}

// State returns a copy of the emulated host's state.
func (e *Emulator) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settleLocked()
	return e.state.clone()
}

// Running is the running version.
func (e *Emulator) Running() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state.Running
}

// RebootRequests is how many reboot requests the host accepted (cheaper than
// State for a driver that asks after every call).
func (e *Emulator) RebootRequests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state.RebootRequests
}

// Activated is the version the next boot runs when it is not the running
// one ("" otherwise), as of the last command that finished: the image
// really written, which the status's staging_partition may not name.
func (e *Emulator) Activated() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v := e.state.nextBoot(); v != "" && !brapi.SameVersion(v, e.state.Running) {
		return v
	}
	return ""
}

// WaitForReboots waits until the host completed at least n reboots.
func (e *Emulator) WaitForReboots(ctx context.Context, n int) error {
	for {
		e.mu.Lock()
		done, booted := e.state.Reboots >= n, e.booted
		e.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for reboot %d: %w", n, ctx.Err())
		case <-booted:
		}
	}
}

// Offer adds versions to what the update repository offers; the next
// refresh sees them.
func (e *Emulator) Offer(versions ...string) error {
	for _, v := range versions {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("offer: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range versions {
		if !slices.ContainsFunc(e.state.Offered, func(o string) bool { return brapi.SameVersion(o, v) }) {
			e.state.Offered = append(e.state.Offered, v)
		}
		// Its wave reached the host.
		e.state.BeforeWave = slices.DeleteFunc(e.state.BeforeWave, func(o string) bool { return brapi.SameVersion(o, v) })
	}
	sortNewestFirst(e.state.Offered)
	e.logger.Info("Versions offered", "offered", e.state.Offered)
	e.saveLocked()
	return nil
}

// Publish adds versions the update repository publishes but whose wave has
// not reached the host: a refresh lists them only with
// settings.updates.ignore-waves, until Offer offers them.
func (e *Emulator) Publish(versions ...string) error {
	for _, v := range versions {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.publishLocked(versions)
	e.logger.Info("Versions published before this host's wave", "beforeWave", e.state.BeforeWave)
	e.saveLocked()
	return nil
}

// SetMaxVersion sets the repository's max_version ("" for none).
func (e *Emulator) SetMaxVersion(v string) error {
	if v != "" {
		if _, err := brapi.ParseVersion(v); err != nil {
			return fmt.Errorf("max_version: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.MaxVersion = v
	e.saveLocked()
	return nil
}

// SetFaults replaces the injected faults.
func (e *Emulator) SetFaults(f Faults) {
	e.UpdateFaults(func(cur *Faults) { *cur = f })
}

// UpdateFaults changes the injected faults under the emulator's lock.
func (e *Emulator) UpdateFaults(change func(*Faults)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	change(&e.state.Faults)
	e.logger.Info("Faults set", "faults", e.state.Faults)
	e.saveLocked()
}

// SetDelays replaces the command delays.
func (e *Emulator) SetDelays(d Delays) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.Delays = d
	e.saveLocked()
}

func (e *Emulator) saveLocked() {
	if e.cfg.StateFile == "" {
		return
	}
	if err := saveState(e.cfg.StateFile, e.state); err != nil {
		e.logger.Error(err, "Saving emulator state failed; a restarted emulator will not see this change", "file", e.cfg.StateFile)
	}
}

// timestamp is now, strictly after the previous command's timestamp, so a
// waiter can tell two commands of one type apart even under a fake clock.
func (e *Emulator) timestampLocked() time.Time {
	t := e.clock.Now().UTC()
	if !t.After(e.lastTime) {
		t = e.lastTime.Add(time.Nanosecond)
	}
	if r := e.state.Status; r != nil && r.MostRecentCommand != nil && !t.After(r.MostRecentCommand.Timestamp) {
		t = r.MostRecentCommand.Timestamp.Add(time.Nanosecond)
	}
	e.lastTime = t
	return t
}

// settleLocked finishes the running command once its delay has passed and
// applies committed settings once theirs has, in the order they fell due.
func (e *Emulator) settleLocked() {
	st, now := e.state, e.clock.Now()
	applyDue := st.ApplyAt != nil && !now.Before(*st.ApplyAt)
	f := st.InFlight
	cmdDue := f != nil && !now.Before(f.DoneAt)
	if applyDue && (!cmdDue || !st.ApplyAt.After(f.DoneAt)) {
		e.applyLocked()
		applyDue = false
	}
	if cmdDue {
		st.InFlight = nil
		e.completeLocked(f.Cmd)
	}
	if applyDue {
		e.applyLocked()
	}
	if applyDue || cmdDue {
		e.saveLocked()
	}
}

// applyLocked renders the committed settings for the updater, as
// thar-be-settings does when it gets to it: the values committed by then.
func (e *Emulator) applyLocked() {
	st := e.state
	st.ApplyAt = nil
	st.Applied = Applied{VersionLock: st.VersionLock, IgnoreWaves: st.IgnoreWaves}
	e.logger.Info("Update settings applied", "versionLock", st.Applied.VersionLock, "ignoreWaves", st.Applied.IgnoreWaves)
}

// completeLocked applies a finished command to the status, as the update
// dispatcher does when its child process ends.
func (e *Emulator) completeLocked(cmd brapi.CommandType) {
	st := e.state
	s := st.Status
	failed := map[brapi.CommandType]bool{
		brapi.CommandRefresh:    st.Faults.RefreshFails,
		brapi.CommandPrepare:    st.Faults.PrepareFails,
		brapi.CommandActivate:   st.Faults.ActivateFails,
		brapi.CommandDeactivate: st.Faults.DeactivateFails,
	}[cmd]
	exit := int32(0)
	stderr := ""
	result := brapi.CommandResult{CmdType: cmd, CmdStatus: brapi.CommandSuccess, Timestamp: e.timestampLocked(), ExitStatus: &exit, Stderr: &stderr}
	// updog update-apply (signpost's upgrade_to_inactive) refuses an
	// inactive partition set that no prepare made valid in this boot.
	invalid := cmd == brapi.CommandActivate && !failed && st.Inactive == ""
	if failed || invalid {
		exit = 1
		stderr = fmt.Sprintf("emulated failure: %s fails (fault injected)", cmd)
		if invalid {
			stderr = "Could not mark inactive partition for boot: Inactive partition /dev/xvda has not been marked valid for upgrade"
		}
		result.CmdStatus = brapi.CommandFailed
	}
	// updog update-image resolves its target again, from the settings the
	// updater reads now (the refresh's choice is only what the status
	// records), and says on stderr what it wrote.
	target := ""
	if cmd == brapi.CommandPrepare {
		target = st.chosen()
		if !failed {
			stderr = "No update required\n"
			if target != "" {
				stderr = fmt.Sprintf("Starting update to %s\n", target)
			}
		}
	}
	s.MostRecentCommand = &result
	e.logger.Info("Update command finished", "cmd", cmd, "status", result.CmdStatus)
	if failed || invalid {
		failedLocked(cmd, s, st, target)
		return
	}
	succeededLocked(cmd, s, st, target)
}

// failedLocked is what a failed command leaves in the host's state.
func failedLocked(cmd brapi.CommandType, s *brapi.UpdateStatus, st *State, target string) {
	if cmd == brapi.CommandRefresh && (s.UpdateState == brapi.StateIdle || s.UpdateState == brapi.StateAvailable) {
		s.UpdateState = brapi.StateIdle
	}
	if cmd == brapi.CommandPrepare && target != "" {
		// update_image cleared the inactive set before the download
		// failed; the status still names what it held.
		st.Inactive = ""
	}
}

// succeededLocked moves the host's update state as a command that succeeded
// does; a prepare writes target to the inactive partition set.
func succeededLocked(cmd brapi.CommandType, s *brapi.UpdateStatus, st *State, target string) {
	switch cmd {
	case brapi.CommandRefresh:
		s.AvailableUpdates = st.applicable(st.Applied.IgnoreWaves)
		s.ChosenUpdate = nil
		if v := st.choose(s.AvailableUpdates, st.Applied.VersionLock); v != "" {
			s.ChosenUpdate = st.image(v)
		}
		if s.UpdateState == brapi.StateIdle || s.UpdateState == brapi.StateAvailable {
			s.UpdateState = brapi.StateIdle
			if s.ChosenUpdate != nil {
				s.UpdateState = brapi.StateAvailable
			}
		}
	case brapi.CommandPrepare:
		if target != "" {
			st.Inactive = target
		}
		img := *s.ChosenUpdate
		s.StagingPartition = &brapi.StagedImage{Image: &img}
		s.UpdateState = brapi.StateStaged
	case brapi.CommandActivate:
		s.StagingPartition.NextToBoot = true
		s.ActivePartition.NextToBoot = false
		s.UpdateState = brapi.StateReady
	case brapi.CommandDeactivate:
		s.StagingPartition.NextToBoot = false
		s.ActivePartition.NextToBoot = true
		s.UpdateState = brapi.StateStaged
	}
}

// reboot runs in its own goroutine after POST /actions/reboot was answered.
func (e *Emulator) reboot() {
	defer e.wg.Done()
	e.mu.Lock()
	delay := e.state.Delays.Reboot
	e.mu.Unlock()
	if delay > 0 {
		t := e.clock.NewTimer(delay)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
	e.mu.Lock()
	st := e.state
	ev := RebootEvent{From: st.Running, To: st.Running, Reboot: st.Reboots + 1}
	if v := st.nextBoot(); v != "" && !st.Faults.NeverComesUp {
		ev.To = v
	}
	hook := e.cfg.RebootHook
	e.mu.Unlock()

	e.logger.Info("Emulated host rebooting", "from", ev.From, "to", ev.To, "reboot", ev.Reboot)
	if hook != nil {
		if err := hook(e.ctx, ev); err != nil {
			e.logger.Error(err, "Reboot hook failed; booting anyway")
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	st.Running = ev.To
	if ev.To != ev.From && !slices.ContainsFunc(st.Offered, func(o string) bool { return brapi.SameVersion(o, ev.From) }) {
		// The repository keeps every release it published, so the version
		// the host left stays applicable: updog's applicable_updates
		// filters by variant, arch, max_version and wave, never by age,
		// and a lock on it boots it again (a rollback).
		st.Offered = append(st.Offered, ev.From)
		sortNewestFirst(st.Offered)
	}
	st.Reboots++
	// /run is a tmpfs: the dispatcher's status and a running command are
	// gone after a boot; settings persist.
	st.Status = nil
	st.InFlight = nil
	st.Rebooting = false
	// The set left behind is the one that booted before: no prepare of
	// this boot wrote it, so it is not valid to activate.
	st.Inactive = ""
	e.saveLocked()
	close(e.booted)
	e.booted = make(chan struct{})
	e.logger.Info("Emulated host booted", "running", st.Running, "reboots", st.Reboots)
}

// Handler serves the emulated API and the control API.
func (e *Emulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /emulator/state", e.controlState)
	mux.HandleFunc("POST /emulator/offer", e.controlOffer)
	mux.HandleFunc("POST /emulator/publish", e.controlPublish)
	mux.HandleFunc("GET /emulator/faults", e.controlGetFaults)
	mux.HandleFunc("PUT /emulator/faults", e.controlPutFaults)
	mux.HandleFunc("/", e.serveAPI)
	return mux
}

// answer is what an API handler decided; the faults apply to it.
type answer struct {
	status int
	body   []byte // JSON when json is true, else text
	json   bool
	after  func() // runs after the answer was written
}

func textAnswer(status int, format string, args ...any) answer {
	return answer{status: status, body: []byte(fmt.Sprintf(format, args...))}
}

func jsonAnswer(v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		return textAnswer(http.StatusInternalServerError, "serializing: %v", err)
	}
	return answer{status: http.StatusOK, body: b, json: true}
}

func (e *Emulator) serveAPI(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	f := &e.state.Faults
	if e.state.Rebooting || f.DropNext > 0 {
		if !e.state.Rebooting {
			f.DropNext--
			e.saveLocked()
		}
		e.mu.Unlock()
		drop(w)
		return
	}
	if f.ServerErrorNext > 0 {
		f.ServerErrorNext--
		e.saveLocked()
		e.mu.Unlock()
		http.Error(w, "emulated server error (fault injected)", http.StatusInternalServerError)
		return
	}
	a := e.routeLocked(r)
	if a.json && a.status == http.StatusOK && f.MalformedNext > 0 {
		f.MalformedNext--
		e.saveLocked()
		a.body = a.body[:len(a.body)/2]
	}
	e.mu.Unlock()

	if a.json {
		w.Header().Set("Content-Type", "application/json")
	} else if len(a.body) > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
	if a.after != nil {
		a.after()
	}
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func (e *Emulator) routeLocked(r *http.Request) answer {
	e.settleLocked()
	route := func(method string, h func() answer) answer {
		if r.Method != method {
			return textAnswer(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
		}
		return h()
	}
	switch r.URL.Path {
	case "/os":
		return route(http.MethodGet, e.getOSLocked)
	case "/updates/status":
		return route(http.MethodGet, e.getStatusLocked)
	case "/actions/refresh-updates":
		return route(http.MethodPost, func() answer { return e.startLocked(brapi.CommandRefresh) })
	case "/actions/prepare-update":
		return route(http.MethodPost, func() answer { return e.startLocked(brapi.CommandPrepare) })
	case "/actions/activate-update":
		return route(http.MethodPost, func() answer { return e.startLocked(brapi.CommandActivate) })
	case "/actions/deactivate-update":
		return route(http.MethodPost, func() answer { return e.startLocked(brapi.CommandDeactivate) })
	case "/actions/reboot":
		return route(http.MethodPost, e.rebootLocked)
	case "/settings":
		switch r.Method {
		case http.MethodGet:
			return e.getSettingsLocked(r)
		case http.MethodPatch:
			return e.patchSettingsLocked(r)
		}
		return textAnswer(http.StatusMethodNotAllowed, "method %s not allowed on /settings", r.Method)
	case "/tx/commit_and_apply":
		return route(http.MethodPost, func() answer { return e.commitLocked(txName(r)) })
	}
	return textAnswer(http.StatusNotFound, "the emulator does not serve %s", r.URL.Path)
}

func (e *Emulator) getOSLocked() answer {
	st := e.state
	return jsonAnswer(brapi.OSInfo{
		PrettyName: fmt.Sprintf("Bottlerocket OS %s (%s)", st.Running, st.Variant),
		VariantID:  st.Variant,
		VersionID:  st.Running,
		BuildID:    "emulated",
		Arch:       st.Arch,
	})
}

func (e *Emulator) getStatusLocked() answer {
	if e.state.InFlight != nil {
		return textAnswer(http.StatusLocked, "Unable to obtain shared lock for reading update status: an update command is running")
	}
	if e.state.Status == nil {
		return textAnswer(http.StatusNotFound, "Update status is uninitialized, refresh-updates to initialize it")
	}
	return jsonAnswer(e.state.Status)
}

// startLocked runs the dispatcher's state-machine checks and starts cmd.
func (e *Emulator) startLocked(cmd brapi.CommandType) answer {
	st := e.state
	if st.InFlight != nil {
		return textAnswer(http.StatusLocked, "Update lock held: %s is running; try again in a moment", st.InFlight.Cmd)
	}
	st.initStatus()
	s := st.Status
	disallowed := textAnswer(http.StatusConflict, "Update action not allowed according to update state: %s in %s", cmd, s.UpdateState)
	switch cmd {
	case brapi.CommandPrepare:
		if s.UpdateState != brapi.StateAvailable && s.UpdateState != brapi.StateStaged {
			return disallowed
		}
		if s.ChosenUpdate == nil {
			return textAnswer(http.StatusNotFound, "Previously chosen Update no longer exists")
		}
	case brapi.CommandActivate:
		if s.UpdateState != brapi.StateStaged {
			return disallowed
		}
		if s.StagingPartition == nil {
			return textAnswer(http.StatusNotFound, "No update image applied to staging partition")
		}
	case brapi.CommandDeactivate:
		if s.UpdateState != brapi.StateReady {
			return disallowed
		}
		if s.StagingPartition == nil {
			return textAnswer(http.StatusNotFound, "No update image applied to staging partition")
		}
	}
	if d := st.Delays.of(cmd); d > 0 {
		st.InFlight = &InFlight{Cmd: cmd, DoneAt: e.clock.Now().Add(d)}
		e.logger.Info("Update command started", "cmd", cmd, "duration", d)
	} else {
		e.completeLocked(cmd)
	}
	e.saveLocked()
	return answer{status: http.StatusNoContent}
}

func (e *Emulator) rebootLocked() answer {
	st := e.state
	if st.Faults.RefuseRebootNext > 0 {
		st.Faults.RefuseRebootNext--
		st.RebootsRefused++
		e.logger.Info("Reboot refused (fault injected)")
		e.saveLocked()
		// The body as the API server words its Reboot error.
		return textAnswer(http.StatusInternalServerError, "Failed to reboot, exit code: 1, stderr: Operation inhibited by \"emulator\" (a shutdown inhibitor is active; emulated refusal)")
	}
	st.RebootRequests++
	if st.Faults.RebootHangs {
		e.logger.Info("Reboot accepted but hangs (fault injected)")
		e.saveLocked()
		return answer{status: http.StatusNoContent}
	}
	st.Rebooting = true
	e.saveLocked()
	e.wg.Add(1)
	return answer{status: http.StatusNoContent, after: func() { go e.reboot() }}
}

// getSettingsLocked answers the datastore's committed values (not yet
// applied ones included), only those asked for with ?keys= when given.
func (e *Emulator) getSettingsLocked(r *http.Request) answer {
	lock, waves := e.state.VersionLock, e.state.IgnoreWaves
	u := brapi.UpdatesSettings{VersionLock: &lock, IgnoreWaves: &waves}
	if keys := r.URL.Query().Get("keys"); keys != "" {
		want := strings.Split(keys, ",")
		if !slices.Contains(want, "settings.updates.version-lock") {
			u.VersionLock = nil
		}
		if !slices.Contains(want, "settings.updates.ignore-waves") {
			u.IgnoreWaves = nil
		}
	}
	return jsonAnswer(brapi.Settings{Updates: &u})
}

func txName(r *http.Request) string {
	if tx := r.URL.Query().Get("tx"); tx != "" {
		return tx
	}
	return "default"
}

const storedSettings = "the emulator only stores settings.updates.version-lock and settings.updates.ignore-waves"

func (e *Emulator) patchSettingsLocked(r *http.Request) answer {
	var body map[string]json.RawMessage
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err := dec.Decode(&body); err != nil {
		return textAnswer(http.StatusBadRequest, "Invalid body: %v", err)
	}
	var updates map[string]json.RawMessage
	for k, v := range body {
		if k != "updates" {
			return textAnswer(http.StatusBadRequest, "%s, not settings.%s", storedSettings, k)
		}
		if err := json.Unmarshal(v, &updates); err != nil {
			return textAnswer(http.StatusBadRequest, "Invalid body: settings.updates: %v", err)
		}
	}
	if len(updates) == 0 {
		return textAnswer(http.StatusBadRequest, storedSettings)
	}
	var p PendingSettings
	for k, raw := range updates {
		switch k {
		case "version-lock":
			var lock string
			if err := json.Unmarshal(raw, &lock); err != nil {
				return textAnswer(http.StatusBadRequest, "Invalid body: settings.updates.version-lock: %v", err)
			}
			if err := brapi.ValidateVersionLock(lock); err != nil {
				return textAnswer(http.StatusBadRequest, "Invalid body: %v", err)
			}
			p.VersionLock = &lock
		case "ignore-waves":
			var waves bool
			if err := json.Unmarshal(raw, &waves); err != nil {
				return textAnswer(http.StatusBadRequest, "Invalid body: settings.updates.ignore-waves: %v", err)
			}
			p.IgnoreWaves = &waves
		default:
			return textAnswer(http.StatusBadRequest, "%s, not settings.updates.%s", storedSettings, k)
		}
	}
	if e.state.Pending == nil {
		e.state.Pending = map[string]PendingSettings{}
	}
	tx := e.state.Pending[txName(r)]
	if p.VersionLock != nil {
		tx.VersionLock = p.VersionLock
	}
	if p.IgnoreWaves != nil {
		tx.IgnoreWaves = p.IgnoreWaves
	}
	e.state.Pending[txName(r)] = tx
	e.saveLocked()
	return answer{status: http.StatusNoContent}
}

// commitLocked commits a transaction; the updater sees it only once
// thar-be-settings applied it (Delays.SettingsApply).
func (e *Emulator) commitLocked(tx string) answer {
	p, ok := e.state.Pending[tx]
	if !ok {
		return textAnswer(http.StatusUnprocessableEntity, "Transaction %q has no pending settings to commit", tx)
	}
	delete(e.state.Pending, tx)
	var changed []string
	if p.VersionLock != nil {
		e.state.VersionLock = *p.VersionLock
		changed = append(changed, "settings.updates.version-lock")
	}
	if p.IgnoreWaves != nil {
		e.state.IgnoreWaves = *p.IgnoreWaves
		changed = append(changed, "settings.updates.ignore-waves")
	}
	e.logger.Info("Update settings committed", "versionLock", e.state.VersionLock, "ignoreWaves", e.state.IgnoreWaves, "tx", tx)
	if d := e.state.Delays.SettingsApply; d > 0 {
		// One thar-be-settings run renders what is committed when it
		// runs: an earlier commit's pending run takes this one along.
		if e.state.ApplyAt == nil {
			at := e.clock.Now().Add(d)
			e.state.ApplyAt = &at
		}
	} else {
		e.applyLocked()
	}
	e.saveLocked()
	return jsonAnswer(changed)
}

func (e *Emulator) controlState(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, e.State())
}

// OfferRequest is the body of POST /emulator/offer.
type OfferRequest struct {
	Versions []string `json:"versions"`
}

func (e *Emulator) controlOffer(w http.ResponseWriter, r *http.Request) {
	var req OfferRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf(`want {"versions": ["1.2.3"]}: %v`, err), http.StatusBadRequest)
		return
	}
	if len(req.Versions) == 0 {
		http.Error(w, `want {"versions": ["1.2.3"]}: no versions`, http.StatusBadRequest)
		return
	}
	if err := e.Offer(req.Versions...); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, e.State())
}

func (e *Emulator) controlPublish(w http.ResponseWriter, r *http.Request) {
	var req OfferRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || len(req.Versions) == 0 {
		http.Error(w, fmt.Sprintf(`want {"versions": ["1.2.3"]}: %v`, err), http.StatusBadRequest)
		return
	}
	if err := e.Publish(req.Versions...); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, e.State())
}

func (e *Emulator) controlGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, e.State().Faults)
}

func (e *Emulator) controlPutFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		http.Error(w, fmt.Sprintf("faults: %v", err), http.StatusBadRequest)
		return
	}
	e.SetFaults(f)
	writeJSON(w, f)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
