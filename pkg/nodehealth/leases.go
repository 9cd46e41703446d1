package nodehealth

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// DefaultLeaseDuration applies to Leases without spec.leaseDurationSeconds; it
// is the kubelet's node Lease duration.
const DefaultLeaseDuration = nodev1alpha1.DefaultLeaseDuration

// leaseObservation is what the controller knows about one extension Lease. Its
// freshness is judged by observedAt, the controller's own clock at the moment
// it saw spec.renewTime change, never by comparing renewTime with that clock:
// node clocks drift, and a renewTime an hour in the future must not keep an
// extension ready for an hour.
type leaseObservation struct {
	holder   string
	duration time.Duration
	// renewTime is the Lease's own claim, kept for messages only.
	renewTime time.Time
	// observedAt is when the controller last observed a renewal; zero when the
	// Lease was never renewed. Only it ends a gate or a fail-open.
	observedAt time.Time
	// graceFrom is when an own-view recovery gave the Lease a full duration
	// of grace (refresh): it moves the expiry, never the last renewal, so
	// the grace can be told from a renewal the catching-up watch delivered.
	graceFrom time.Time
	// readyWhenStale: the Lease was ready when the own-view guard fired
	// (snapshot); only such Leases get the recovery's grace.
	readyWhenStale bool
	// startGrace: observedAt is when this controller first saw the Lease,
	// not a change it observed: the grace every Lease gets at a start or a
	// failover, which a dead mark of the boot record withholds.
	startGrace bool
	// releasedAt is when the controller observed the release (the holder
	// becoming empty); zero while the Lease is held. A release keeps the
	// last renewTime, so observedAt says nothing about when it happened.
	releasedAt time.Time
	reason     string
	message    string
}

// released reports whether the extension gave up its Lease to ask to be
// treated as not ready now.
func (o *leaseObservation) released() bool { return o.holder == "" }

// expiresAt is when the Lease stops counting as renewed.
func (o *leaseObservation) expiresAt(grace time.Duration) time.Time {
	from := o.observedAt
	if o.graceFrom.After(from) {
		from = o.graceFrom
	}
	return from.Add(o.duration + grace)
}

// leaseTracker records, per Lease, when the controller observed its renewals.
// It is fed by the Lease informer's handlers, which run one at a time, and read
// by the workers.
type leaseTracker struct {
	clock clock.PassiveClock
	// minDuration is the shortest duration honoured (Options.MinimumLeaseDuration).
	minDuration time.Duration

	// Keyed by namespace and name as a struct, not a joined string: a
	// lookup per received renewal then allocates nothing.
	mu     sync.RWMutex
	leases map[types.NamespacedName]*leaseObservation
	// deleted remembers when Leases were deleted, so that a missing Lease's
	// failure is timed from its deletion rather than from the sync that
	// noticed it. Entries go when the Lease comes back or after
	// deletedMemory.
	deleted map[types.NamespacedName]time.Time
}

// deletedMemory bounds how long a deletion instant is remembered: a node
// whose Lease vanished is synced within moments, and the Leases of deleted
// nodes must not be remembered forever.
const deletedMemory = time.Hour

func newLeaseTracker(clk clock.PassiveClock, minDuration time.Duration) *leaseTracker {
	return &leaseTracker{clock: clk, minDuration: minDuration, leases: map[types.NamespacedName]*leaseObservation{},
		deleted: map[types.NamespacedName]time.Time{}}
}

// observationOf is what the Lease itself says: its holder, duration (at
// least minDuration), renewTime and release annotations. When it was
// observed is the tracker's to say.
func observationOf(lease *coordinationv1.Lease, minDuration time.Duration) leaseObservation {
	o := leaseObservation{duration: DefaultLeaseDuration}
	if lease.Spec.HolderIdentity != nil {
		o.holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.LeaseDurationSeconds != nil && *lease.Spec.LeaseDurationSeconds > 0 {
		o.duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	o.duration = max(o.duration, minDuration)
	if lease.Spec.RenewTime != nil {
		o.renewTime = lease.Spec.RenewTime.Time
	}
	o.reason = lease.Annotations[nodev1alpha1.ReasonAnnotation]
	o.message = lease.Annotations[nodev1alpha1.MessageAnnotation]
	return o
}

// observe records the Lease as seen now and reports whether what readiness
// depends on changed, with what was known before (known: the Lease was seen
// before) and what is known now. A Lease seen for the first time counts as
// renewed now if it carries a renewTime: after a start or a leader failover
// every Lease gets a full duration of grace. A known Lease's record is
// updated in place: a renewal allocates nothing.
func (t *leaseTracker) observe(lease *coordinationv1.Lease) (prev, next leaseObservation, known, changed bool) {
	key := types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name}
	next = observationOf(lease, t.minDuration)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.deleted) > 0 {
		delete(t.deleted, key)
	}
	stored, known := t.leases[key]
	if known {
		prev = *stored
	}
	if next.released() {
		next.releasedAt = t.clock.Now()
		if known && prev.released() {
			next.releasedAt = prev.releasedAt
		}
	}
	switch {
	case lease.Spec.RenewTime == nil:
		// Never renewed: not ready whatever its holder says.
	case !known && next.released():
		// First seen released: whatever renewed it did so before this
		// controller could see it; no renewal is observed (a startup
		// timeout still counts it as never come up).
	case !known:
		next.observedAt, next.startGrace = t.clock.Now(), true
	case !prev.renewTime.Equal(next.renewTime), prev.holder != next.holder && next.holder != "":
		next.observedAt = t.clock.Now()
	default:
		next.observedAt, next.startGrace = prev.observedAt, prev.startGrace
	}
	if known {
		// A release ends the recovery's grace, but not the snapshot: a
		// Lease ready when the guard fired that is held again at the
		// recovery gets the grace (refresh), since the stale view may hide
		// its renewals after its comeback as much as anyone's (simulation
		// seed 3821303460705370583).
		next.readyWhenStale = prev.readyWhenStale
		if !next.released() {
			next.graceFrom = prev.graceFrom
		}
	}
	if !known {
		o := next
		t.leases[key] = &o
		return prev, next, false, true
	}
	*stored = next
	// startGrace ending is a change even in the very instant the Lease was
	// first seen: it ends a dead mark of the boot record (markedDead).
	changed = prev.holder != next.holder || !prev.expiresAt(0).Equal(next.expiresAt(0)) || prev.startGrace != next.startGrace ||
		prev.duration != next.duration || prev.reason != next.reason || prev.message != next.message
	return prev, next, true, changed
}

// snapshot records which Leases are ready at staleSince, the moment the
// own-view guard fired. Readiness is judged then, not when the view
// recovers: by then the catching-up watch may have delivered a renewal of a
// Lease that was dead when the view went stale, and that Lease must not get
// the recovery's grace (issue 33, simulation seed 2696022713275813172).
func (t *leaseTracker) snapshot(staleSince time.Time, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.leases {
		o.readyWhenStale = !o.observedAt.IsZero() && !o.released() && staleSince.Before(o.expiresAt(grace))
	}
}

// notReadyWhenStale takes a Lease out of the snapshot: it was not ready
// when the view went stale, whatever its observation says.
func (t *leaseTracker) notReadyWhenStale(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.leases[types.NamespacedName{Namespace: namespace, Name: name}]; ok {
		o.readyWhenStale = false
	}
}

// refresh gives a full duration of grace, from now, to every Lease that was
// ready when the controller's own view went stale (snapshot) and is not
// released now: renewals the stale watch may have hidden must not expire
// anything. The grace moves the expiry only: the last observed renewal stays
// what it was, so the grace never ends a gate or a fail-open. A Lease
// already expired or released when the view went stale stays as it was, so
// that a node failing before the stall is still failing after it and its
// eviction clock keeps its time (docs/controller.md, own-view recovery).
func (t *leaseTracker) refresh(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.leases {
		if o.readyWhenStale && !o.released() {
			o.graceFrom = now
		}
		o.readyWhenStale = false
	}
}

// forget drops a deleted Lease, remembering when it went.
func (t *leaseTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	for key, at := range t.deleted {
		if now.Sub(at) > deletedMemory {
			delete(t.deleted, key)
		}
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	delete(t.leases, key)
	t.deleted[key] = now
}

// deletedAt returns when a Lease the tracker knew was deleted, if it
// remembers.
func (t *leaseTracker) deletedAt(namespace, name string) (time.Time, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	at, ok := t.deleted[types.NamespacedName{Namespace: namespace, Name: name}]
	return at, ok
}

// get returns a copy of what is known about a Lease.
func (t *leaseTracker) get(namespace, name string) (leaseObservation, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.leases[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return leaseObservation{}, false
	}
	return *o, true
}
