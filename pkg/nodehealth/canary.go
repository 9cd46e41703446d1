package nodehealth

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// staleAfterIntervals is how many canary intervals may pass without the
// controller observing its own renewal before it stops trusting its view.
const staleAfterIntervals = 3

// canaryConfig is what the canary needs: narrow inputs, like kwok's
// NodeLeaseControllerConfig, so it can be reused and tested on its own.
type canaryConfig struct {
	client    kubernetes.Interface
	namespace string
	// identity is the holderIdentity the canary writes; only renewals with
	// it prove the watch is current.
	identity string
	clock    clock.WithTicker
	interval time.Duration
	// onChange is called, from the canary's goroutine, when the view turns
	// stale or current again, with the instant of the change.
	onChange func(ctx context.Context, stale bool, at time.Time)
}

// canary checks that the controller sees the world as it is. It renews a Lease
// and watches for its own renewals through the same Lease informer that feeds
// readiness: if its watch is stuck or far behind, every extension Lease would
// look expired, and the controller must not taint the cluster for it.
type canary struct {
	cfg canaryConfig

	mu           sync.Mutex
	lastObserved time.Time
	// lastRenewal is the renewTime of the last renewal observed: a re-list
	// replays the canary Lease as it is, which proves nothing about the
	// watch if the renewal is one already seen.
	lastRenewal time.Time
	// horizon is how far the view vouches for the world: the renewTime
	// (this controller's clock when the renewal went out) of the last new
	// renewal observed, or the moment the controller began trusting its
	// view. The watch delivers changes in the order they were committed,
	// so every write committed before that renewal was observed before
	// it: no Lease renewal up to the horizon is hidden. After it one may
	// be, however current the view looks (vouchedUntil).
	horizon time.Time
	// confirmedFrom is when the last renewal went out, periodic or asked
	// for by confirm: a confirmation needed up to an instant before it is
	// already on its way.
	confirmedFrom time.Time
	// confirming is set while a renewal asked for by confirm is in flight;
	// confirmNext is the latest need asked for meanwhile that it does not
	// cover (an expiry after it went out).
	confirming  bool
	confirmNext time.Time
	// announced is what check last reported to the run loop, only to tell
	// a change: whether the controller's view is stale is the
	// controller's one record (Controller.viewStale), set by the callback.
	announced bool
	// denied is set once a renewal was refused, so it is explained once.
	denied bool
	// latest is the canary Lease as last delivered by the watch, whoever
	// wrote it: a renewal updates it without reading it first (renew).
	latest *coordinationv1.Lease
}

func newCanary(cfg canaryConfig) *canary {
	now := cfg.clock.Now()
	return &canary{cfg: cfg, lastObserved: now, horizon: now}
}

// observed is called for every event of the canary Lease. It reports
// whether the horizon moved (vouchedUntil).
func (k *canary) observed(lease *coordinationv1.Lease) (advanced bool) {
	if lease.Spec.RenewTime == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.latest = lease
	// Only our own renewals prove the watch is current, and only new ones:
	// an event that carries a renewal already observed (a re-list or a
	// re-watch replaying the object, served perhaps from a cache that is
	// itself behind) says nothing about now.
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != k.cfg.identity {
		return false
	}
	if renewed := lease.Spec.RenewTime.Time; !renewed.Equal(k.lastRenewal) {
		k.lastRenewal = renewed
		k.lastObserved = k.cfg.clock.Now()
		if renewed.After(k.horizon) {
			k.horizon, advanced = renewed, true
		}
	}
	return advanced
}

// vouchedUntil is the horizon: the instant up to which the view is known
// to hold every renewal. A Lease whose expiry lies beyond it may have been
// renewed unseen, however recently the canary was observed: a renewer slowed
// down just before a stall (an API server that crawls before etcd stops)
// left its Lease older than the canary's, and it expires first. Its expiry
// counts once the horizon passes it (confirm).
func (k *canary) vouchedUntil() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.horizon
}

// confirm makes sure that a renewal goes out at or after need, renewing now
// if none did: once its event is observed, the horizon is past need. One
// renewal is in flight at a time: a worker that asks while one is finds it
// covers its need (it went out after the expiry) or leaves the need to the
// renewal after it. So a burst of expiries, each at its own instant, costs a
// renewal per round trip, not one per node.
//
// The worker that sends a renewal waits for it, as for any write, and no
// longer: it reports more when needs came due meanwhile that the renewal
// does not cover, and its caller has those nodes judged again, so that the
// first of them to ask sends the next one. A worker that sent renewals for as
// long as expiries kept coming held its own node out of the queue for the
// whole burst: 3 s behind its expiry in a 1,000-node benchmark, where the
// others took a round trip. A renewal that fails is not tried again here;
// the run loop's next one confirms as well. The callers take no lock the
// run loop holds, so neither waits for the other's request.
func (k *canary) confirm(ctx context.Context, need time.Time) (more bool) {
	k.mu.Lock()
	switch {
	case !k.confirmedFrom.Before(need):
		k.mu.Unlock()
		return false
	case k.confirming:
		if need.After(k.confirmNext) {
			k.confirmNext = need
		}
		k.mu.Unlock()
		return false
	}
	sent := k.cfg.clock.Now()
	k.confirming, k.confirmedFrom = true, sent
	k.mu.Unlock()
	renewCtx, cancel := context.WithTimeout(ctx, k.cfg.interval)
	err := k.renew(renewCtx, sent)
	cancel()
	if err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).V(2).Info("Renewing the canary Lease to confirm an expiry failed; the next renewal confirms it",
			"lease", klog.KRef(k.cfg.namespace, nodev1alpha1.ControllerCanaryLease), "err", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	more = k.confirmNext.After(k.confirmedFrom)
	k.confirming, k.confirmNext = false, time.Time{}
	return more
}

// stale reports whether the canary judges the view stale now: as last
// announced, or overdue.
func (k *canary) stale() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.announced || k.overdueLocked()
}

// overdue reports whether no renewal was observed for longer than the
// canary allows, by the clock itself: a decision taken between the moment
// the view turned stale and the run loop's check of it (a starved
// goroutine) already holds back.
func (k *canary) overdue() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.overdueLocked()
}

func (k *canary) overdueLocked() bool {
	return k.cfg.clock.Since(k.lastObserved) > staleAfterIntervals*k.cfg.interval
}

// staleAt is when the view turns stale unless a renewal is observed first.
func (k *canary) staleAt() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastObserved.Add(staleAfterIntervals * k.cfg.interval)
}

// check updates the stale state and reports a change.
func (k *canary) check(now time.Time) (stale, changed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stale = now.Sub(k.lastObserved) > staleAfterIntervals*k.cfg.interval
	changed = stale != k.announced
	k.announced = stale
	return stale, changed
}

// run renews the canary and checks the view until ctx ends, from the trust
// begin gave it. Renewals and
// checks are separate loops: a renewal that hangs (etcd paused, a stalled
// connection) must not hold back the check, which is the very guard against
// that outage; the check wakes exactly when the view would turn stale, so
// that the guard fires 3 intervals after the last observed renewal, before
// a healthy Lease can expire (validation keeps 3 × canaryInterval below
// GuardDeadline: 3/4 × minimumLeaseDuration + renewalGrace).
func (k *canary) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(k.cfg.namespace, nodev1alpha1.ControllerCanaryLease))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		k.renewLoop(ctx, logger)
	}()
	defer func() { <-renewed }()
	for {
		now := k.cfg.clock.Now()
		stale, _ := k.tick(ctx, now)
		// Check again at the next interval, or when the view turns stale
		// if that is sooner.
		next := k.cfg.interval
		if !stale {
			next = min(next, k.staleAt().Sub(now)+time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-k.cfg.clock.After(max(next, time.Millisecond)):
		}
	}
}

// begin gives the view a full set of intervals of grace from now: the
// controller starts (or takes over) trusting its view.
func (k *canary) begin(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastObserved, k.horizon = now, now
}

// tick is one check of the run loop: it judges the view at now and, when
// that changes, says so in the log and tells onChange.
func (k *canary) tick(ctx context.Context, now time.Time) (stale, changed bool) {
	stale, changed = k.check(now)
	if !changed {
		return stale, false
	}
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(k.cfg.namespace, nodev1alpha1.ControllerCanaryLease))
	if stale {
		logger.Info("Not observing my own canary renewals: suspending taint additions and evictions until my view of the cluster is current again",
			"interval", k.cfg.interval, "staleAfter", staleAfterIntervals*k.cfg.interval)
	} else {
		logger.Info("Observing my own canary renewals again: resuming taint additions and evictions; every Lease gets a full duration of grace from now")
	}
	if k.cfg.onChange != nil {
		k.cfg.onChange(ctx, stale, now)
	}
	return stale, true
}

// renewLoop renews the canary every interval; each attempt is bounded by the
// interval, so that the next one goes out on time after a hung request. It
// waits on a timer armed after each renewal rather than on a ticker: a
// simulation driving the controller's clock then sees the loop parked
// between two renewals, as it sees the check loop.
func (k *canary) renewLoop(ctx context.Context, logger klog.Logger) {
	due := k.cfg.clock.Now()
	for {
		renewCtx, cancel := context.WithTimeout(ctx, k.cfg.interval)
		sent := k.cfg.clock.Now()
		k.mu.Lock()
		if sent.After(k.confirmedFrom) {
			k.confirmedFrom = sent
		}
		k.mu.Unlock()
		if err := k.renew(renewCtx, sent); err != nil && ctx.Err() == nil {
			k.reportRenewError(logger, err)
		}
		cancel()
		// An interval after the last renewal went out; one that took
		// longer (its timeout runs on real time) is followed at once.
		now := k.cfg.clock.Now()
		if due = due.Add(k.cfg.interval); due.Before(now) {
			due = now
		}
		select {
		case <-ctx.Done():
			return
		case <-k.cfg.clock.After(due.Sub(now)):
		}
	}
}

// reportRenewError explains a refused renewal once: an admission policy that
// does not admit this controller's identity (a renamed ServiceAccount) makes
// the controller blind, which must not look like a passing network error.
func (k *canary) reportRenewError(logger klog.Logger, err error) {
	if apierrors.IsConflict(err) {
		// A renewal confirm made meanwhile: the Lease is renewed.
		logger.V(2).Info("The canary Lease was renewed meanwhile to confirm an expiry", "err", err)
		return
	}
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		k.mu.Lock()
		first := !k.denied
		k.denied = true
		k.mu.Unlock()
		if first {
			logger.Error(err, "The API server refuses the canary Lease: the controller cannot check its own view and will suspend taint additions and evictions. Check that this controller's ServiceAccount is bound to the controller's Role in the extension namespace: it grants the Lease permissions and the permission renew canaryleases.nodehealth.io by which the ValidatingAdmissionPolicy in deploy/extensions/policy.yaml recognises the controller",
				"identity", k.cfg.identity)
		}
		return
	}
	logger.Error(err, "Renewing the canary Lease failed")
}

// renew writes a renewal that went out at `at`. It updates the Lease as the
// watch last delivered it, without reading it first: a renewal is then one
// round trip, and a confirmation (confirm) adds one round trip and its watch
// event to the detection of an expiry, not two. A Lease the watch has not
// delivered, or one changed since (a conflict: the other loop's renewal, a
// watch that is behind), is read and written again, as it always was.
func (k *canary) renew(ctx context.Context, at time.Time) error {
	leases := k.cfg.client.CoordinationV1().Leases(k.cfg.namespace)
	k.mu.Lock()
	latest := k.latest
	k.mu.Unlock()
	if latest != nil {
		_, err := leases.Update(ctx, k.renewed(latest.DeepCopy(), at), metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	lease, err := leases.Get(ctx, nodev1alpha1.ControllerCanaryLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, k.renewed(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: nodev1alpha1.ControllerCanaryLease, Namespace: k.cfg.namespace},
		}, at), metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	_, err = leases.Update(ctx, k.renewed(lease, at), metav1.UpdateOptions{})
	return err
}

// renewed sets lease's spec to this controller's renewal at `at`.
func (k *canary) renewed(lease *coordinationv1.Lease, at time.Time) *coordinationv1.Lease {
	lease.Spec.HolderIdentity = ptr.To(k.cfg.identity)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: at}
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(max((staleAfterIntervals * k.cfg.interval).Seconds(), 1)))
	return lease
}
