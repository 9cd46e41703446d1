// Package brapi is a client of Bottlerocket's local API (HTTP over the Unix
// socket /run/api.sock) for what the update agent needs: the running version,
// the update dispatcher's status and actions, reboot, and the version lock.
//
// It owns the wire shapes, bounded per-call timeouts, retries with
// exponential back-off for transient failures, and waiting for the update
// dispatcher's asynchronous commands to finish. It depends on net/http only
// (plus an injectable clock) so the per-node agent stays lean.
//
// Retry policy, per call:
//   - GETs, PATCH /settings, POST /tx/commit_and_apply, refresh-updates and
//     prepare-update are retried on every transient failure: connection
//     refused or dropped (the API restarting), an attempt timing out, 5xx and
//     423 (another command holds the update lock). Repeating them is harmless:
//     refresh and prepare are allowed again in the state they lead to, a
//     repeated commit finds nothing pending (422), which is checked against
//     the setting.
//   - activate-update and deactivate-update are retried the same way; a retry
//     after an attempt whose answer was lost may meet 409 because the first
//     attempt did apply, so a 409 is checked against /updates/status and is a
//     success when the update is already (de)activated.
//   - reboot is retried only when the connection could not be made, so the
//     request surely never reached the API. Whether to ask again after a
//     refusal or a lost answer is the agent's decision: it asks only while
//     the update is still armed, so two requests never make two boots.
//   - 4xx answers and malformed answers are never retried.
package brapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultSocketPath is where Bottlerocket serves its API; the agent's
// DaemonSet mounts it from the host.
const DefaultSocketPath = "/run/api.sock"

// SettingsTransaction is the settings transaction the client stages its
// version-lock change in, so it commits nothing another writer left pending
// in the default transaction.
const SettingsTransaction = "nodehealth-update-agent"

// Backoff is the retry schedule: Attempts tries in all, waiting Initial, then
// Factor times longer each time, at most Max.
type Backoff struct {
	Initial  time.Duration
	Factor   float64
	Max      time.Duration
	Attempts int
}

func (b Backoff) delay(retry int) time.Duration {
	d := float64(b.Initial)
	for i := 0; i < retry; i++ {
		d *= b.Factor
		if time.Duration(d) >= b.Max {
			return b.Max
		}
	}
	return min(time.Duration(d), b.Max)
}

// Options configure a Client; zero values take the defaults.
type Options struct {
	// SocketPath defaults to DefaultSocketPath.
	SocketPath string
	// CallTimeout bounds one HTTP attempt (default 10s). Actions return as
	// soon as the dispatcher has started them, so no call should take long.
	CallTimeout time.Duration
	// Retry defaults to 6 attempts, 1s doubling up to 15s (about 30s of
	// waiting: long enough for the API server to restart).
	Retry Backoff
	// CommandTimeout bounds how long an action waits for its update command
	// to finish (default 20m: prepare downloads an image).
	CommandTimeout time.Duration
	// PollInterval is how often /updates/status is read while a command
	// runs (default 2s).
	PollInterval time.Duration
	// Clock times back-off waits, polling and CommandTimeout.
	Clock clock.Clock
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		SocketPath:     DefaultSocketPath,
		CallTimeout:    10 * time.Second,
		Retry:          Backoff{Initial: time.Second, Factor: 2, Max: 15 * time.Second, Attempts: 6},
		CommandTimeout: 20 * time.Minute,
		PollInterval:   2 * time.Second,
		Clock:          clock.RealClock{},
	}
}

// Client talks to one Bottlerocket API socket. It is safe for concurrent use,
// but the update dispatcher runs one command at a time.
type Client struct {
	opts Options
	http *http.Client
}

// New returns a client with opts, defaults filled in.
func New(opts Options) *Client {
	def := DefaultOptions()
	if opts.SocketPath == "" {
		opts.SocketPath = def.SocketPath
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = def.CallTimeout
	}
	if opts.Retry.Attempts <= 0 {
		opts.Retry.Attempts = def.Retry.Attempts
	}
	if opts.Retry.Initial <= 0 {
		opts.Retry.Initial = def.Retry.Initial
	}
	if opts.Retry.Factor < 1 {
		opts.Retry.Factor = def.Retry.Factor
	}
	if opts.Retry.Max < opts.Retry.Initial {
		opts.Retry.Max = max(def.Retry.Max, opts.Retry.Initial)
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = def.CommandTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = def.PollInterval
	}
	if opts.Clock == nil {
		opts.Clock = def.Clock
	}
	socket := opts.SocketPath
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		// One connection per call: the agent makes few calls, and a fresh
		// connection never meets one the API closed while restarting, which
		// would make a POST's fate ambiguous.
		DisableKeepAlives: true,
	}
	return &Client{opts: opts, http: &http.Client{Transport: transport}}
}

// SocketPath is the socket the client talks to.
func (c *Client) SocketPath() string { return c.opts.SocketPath }

type retryClass int

const (
	// retryTransient: every transient failure is retried.
	retryTransient retryClass = iota
	// retryNotSent: only failures to connect are retried.
	retryNotSent
)

type call struct {
	method string
	path   string
	query  url.Values
	body   any
	class  retryClass
	// noRetryLocked returns a 423 at once (the caller polls instead).
	noRetryLocked bool
}

func (c call) name() string { return c.method + " " + c.path }

// do runs the call with retries and decodes a 2xx answer into out (when
// out is not nil).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	logger := klog.FromContext(ctx)
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return &Error{Call: cl.name(), Err: err}
		}
	}
	var last *Error
	for attempt := 1; ; attempt++ {
		status, respBody, err := c.attempt(ctx, cl, body)
		last = &Error{Call: cl.name(), Attempts: attempt, StatusCode: status, Err: err}
		if status != 0 {
			last.Body = excerpt(respBody)
		}
		if err == nil && status >= 200 && status < 300 {
			if out == nil {
				return nil
			}
			if derr := json.Unmarshal(respBody, out); derr != nil {
				last.Err = fmt.Errorf("%w: %v", ErrMalformed, derr)
				return last
			}
			return nil
		}
		if ctx.Err() != nil {
			last.Err = errors.Join(last.Err, ctx.Err())
			return last
		}
		if !c.retriable(cl, status, err) || attempt >= c.opts.Retry.Attempts {
			return last
		}
		wait := c.opts.Retry.delay(attempt - 1)
		logger.V(2).Info("Bottlerocket API call failed, retrying", "call", cl.name(), "attempt", attempt, "status", status, "err", err, "retryIn", wait)
		if serr := c.sleep(ctx, wait); serr != nil {
			last.Err = errors.Join(last.Err, serr)
			return last
		}
	}
}

func (c *Client) retriable(cl call, status int, err error) bool {
	if err != nil {
		if isDialError(err) {
			return true
		}
		return cl.class == retryTransient
	}
	if cl.class == retryNotSent {
		return false
	}
	if status == http.StatusLocked {
		return !cl.noRetryLocked
	}
	return status >= 500
}

// isDialError reports a failure to connect: the request never left.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (c *Client) attempt(ctx context.Context, cl call, body []byte) (int, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: "localhost", Path: cl.path, RawQuery: cl.query.Encode()}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u.String(), rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	// Answers are small; a bound keeps a misbehaving server from filling
	// the agent's memory.
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer (status %d): %w", resp.StatusCode, err)
	}
	return resp.StatusCode, b, nil
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := c.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// OS returns GET /os: the running Bottlerocket release.
func (c *Client) OS(ctx context.Context) (*OSInfo, error) {
	cl := call{method: http.MethodGet, path: "/os"}
	var os OSInfo
	if err := c.do(ctx, cl, &os); err != nil {
		return nil, err
	}
	if _, err := ParseVersion(os.VersionID); err != nil {
		return nil, &Error{Call: cl.name(), Attempts: 1, StatusCode: http.StatusOK, Err: fmt.Errorf("%w: version_id: %v", ErrMalformed, err)}
	}
	return &os, nil
}

// UpdateStatus returns GET /updates/status. A 404 (IsNotFound) means no
// update command ran since boot: refresh first. A 423 (IsLocked) that
// outlasts the retries means a command is still running.
func (c *Client) UpdateStatus(ctx context.Context) (*UpdateStatus, error) {
	return c.updateStatus(ctx, false)
}

func (c *Client) updateStatus(ctx context.Context, noRetryLocked bool) (*UpdateStatus, error) {
	cl := call{method: http.MethodGet, path: "/updates/status", noRetryLocked: noRetryLocked}
	var s UpdateStatus
	if err := c.do(ctx, cl, &s); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, &Error{Call: cl.name(), Attempts: 1, StatusCode: http.StatusOK, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	return &s, nil
}

func (s *UpdateStatus) validate() error {
	if !s.UpdateState.valid() {
		return fmt.Errorf("update_state %q is not Idle, Available, Staged or Ready", s.UpdateState)
	}
	if s.ChosenUpdate != nil {
		if _, err := ParseVersion(s.ChosenUpdate.Version); err != nil {
			return fmt.Errorf("chosen_update.version: %v", err)
		}
	}
	if s.StagingPartition != nil && s.StagingPartition.Image != nil {
		if _, err := ParseVersion(s.StagingPartition.Image.Version); err != nil {
			return fmt.Errorf("staging_partition.image.version: %v", err)
		}
	}
	if r := s.MostRecentCommand; r != nil {
		switch r.CmdType {
		case CommandRefresh, CommandPrepare, CommandActivate, CommandDeactivate:
		default:
			return fmt.Errorf("most_recent_command.cmd_type %q is unknown", r.CmdType)
		}
	}
	return nil
}

// RefreshUpdates asks the updater for the offered updates and waits until
// the refresh finished; the returned status holds the chosen update (none
// when nothing newer matches the version lock).
func (c *Client) RefreshUpdates(ctx context.Context) (*UpdateStatus, error) {
	return c.command(ctx, CommandRefresh, "/actions/refresh-updates", "")
}

// PrepareUpdate downloads the chosen update to the inactive partition set
// and waits until it is Staged.
func (c *Client) PrepareUpdate(ctx context.Context) (*UpdateStatus, error) {
	return c.command(ctx, CommandPrepare, "/actions/prepare-update", "")
}

// ActivateUpdate marks the staged update to boot next and waits until it is
// Ready. An update already activated is a success.
func (c *Client) ActivateUpdate(ctx context.Context) (*UpdateStatus, error) {
	return c.command(ctx, CommandActivate, "/actions/activate-update", StateReady)
}

// DeactivateUpdate marks the running partition set to boot next again (the
// abort path) and waits until the update is back to Staged. An update not
// activated (state Staged, Available or Idle) is a success: nothing boots
// into it.
func (c *Client) DeactivateUpdate(ctx context.Context) (*UpdateStatus, error) {
	return c.command(ctx, CommandDeactivate, "/actions/deactivate-update", StateStaged)
}

// command posts an update action and waits for the dispatcher to record its
// result. done is the state in which a 409 means the action already took
// effect ("" when a 409 is always an error).
func (c *Client) command(ctx context.Context, cmd CommandType, path string, done UpdateState) (*UpdateStatus, error) {
	before, err := c.UpdateStatus(ctx)
	if err != nil && !IsNotFound(err) {
		return nil, fmt.Errorf("%s: reading the update status first: %w", cmd, err)
	}
	var prev *CommandResult
	if before != nil {
		prev = before.MostRecentCommand
	}
	perr := c.do(ctx, call{method: http.MethodPost, path: path}, nil)
	if perr != nil {
		if done != "" && IsConflict(perr) {
			now, err := c.UpdateStatus(ctx)
			if err == nil && reached(now, cmd, done) {
				return now, nil
			}
		}
		return nil, perr
	}
	return c.WaitForCommand(ctx, cmd, prev)
}

// reached reports whether the state an action leads to already holds.
func reached(s *UpdateStatus, cmd CommandType, done UpdateState) bool {
	switch cmd {
	case CommandActivate:
		return s.UpdateState == StateReady
	case CommandDeactivate:
		return s.UpdateState != StateReady
	}
	return s.UpdateState == done
}

// WaitForCommand polls /updates/status until most_recent_command is a cmd
// newer than prev (prev nil: any cmd result) and returns the status then. A
// Failed (or Unknown) result is a *CommandError. While the command runs the
// API answers 423; polling is bounded by CommandTimeout and ctx. A caller
// restarted after posting an action passes the result it saw before.
func (c *Client) WaitForCommand(ctx context.Context, cmd CommandType, prev *CommandResult) (*UpdateStatus, error) {
	deadline := c.opts.Clock.Now().Add(c.opts.CommandTimeout)
	var lastErr error
	for {
		s, err := c.updateStatus(ctx, true)
		switch {
		case err == nil:
			if r := s.MostRecentCommand; r != nil && r.CmdType == cmd && newer(r, prev) {
				if r.CmdStatus != CommandSuccess {
					return s, &CommandError{Result: *r}
				}
				return s, nil
			}
			lastErr = fmt.Errorf("most recent command is still %s", describe(s.MostRecentCommand))
		case IsLocked(err) || IsNotFound(err):
			lastErr = err // still running
		default:
			return nil, fmt.Errorf("waiting for %s to finish: %w", cmd, err)
		}
		if !c.opts.Clock.Now().Before(deadline) {
			return nil, fmt.Errorf("waiting for %s to finish: gave up after %v: %w", cmd, c.opts.CommandTimeout, lastErr)
		}
		if err := c.sleep(ctx, c.opts.PollInterval); err != nil {
			return nil, fmt.Errorf("waiting for %s to finish: %w (last: %v)", cmd, err, lastErr)
		}
	}
}

func newer(r, prev *CommandResult) bool {
	if prev == nil {
		return true
	}
	return r.CmdType != prev.CmdType || !r.Timestamp.Equal(prev.Timestamp)
}

func describe(r *CommandResult) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s at %s", r.CmdType, r.CmdStatus, r.Timestamp.Format(time.RFC3339Nano))
}

// Reboot asks the host to reboot (POST /actions/reboot). It is retried only
// when the connection could not be made. An error with a status code
// (StatusCode) is a refusal: the host is not going down. An error without
// one may have reached the host: the caller tells by the node's bootID.
func (c *Client) Reboot(ctx context.Context) error {
	return c.do(ctx, call{method: http.MethodPost, path: "/actions/reboot", class: retryNotSent}, nil)
}

// VersionLock returns settings.updates.version-lock ("latest" when unset,
// Bottlerocket's default).
func (c *Client) VersionLock(ctx context.Context) (string, error) {
	cl := call{method: http.MethodGet, path: "/settings", query: url.Values{"keys": {"settings.updates.version-lock"}}}
	var s Settings
	if err := c.do(ctx, cl, &s); err != nil {
		return "", err
	}
	if s.Updates == nil || s.Updates.VersionLock == nil || *s.Updates.VersionLock == "" {
		return VersionLockLatest, nil
	}
	return *s.Updates.VersionLock, nil
}

// SetVersionLock sets settings.updates.version-lock to lock ("latest" or a
// version) and commits it: PATCH /settings then POST /tx/commit_and_apply,
// both in SettingsTransaction.
func (c *Client) SetVersionLock(ctx context.Context, lock string) error {
	if err := ValidateVersionLock(lock); err != nil {
		return err
	}
	tx := url.Values{"tx": {SettingsTransaction}}
	patch := Settings{Updates: &UpdatesSettings{VersionLock: &lock}}
	if err := c.do(ctx, call{method: http.MethodPatch, path: "/settings", query: tx, body: patch}, nil); err != nil {
		return err
	}
	err := c.do(ctx, call{method: http.MethodPost, path: "/tx/commit_and_apply", query: tx}, nil)
	if err != nil && StatusCode(err) == http.StatusUnprocessableEntity {
		// Nothing pending: an earlier attempt whose answer was lost
		// committed it — or someone else committed our transaction.
		got, rerr := c.VersionLock(ctx)
		if rerr == nil && (got == lock || (got != VersionLockLatest && lock != VersionLockLatest && SameVersion(got, lock))) {
			return nil
		}
	}
	return err
}

// IgnoreWaves returns settings.updates.ignore-waves (false when unset,
// Bottlerocket's default).
func (c *Client) IgnoreWaves(ctx context.Context) (bool, error) {
	cl := call{method: http.MethodGet, path: "/settings", query: url.Values{"keys": {"settings.updates.ignore-waves"}}}
	var s Settings
	if err := c.do(ctx, cl, &s); err != nil {
		return false, err
	}
	return s.Updates != nil && s.Updates.IgnoreWaves != nil && *s.Updates.IgnoreWaves, nil
}

// SetIgnoreWaves sets settings.updates.ignore-waves and commits it, in
// SettingsTransaction as SetVersionLock does. Like every committed
// setting, the updater sees it only once Bottlerocket applied it.
func (c *Client) SetIgnoreWaves(ctx context.Context, on bool) error {
	tx := url.Values{"tx": {SettingsTransaction}}
	patch := Settings{Updates: &UpdatesSettings{IgnoreWaves: &on}}
	if err := c.do(ctx, call{method: http.MethodPatch, path: "/settings", query: tx, body: patch}, nil); err != nil {
		return err
	}
	err := c.do(ctx, call{method: http.MethodPost, path: "/tx/commit_and_apply", query: tx}, nil)
	if err != nil && StatusCode(err) == http.StatusUnprocessableEntity {
		// Nothing pending: an earlier attempt whose answer was lost
		// committed it.
		if got, rerr := c.IgnoreWaves(ctx); rerr == nil && got == on {
			return nil
		}
	}
	return err
}
