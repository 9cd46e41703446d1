package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/klog/v2"
)

// Renewer keeps one extension Lease current: it creates and renews
// "<extension>.<node>" while the probe succeeds, releases it when the probe
// fails FailureThreshold times in a row, and re-acquires it once the probe
// succeeds again. Create it with New and run it with Run.
//
// When Run's context ends the Lease is left as it is: the caller decides
// whether the exit is a shutdown (call Release, e.g. with ReasonTerminating,
// so the node is gated at once) or a restart to pick up a new configuration
// (do nothing: the new process renews the still-valid Lease, and one
// ConfigMap edit does not gate every node).
type Renewer struct {
	client Client
	opts   Options
	name   string
	m      Metrics
	// jitter returns a number in [0, 1); tests may replace it.
	jitter func() float64

	// wake interrupts Run's wait after Release or Resume changed what to write.
	wake chan struct{}

	// mu guards the fields below and serialises every write of the Lease, so
	// that Release called from another goroutine and the loop never race.
	mu sync.Mutex
	// lease is the Lease as last read or written; updates start from it, so a
	// renewal costs one write, and a conflict costs one extra GET.
	lease *coordinationv1.Lease
	owner ownerState
	// health is the probe's verdict. A healthy verdict is only good for
	// FailureThreshold × ProbePeriod after lastSuccess (fresh): older than
	// that, it is unknown again, and nothing is renewed until a new probe
	// succeeds.
	health        health
	successes     int
	failures      int
	lastProbeErr  error
	lastSuccess   time.Time // when the last successful probe started
	probeNow      bool      // the verdict went stale: probe without waiting
	pausedReason  string    // set by Release: no re-acquisition until Resume
	pausedMessage string
	// want is the state to establish; nil while nothing is decided yet (at
	// start, before the first probe verdict).
	want *target
	// nextWrite is when to write next; zero means no write is scheduled.
	nextWrite time.Time
	// retryDelay is the current back-off; zero while writes succeed.
	retryDelay time.Duration
	lastRenew  time.Time
	running    bool

	// Read without mu, so that Holding and Healthz answer at once even while
	// a write to a slow API server holds mu (a liveness probe must not time
	// out because the API server is slow).
	holding atomic.Bool
	// lastLoop is when Run's loop last came round, in Unix nanoseconds of
	// Options.Clock; zero while Run is not running.
	lastLoop atomic.Int64
}

type health int

const (
	healthUnknown health = iota
	healthy
	unhealthy
)

// target is what a write establishes: held by this process, or released with
// a reason.
type target struct {
	hold            bool
	reason, message string
}

// New returns a Renewer for the Lease of opts.Extension on opts.NodeName,
// written through client: NewClient(restConfig) in a process without a
// clientset, clientset.New(cs) (package nodehealth.io/heartbeat/clientset)
// in one that has one. It fails when an option is invalid, for instance when
// "<extension>.<node>" would be longer than the 253 characters an object name
// may have, or when the metrics cannot be registered.
func New(client Client, opts Options) (*Renewer, error) {
	if client == nil {
		return nil, errors.New("heartbeat: a client is required")
	}
	name, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	r := &Renewer{
		client: client,
		opts:   opts,
		name:   name,
		m:      opts.Metrics,
		jitter: rand.Float64,
		wake:   make(chan struct{}, 1),
	}
	if r.m == nil {
		r.m = noMetrics{}
	}
	return r, nil
}

// LeaseName returns the namespace and name of the Lease the Renewer writes.
func (r *Renewer) LeaseName() (namespace, name string) { return r.opts.Namespace, r.name }

// Holding reports whether the last successful write left the Lease held by
// this process.
func (r *Renewer) Holding() bool { return r.holding.Load() }

// Run probes and renews until ctx ends, and returns nil then. It never
// releases the Lease on its own when ctx ends; see the Renewer's
// documentation. It returns an error only when the Renewer already runs.
func (r *Renewer) Run(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.end()
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(r.opts.Namespace, r.name))
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting the heartbeat", "holder", r.opts.Holder, "leaseDuration", r.opts.LeaseDuration,
		"renewInterval", r.opts.RenewInterval, "probePeriod", r.probePeriod(), "register", r.opts.Register)

	clk := r.opts.Clock
	nextProbe := clk.Now()
	for {
		if r.opts.Probe != nil && !clk.Now().Before(nextProbe) {
			if !r.probeAndRecord(ctx) {
				return nil
			}
			// Keep the cadence of the schedule rather than of the probe's
			// end, unless the probe overran a whole period.
			nextProbe = nextProbe.Add(r.opts.ProbePeriod)
			if now := clk.Now(); nextProbe.Before(now) {
				nextProbe = now.Add(r.opts.ProbePeriod)
			}
		}
		now, wakeAt, probeNow, stop := r.writeIfDue(ctx)
		if stop {
			return nil
		}
		if probeNow {
			nextProbe = clk.Now()
		}
		if r.opts.Probe != nil && nextProbe.Before(wakeAt) {
			wakeAt = nextProbe
		}
		if !r.sleep(ctx, wakeAt.Sub(now)) {
			return nil
		}
	}
}

// begin marks the Renewer running; a Renewer runs once at a time.
func (r *Renewer) begin() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return errors.New("heartbeat: Run called twice")
	}
	r.running = true
	r.lastLoop.Store(r.opts.Clock.Now().UnixNano())
	if r.opts.Probe == nil {
		// Without a probe the extension is healthy as long as it runs.
		r.setHealthLocked(healthy)
	}
	return nil
}

func (r *Renewer) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	r.lastLoop.Store(0)
}

// probeAndRecord probes once and records the verdict; false when ctx ended
// meanwhile (the verdict of a cancelled probe means nothing).
func (r *Renewer) probeAndRecord(ctx context.Context) bool {
	started := r.opts.Clock.Now()
	err := r.probe(ctx)
	if ctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	r.recordProbeLocked(ctx, err, started)
	r.mu.Unlock()
	return true
}

// writeIfDue writes the Lease if a write is due and lets go of it if it was
// not renewed for a whole duration. It returns when the loop should wake
// next (at least every renew interval, so that Healthz can tell a stuck
// loop from an idle one), whether the verdict went stale and the probe must
// run now, and whether ctx ended.
func (r *Renewer) writeIfDue(ctx context.Context) (now, wakeAt time.Time, probeNow, stop bool) {
	clk := r.opts.Clock
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.want != nil && !r.nextWrite.IsZero() && !clk.Now().Before(r.nextWrite) {
		_ = r.writeLocked(ctx)
	}
	// The verdict went stale (writeLocked): after a freeze the probe is
	// usually overdue anyway, but not when the monotonic clock stood still
	// (a suspended machine).
	probeNow, r.probeNow = r.probeNow, false
	if r.holding.Load() && age(clk.Now(), r.lastRenew) >= r.opts.LeaseDuration {
		// Not renewed for a whole duration (a stale verdict, failing
		// writes): the Lease has expired.
		r.setHoldingLocked(false)
	}
	if ctx.Err() != nil {
		return time.Time{}, time.Time{}, false, true
	}
	now = clk.Now()
	r.lastLoop.Store(now.UnixNano())
	wakeAt = now.Add(r.opts.RenewInterval)
	if r.want != nil && !r.nextWrite.IsZero() && r.nextWrite.Before(wakeAt) {
		wakeAt = r.nextWrite
	}
	return now, wakeAt, probeNow, false
}

// sleep waits d, or until something wakes the loop; false when ctx ended.
func (r *Renewer) sleep(ctx context.Context, d time.Duration) bool {
	timer := r.opts.Clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
	case <-r.wake:
	}
	return true
}

// Release gives up the Lease now: holderIdentity is emptied and the
// nodehealth.io/reason and nodehealth.io/message annotations say why, so the
// node-health controller gates the node at once instead of after expiry.
// The Renewer then stops renewing until Resume, whatever the probe says.
//
// Release may be called while Run runs (an updater releasing with
// nodev1alpha1.ReasonUpdating before it drains the node) or after Run
// returned (a shutdown: ReasonTerminating). A Lease held by another holder
// (a newer pod of the same extension) is left alone. When the write fails
// the error is returned; a running Renewer keeps retrying with back-off.
func (r *Renewer) Release(ctx context.Context, reason, message string) error {
	if reason == "" {
		return errors.New("heartbeat: a release needs a reason")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.poke()
	r.pausedReason, r.pausedMessage = reason, message
	r.want = &target{reason: reason, message: message}
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(r.opts.Namespace, r.name))
	return r.writeLocked(klog.NewContext(ctx, logger))
}

// Resume undoes Release: renewals resume as soon as the probe says the
// extension is healthy.
func (r *Renewer) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.poke()
	r.pausedReason, r.pausedMessage = "", ""
	r.updateWantLocked()
}

// Healthz returns an error when Run's loop has not come round for much
// longer than it should, for a liveness probe of the process embedding the
// Renewer. Failing renewals are not an error here: restarting the process
// does not make an unreachable API server reachable.
func (r *Renewer) Healthz() error {
	last := r.lastLoop.Load()
	if last == 0 {
		return nil
	}
	limit := 3 * (max(r.probePeriod(), r.opts.RenewInterval) + r.opts.ProbeTimeout + r.writeTimeout())
	if since := r.opts.Clock.Since(time.Unix(0, last)); since > limit {
		return fmt.Errorf("heartbeat loop of lease %s/%s has not run for %s", r.opts.Namespace, r.name, since.Round(time.Second))
	}
	return nil
}

func (r *Renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Renewer) probePeriod() time.Duration {
	if r.opts.Probe == nil {
		return 0
	}
	return r.opts.ProbePeriod
}

// writeTimeout bounds one write (with its conflict retry), so that a hung
// connection cannot stall the loop for longer than a renewal interval.
func (r *Renewer) writeTimeout() time.Duration {
	return min(r.opts.RenewInterval, 10*time.Second)
}

// probe runs the probe once, bounded by ProbeTimeout even when the probe
// ignores its context (its goroutine is then left to finish on its own).
func (r *Renewer) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- r.opts.Probe(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("probe timed out after %s", r.opts.ProbeTimeout)
	}
	r.m.Probed(time.Since(start), err == nil)
	return err
}

// freshFor is how long a successful probe vouches for the extension:
// FailureThreshold probe periods, the time the probe needs to find a failure.
func (r *Renewer) freshFor() time.Duration {
	return time.Duration(r.opts.FailureThreshold) * r.opts.ProbePeriod
}

// age is how long ago t was, by the larger of the monotonic and the wall
// clock: Linux's monotonic clock stands still while the machine is suspended,
// the wall clock (which the Lease's renewTime is read against) does not.
func age(now, t time.Time) time.Duration {
	a := now.Sub(t)
	if wall := now.Round(0).Sub(t.Round(0)); wall > a {
		a = wall
	}
	return a
}

// expireStaleVerdictLocked makes a healthy verdict unknown when no probe has
// succeeded for longer than freshFor: the process was frozen or starved, and
// what the probe said before says nothing about the extension now. It
// reports whether it did; nothing is renewed until a probe succeeds again
// (recordProbeLocked), which Run runs at once, and failures count towards
// the release as at start. Run probes before it renews, so in normal
// operation the last probe started less than a period before any renewal.
func (r *Renewer) expireStaleVerdictLocked(ctx context.Context, now time.Time) bool {
	if r.opts.Probe == nil || r.health != healthy {
		return false
	}
	since := age(now, r.lastSuccess)
	if since <= r.freshFor() {
		return false
	}
	klog.FromContext(ctx).Info("No successful probe for longer than failureThreshold × probe period (was the process frozen?): the health verdict is unknown, nothing is renewed until a probe succeeds again",
		"lastSuccess", since.Round(time.Millisecond), "limit", r.freshFor(), "failureThreshold", r.opts.FailureThreshold, "probePeriod", r.opts.ProbePeriod)
	r.successes = 0
	r.probeNow = true
	r.setHealthLocked(healthUnknown)
	return true
}

// recordProbeLocked applies one probe result, of a probe started at started,
// to the health verdict, the way the kubelet's thresholds work.
func (r *Renewer) recordProbeLocked(ctx context.Context, err error, started time.Time) {
	logger := klog.FromContext(ctx)
	if err == nil {
		r.failures = 0
		r.successes++
		r.lastSuccess = started
		switch {
		case r.health == healthUnknown:
			// The first verdict after a start or a freeze: one success is
			// enough, so a restart renews the Lease it left valid without
			// delay.
			r.setHealthLocked(healthy)
		case r.health == unhealthy && r.successes >= r.opts.SuccessThreshold:
			logger.Info("Probe succeeded again; re-acquiring the Lease", "successes", r.successes)
			r.setHealthLocked(healthy)
		}
		return
	}
	r.successes = 0
	r.failures++
	r.lastProbeErr = err
	if r.health != unhealthy && r.failures >= r.opts.FailureThreshold {
		logger.Info("Probe failed; releasing the Lease", "failures", r.failures, "err", err.Error())
		r.setHealthLocked(unhealthy)
		return
	}
	if r.health != unhealthy {
		logger.V(2).Info("Probe failed; below the failure threshold", "failures", r.failures, "threshold", r.opts.FailureThreshold, "err", err.Error())
	}
}

func (r *Renewer) setHealthLocked(h health) {
	if r.health == h {
		return
	}
	r.health = h
	r.updateWantLocked()
}

// updateWantLocked derives what to write from the health verdict and a
// caller's Release, and schedules the write at once unless writes are
// backing off.
func (r *Renewer) updateWantLocked() {
	var want *target
	switch {
	case r.pausedReason != "":
		want = &target{reason: r.pausedReason, message: r.pausedMessage}
	case r.health == healthy:
		want = &target{hold: true}
	case r.health == unhealthy:
		msg := "the health probe failed"
		if r.lastProbeErr != nil {
			msg = r.lastProbeErr.Error()
		}
		want = &target{reason: ReasonProbeFailed, message: msg}
	}
	if want != nil && r.want != nil && *want == *r.want {
		return
	}
	r.want = want
	if want != nil && r.retryDelay == 0 {
		r.nextWrite = r.opts.Clock.Now()
	}
}

// writeLocked establishes r.want and schedules the next write: a jittered
// renew interval after a successful hold, nothing after a successful
// release, and a growing back-off after a failure.
func (r *Renewer) writeLocked(ctx context.Context) error {
	if r.want.hold && r.expireStaleVerdictLocked(ctx, r.opts.Clock.Now()) {
		// No fresh success (frozen, or the probe failed since): r.want is
		// nil now, and nothing is renewed before a probe succeeds.
		return nil
	}
	want := *r.want
	wctx, cancel := context.WithTimeout(ctx, r.writeTimeout())
	defer cancel()
	err := r.apply(wctx, want)
	now := r.opts.Clock.Now()
	logger := klog.FromContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down; not a failure of the API server.
			return err
		}
		r.m.RenewalFailed()
		if r.retryDelay == 0 {
			r.retryDelay = MinRetryInterval
		} else {
			r.retryDelay *= 2
		}
		r.retryDelay = min(time.Duration(float64(r.retryDelay)*(1+r.opts.JitterFactor*r.jitter())), r.opts.retryCap())
		r.nextWrite = now.Add(r.retryDelay)
		if r.holding.Load() && now.Sub(r.lastRenew) >= r.opts.LeaseDuration {
			r.setHoldingLocked(false)
		}
		logger.Error(err, "Writing the Lease failed; retrying with back-off", "retryIn", r.retryDelay, "hold", want.hold)
		return err
	}
	r.retryDelay = 0
	if want.hold {
		r.m.Renewed(now)
		r.lastRenew = now
		if !r.holding.Load() {
			logger.Info("Holding the Lease")
		}
		r.setHoldingLocked(true)
		r.nextWrite = now.Add(time.Duration(float64(r.opts.RenewInterval) * (1 + r.opts.JitterFactor*r.jitter())))
		return nil
	}
	r.setHoldingLocked(false)
	r.nextWrite = time.Time{}
	return nil
}

func (r *Renewer) setHoldingLocked(h bool) {
	r.holding.Store(h)
	r.m.Holding(h)
}
