package framework

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/clientset"
)

// RenewerOptions say which extension Lease an ExtensionRenewer keeps and how.
type RenewerOptions struct {
	// Namespace, Extension, Node and Holder are heartbeat.Options'
	// Namespace, Extension, NodeName and Holder.
	Namespace, Extension, Node, Holder string
	// Duration and Interval are the Lease's duration and the time between
	// renewals (the heartbeat's defaults when zero).
	Duration, Interval time.Duration
	// Skew is added to every time the renewer writes, like a node whose
	// clock is wrong.
	Skew time.Duration
	// Register and AffectsReadiness are heartbeat.Options' fields: a Lease
	// that puts its extension on the node's list itself.
	Register         bool
	AffectsReadiness *bool
}

// ExtensionRenewer keeps an extension's Lease renewed the way an extension
// does: it is nodehealth.io/heartbeat's Renewer (no probe: always healthy),
// which tests stop without releasing (the extension died silently) or
// release with a reason (the extension asked for the taint).
type ExtensionRenewer struct {
	renewer  *heartbeat.Renewer
	name     string
	cancel   context.CancelFunc
	done     chan struct{}
	counts   *renewalCounts
	stopOnce atomic.Bool
}

// StartExtensionRenewer starts renewing and returns once the Lease was first
// written (created or renewed), or with the error that kept it from that.
func StartExtensionRenewer(ctx context.Context, client kubernetes.Interface, o RenewerOptions) (*ExtensionRenewer, error) {
	counts := &renewalCounts{Client: clientset.New(client), first: make(chan struct{})}
	var clk clock.WithTicker = clock.RealClock{}
	if o.Skew != 0 {
		clk = skewedClock{RealClock: clock.RealClock{}, skew: o.Skew}
	}
	r, err := heartbeat.New(counts, heartbeat.Options{
		Namespace: o.Namespace, NodeName: o.Node, Extension: o.Extension, Holder: o.Holder,
		LeaseDuration: o.Duration, RenewInterval: o.Interval,
		Register: o.Register, AffectsReadiness: o.AffectsReadiness,
		Clock: clk,
	})
	if err != nil {
		return nil, err
	}
	_, name := r.LeaseName()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &ExtensionRenewer{renewer: r, name: name, cancel: cancel, done: make(chan struct{}), counts: counts}
	runErr := make(chan error, 1)
	go func() {
		defer close(e.done)
		runErr <- r.Run(runCtx)
	}()
	select {
	case <-counts.first:
		return e, nil
	case err := <-runErr:
		cancel()
		return nil, fmt.Errorf("renewing Lease %s stopped before its first write: %w", name, err)
	case <-ctx.Done():
		e.Stop()
		return nil, fmt.Errorf("the Lease %s was not written (%d failed writes): %w", name, counts.failed.Load(), context.Cause(ctx))
	}
}

// Name is the Lease's name.
func (e *ExtensionRenewer) Name() string { return e.name }

// Stop ends the renewals and leaves the Lease as it is, to expire.
func (e *ExtensionRenewer) Stop() {
	if e.stopOnce.CompareAndSwap(false, true) {
		e.cancel()
	}
	<-e.done
}

// Release stops renewing and releases the Lease with a reason and a message,
// as a heartbeat whose probe failed does. Each write is bounded by the renew
// interval; a heartbeat's own loop would write the release again after a
// failed one, and with the loop stopped Release does so itself until ctx
// ends: an API server slowed by a loaded machine is not what a test asks about.
func (e *ExtensionRenewer) Release(ctx context.Context, reason, message string) error {
	e.Stop()
	for attempt := 1; ; attempt++ {
		err := e.renewer.Release(ctx, reason, message)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("releasing Lease %s failed %d times, the last: %w", e.name, attempt, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// FailedWrites counts the updates and creates of the Lease that failed
// (refused, or unanswered within the renew interval), each retried with the
// heartbeat's back-off.
func (e *ExtensionRenewer) FailedWrites() int64 { return e.counts.failed.Load() }

// Renewals counts the writes that held the Lease.
func (e *ExtensionRenewer) Renewals() int64 { return e.counts.renewed.Load() }

// LastRenewal is when the latest renewal was sent (on the real clock): the
// controller cannot have observed it earlier.
func (e *ExtensionRenewer) LastRenewal() time.Time {
	return time.Unix(0, e.counts.last.Load())
}

// renewalCounts is the Lease client of the renewer, counting the writes
// that hold the Lease: what the tests wait on.
type renewalCounts struct {
	heartbeat.Client
	renewed, failed atomic.Int64
	// last is when the latest holding write was sent (UnixNano): the
	// controller cannot have observed it earlier.
	last      atomic.Int64
	first     chan struct{}
	firstOnce atomic.Bool
}

func (c *renewalCounts) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	sent := time.Now()
	out, err := c.Client.CreateLease(ctx, l)
	c.count(l, sent, err)
	return out, err
}

func (c *renewalCounts) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	sent := time.Now()
	out, err := c.Client.UpdateLease(ctx, l)
	c.count(l, sent, err)
	return out, err
}

func (c *renewalCounts) count(l *coordinationv1.Lease, sent time.Time, err error) {
	if err != nil {
		c.failed.Add(1)
		return
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return
	}
	c.renewed.Add(1)
	c.last.Store(sent.UnixNano())
	if c.firstOnce.CompareAndSwap(false, true) {
		close(c.first)
	}
}

// skewedClock is the real clock read skew off: its timers are the real ones.
type skewedClock struct {
	clock.RealClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.RealClock.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
