package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/bench/internal/measure"
)

// loadGen renews every extension Lease once per interval, spread evenly: Lease i of M
// is due at start + k*interval + i*interval/M. It plays the extension-heartbeat
// sidecars of N nodes.
type loadGen struct {
	client   kubernetes.Interface
	ns       string
	interval time.Duration
	duration int32
	workers  int

	mu     sync.Mutex
	leases []*leaseState

	renewals atomic.Int64
	failures atomic.Int64

	// Collected only while measuring.
	measuring atomic.Bool
	statsMu   sync.Mutex
	latencies []time.Duration // request round trips
	lags      []time.Duration // how late a renewal was sent against its schedule
}

type leaseState struct {
	name    string
	obj     *coordinationv1.Lease
	lastAck time.Time // when the last successful renewal returned
	// recent holds the last few renewal acknowledgements, oldest first.
	recent  []time.Time
	stopped bool
	busy    bool
	// released: renewals send an empty holder (the extension asks to be
	// treated as not ready) and keep the last renewTime.
	released bool
}

type dueLease struct {
	idx int
	due time.Time
}

func newLoadGen(client kubernetes.Interface, ns string, interval, duration time.Duration, workers int) *loadGen {
	return &loadGen{client: client, ns: ns, interval: interval, duration: int32(duration.Seconds()), workers: workers}
}

// create creates one Lease per name, renewed now, concurrently.
func (g *loadGen) create(ctx context.Context, names []string) error {
	g.leases = make([]*leaseState, len(names))
	err := measure.Parallel(ctx, len(names), g.workers, func(i int) error {
		ext, node, err := nodev1alpha1.ParseLeaseName(names[i])
		if err != nil {
			return err
		}
		now := time.Now()
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: g.ns, Labels: nodev1alpha1.LeaseLabels(ext, node)},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(ext + "-" + node),
				LeaseDurationSeconds: ptr.To(g.duration),
				AcquireTime:          &metav1.MicroTime{Time: now},
				RenewTime:            &metav1.MicroTime{Time: now},
			},
		}
		created, err := g.client.CoordinationV1().Leases(g.ns).Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating lease %s: %w", names[i], err)
		}
		g.mu.Lock()
		g.leases[i] = &leaseState{name: names[i], obj: created, lastAck: time.Now()}
		g.mu.Unlock()
		return nil
	})
	return err
}

// run renews the Leases on schedule until ctx ends.
func (g *loadGen) run(ctx context.Context) {
	due := make(chan dueLease, g.workers)
	var wg sync.WaitGroup
	for range g.workers {
		wg.Go(func() {
			for d := range due {
				lag := time.Since(d.due)
				if g.renew(ctx, d.idx, false) && g.measuring.Load() {
					g.statsMu.Lock()
					g.lags = append(g.lags, lag)
					g.statsMu.Unlock()
				}
			}
		})
	}
	defer wg.Wait()
	defer close(due)
	m := len(g.leases)
	step := g.interval / time.Duration(m)
	start := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for k := 0; ; {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for {
				at := start.Add(time.Duration(k) * step)
				if at.After(now) {
					break
				}
				select {
				case due <- dueLease{idx: k % m, due: at}:
				case <-ctx.Done():
					return
				}
				k++
			}
		}
	}
}

// renew renews Lease i now unless it is stopped (or force) and reports whether it did.
func (g *loadGen) renew(ctx context.Context, i int, force bool) bool {
	g.mu.Lock()
	st := g.leases[i]
	if (st.stopped && !force) || st.busy {
		g.mu.Unlock()
		return false
	}
	st.busy = true
	obj := st.obj.DeepCopy()
	released := st.released
	g.mu.Unlock()
	if released {
		obj.Spec.HolderIdentity = nil
	} else if obj.Spec.HolderIdentity == nil {
		obj.Spec.HolderIdentity = ptr.To(st.name)
	}
	defer func() {
		g.mu.Lock()
		st.busy = false
		g.mu.Unlock()
	}()

	leases := g.client.CoordinationV1().Leases(g.ns)
	for attempt := 0; attempt < 3; attempt++ {
		sent := time.Now()
		if !released {
			obj.Spec.RenewTime = &metav1.MicroTime{Time: sent}
		} else if obj.Spec.HolderIdentity != nil {
			obj.Spec.HolderIdentity = nil // a fresh read after a conflict
		}
		updated, err := leases.Update(ctx, obj, metav1.UpdateOptions{})
		if err == nil {
			ack := time.Now()
			g.mu.Lock()
			st.obj, st.lastAck = updated, ack
			st.recent = append(st.recent, ack)
			if len(st.recent) > 8 {
				st.recent = st.recent[1:]
			}
			g.mu.Unlock()
			g.renewals.Add(1)
			if g.measuring.Load() {
				g.statsMu.Lock()
				g.latencies = append(g.latencies, ack.Sub(sent))
				g.statsMu.Unlock()
			}
			return true
		}
		if !apierrors.IsConflict(err) || ctx.Err() != nil {
			break
		}
		fresh, err := leases.Get(ctx, obj.Name, metav1.GetOptions{})
		if err != nil {
			break
		}
		obj = fresh
	}
	if ctx.Err() == nil {
		g.failures.Add(1)
	}
	return false
}

// stop stops renewing Lease i (a crashed extension: the Lease stays as it is).
func (g *loadGen) stop(i int) {
	g.mu.Lock()
	g.leases[i].stopped = true
	g.mu.Unlock()
}

// resume renews Lease i now and from then on, and returns when that first renewal
// returned.
func (g *loadGen) resume(ctx context.Context, i int) (time.Time, error) {
	for {
		g.mu.Lock()
		busy := g.leases[i].busy
		g.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !g.renew(ctx, i, true) {
		return time.Time{}, fmt.Errorf("renewing %s failed", g.leases[i].name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leases[i].stopped = false
	return g.leases[i].lastAck, nil
}

// setReleased releases Lease i (release) or takes it again, at once, and keeps
// renewing it in that state.
func (g *loadGen) setReleased(ctx context.Context, i int, release bool) error {
	for {
		g.mu.Lock()
		st := g.leases[i]
		if !st.busy {
			st.released = release
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	if !g.renew(ctx, i, true) {
		return fmt.Errorf("writing %s (released=%t) failed", g.leases[i].name, release)
	}
	return nil
}

// lastAck is when Lease i was last renewed, once nothing is in flight for it.
func (g *loadGen) lastAck(i int) time.Time {
	for {
		g.mu.Lock()
		st := g.leases[i]
		if !st.busy {
			defer g.mu.Unlock()
			return st.lastAck
		}
		g.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// firstAckAfter returns the first renewal of Lease i acknowledged at or after t
// among the recent ones, or zero.
func (g *loadGen) firstAckAfter(i int, t time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, a := range g.leases[i].recent {
		if !a.Before(t) {
			return a
		}
	}
	return time.Time{}
}

// startMeasuring and stopMeasuring bracket the steady-state window.
func (g *loadGen) startMeasuring() {
	g.statsMu.Lock()
	g.latencies, g.lags = nil, nil
	g.statsMu.Unlock()
	g.measuring.Store(true)
}

func (g *loadGen) stopMeasuring() (latencies, lags []time.Duration) {
	g.measuring.Store(false)
	g.statsMu.Lock()
	defer g.statsMu.Unlock()
	return g.latencies, g.lags
}
