package nodehealth

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// staleAfterIntervals is how many canary intervals may pass without the
// controller observing its own renewal before it stops trusting its view.
const staleAfterIntervals = 3

// canary checks that the controller sees the world as it is. It renews a Lease
// and watches for its own renewals through the same Lease informer that feeds
// readiness: if its watch is stuck or far behind, every extension Lease would
// look expired, and the controller must not taint the cluster for it.
type canary struct {
	c        *Controller
	interval time.Duration

	mu           sync.Mutex
	lastObserved time.Time
	isStale      bool
}

func newCanary(c *Controller, interval time.Duration) *canary {
	return &canary{c: c, interval: interval, lastObserved: c.clock.Now()}
}

// observed is called for every event of the canary Lease.
func (k *canary) observed(lease *coordinationv1.Lease) {
	if lease.Spec.RenewTime == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Only our own renewals prove the watch is current.
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == k.c.opts.Identity {
		k.lastObserved = k.c.clock.Now()
	}
}

func (k *canary) stale() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.isStale
}

// check updates the stale state and reports a change.
func (k *canary) check(now time.Time) (stale, changed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stale = now.Sub(k.lastObserved) > staleAfterIntervals*k.interval
	changed = stale != k.isStale
	k.isStale = stale
	return stale, changed
}

func (k *canary) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(k.c.opts.LeaseNamespace, nodev1alpha1.ControllerCanaryLease))
	k.mu.Lock()
	// A full set of intervals of grace from the start.
	k.lastObserved = k.c.clock.Now()
	k.mu.Unlock()
	ticker := k.c.clock.NewTicker(k.interval)
	defer ticker.Stop()
	for {
		if err := k.renew(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Renewing the canary Lease failed")
		}
		stale, changed := k.check(k.c.clock.Now())
		if changed {
			if stale {
				logger.Info("Not observing my own canary renewals: suspending taint additions and evictions until my view of the cluster is current again",
					"interval", k.interval, "staleAfter", staleAfterIntervals*k.interval)
				k.c.metrics.OwnViewStale.Set(1)
				k.c.metrics.Suspensions.WithLabelValues("own-view").Inc()
				k.c.updateEscalationClocks(k.c.clock.Now())
			} else {
				logger.Info("Observing my own canary renewals again: resuming taint additions and evictions")
				k.c.metrics.OwnViewStale.Set(0)
				k.c.updateEscalationClocks(k.c.clock.Now())
				k.c.enqueueAll()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (k *canary) renew(ctx context.Context) error {
	leases := k.c.client.CoordinationV1().Leases(k.c.opts.LeaseNamespace)
	now := metav1.NewMicroTime(k.c.clock.Now())
	duration := int32((staleAfterIntervals * k.interval).Seconds())
	lease, err := leases.Get(ctx, nodev1alpha1.ControllerCanaryLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: nodev1alpha1.ControllerCanaryLease, Namespace: k.c.opts.LeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.c.opts.Identity), RenewTime: &now,
				LeaseDurationSeconds: ptr.To(duration)},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(k.c.opts.Identity)
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(duration)
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
