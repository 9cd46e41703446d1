// Package leaderelection runs a component's work behind client-go leader
// election and gives the leadership back when the component stops: the
// node-health controller and the update operator share it.
//
// Stopping (SIGTERM, a restart for a changed configuration file, Release)
// first ends the work and waits for it, then releases the leader Lease, so
// that the next leader neither waits out the lease nor overlaps with a
// leader that is still writing. Losing the lease without being asked to stop
// is an error: the component exits and restarts clean rather than running on
// with a possibly divergent state.
//
// Process is the whole process of such a component around its work: the
// election (or none), serving health and metrics, and the wait for the work.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/util/uuid"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// QPS is the budget of the election's own client, so that renewals never
// wait behind the component's work traffic.
const QPS = 5

// healthzTimeout is how long past a missed renewal /healthz still passes
// (kube-controller-manager's value).
const healthzTimeout = 20 * time.Second

// ErrLostLeadership is returned by Run when the lease was lost while the
// component was not stopping.
var ErrLostLeadership = errors.New("lost leadership")

// Config is the election of one component, in plain values.
type Config struct {
	// Name names the election in logs and metrics (the component's name).
	Name string
	// Identity is this replica's holder identity; unique per process.
	Identity string
	// ResourceLock is the lock type ("leases"); Namespace and LockName
	// name the lock object.
	ResourceLock, Namespace, LockName string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Leading, if not nil, is set to 1 while the work runs as leader and
	// to 0 otherwise (NewLeadingGauge).
	Leading prometheus.Gauge
}

// Elector campaigns for one component.
type Elector struct {
	cfg      Config
	lock     resourcelock.Interface
	watchdog *leaderelection.HealthzAdaptor

	mu      sync.Mutex
	stop    context.CancelFunc // ends the work, then the election
	stopped bool
	done    chan struct{} // closed when Run returns
}

// New builds an Elector whose lock uses its own client, made from restConfig
// with the election's QPS.
func New(restConfig *rest.Config, cfg Config) (*Elector, error) {
	electionConfig := rest.CopyConfig(restConfig)
	electionConfig.QPS, electionConfig.Burst = QPS, 2*QPS
	client, err := kubernetes.NewForConfig(electionConfig)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(cfg.ResourceLock, cfg.Namespace, cfg.LockName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return NewWithLock(lock, cfg), nil
}

// NewWithLock builds an Elector on a given lock.
func NewWithLock(lock resourcelock.Interface, cfg Config) *Elector {
	return &Elector{cfg: cfg, lock: lock, watchdog: leaderelection.NewLeaderHealthzAdaptor(healthzTimeout),
		done: make(chan struct{})}
}

func (e *Elector) setLeading(v float64) {
	if e.cfg.Leading != nil {
		e.cfg.Leading.Set(v)
	}
}

// Check is a health check for /healthz: it fails when this replica leads
// but has not renewed its lease in time.
func (e *Elector) Check() error { return e.watchdog.Check(nil) }

// Run campaigns until ctx ends or Release is called, and runs lead while
// leading. When ctx ends it cancels lead's context, waits for lead to return
// (at most a lease duration), and only then releases the lease. It returns
// nil after a requested stop and ErrLostLeadership when the lease was lost
// otherwise. Run may be called once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	defer close(e.done)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "lock", e.cfg.Namespace+"/"+e.cfg.LockName)

	// The election outlives ctx until the work has ended, so its context
	// does not derive ctx's cancellation (only its values).
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	e.mu.Lock()
	e.stop = stopWork
	if e.stopped {
		stopWork()
	}
	e.mu.Unlock()

	t := &term{e: e, logger: logger, workCtx: workCtx, lead: lead}
	go t.releaseAfterWork(electionCtx, stopElection)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Name,
		WatchDog:        e.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: t.startedLeading,
			OnStoppedLeading: func() { logger.Info("Stopped leading") },
			OnNewLeader: func(identity string) {
				if identity != e.cfg.Identity {
					logger.Info("Another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(electionCtx)
	// Run returns once renewing stopped; the work may still be ending
	// after a lost lease.
	t.leading.Wait()
	if workCtx.Err() == nil {
		return ErrLostLeadership
	}
	e.releaseIfHeld(context.WithoutCancel(ctx), logger)
	return nil
}

// term is one Run: the work it leads and whether that work started.
type term struct {
	e       *Elector
	logger  klog.Logger
	workCtx context.Context
	lead    func(ctx context.Context)

	leading sync.WaitGroup
	mu      sync.Mutex
	started bool
}

// startedLeading runs the work while this replica leads, until leadership
// ends or a stop is requested. A stop requested before leadership was won
// starts nothing.
func (t *term) startedLeading(leCtx context.Context) {
	t.mu.Lock()
	if t.workCtx.Err() != nil {
		t.mu.Unlock()
		return
	}
	t.started = true
	t.leading.Add(1)
	t.mu.Unlock()
	defer t.leading.Done()
	leadCtx, cancel := context.WithCancel(leCtx)
	defer cancel()
	defer context.AfterFunc(t.workCtx, cancel)()
	t.logger.Info("Became the leader; starting")
	t.e.setLeading(1)
	defer t.e.setLeading(0)
	t.lead(leadCtx)
}

// releaseAfterWork stops the election, which releases the lease, once the
// work has been told to stop and has ended (or a lease duration has passed:
// a replica that cannot stop its work must not hold the lease forever).
func (t *term) releaseAfterWork(electionCtx context.Context, stopElection context.CancelFunc) {
	select {
	case <-t.workCtx.Done():
	case <-electionCtx.Done():
		return
	}
	t.mu.Lock()
	wasLeading := t.started
	t.mu.Unlock()
	if wasLeading {
		finished := make(chan struct{})
		go func() { t.leading.Wait(); close(finished) }()
		timer := time.NewTimer(t.e.cfg.LeaseDuration)
		select {
		case <-finished:
			t.logger.Info("Work stopped; releasing leadership")
		case <-timer.C:
			t.logger.Info("Work did not stop within a lease duration; releasing leadership anyway", "leaseDuration", t.e.cfg.LeaseDuration)
		}
		timer.Stop()
	}
	stopElection()
}

// releaseIfHeld releases the lease if it names this replica although the
// elector does not know it leads: a stop that cancelled the request creating
// or acquiring the lease may have come after the API server stored it, and
// client-go releases only a lease it knows it holds.
func (e *Elector) releaseIfHeld(ctx context.Context, logger klog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	record, _, err := e.lock.Get(ctx)
	if err != nil || record.HolderIdentity != e.cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := e.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    record.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}); err != nil {
		logger.Info("Could not release a lease acquired while stopping; it expires after its duration", "err", err)
		return
	}
	logger.Info("Released a lease acquired while stopping")
}

// Release stops the work and gives up the lease, waiting until both are done
// or ctx ends: the hook for a restart that must not make the other replica
// wait out the lease.
func (e *Elector) Release(ctx context.Context) {
	e.mu.Lock()
	e.stopped = true
	stop := e.stop
	e.mu.Unlock()
	if stop == nil {
		return // not running
	}
	stop()
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}

// NewIdentity returns a holder identity unique to this process: the host
// name, for people, and a UUID, for two processes on one host.
func NewIdentity() string {
	hostname, _ := os.Hostname()
	return hostname + "_" + string(uuid.NewUUID())
}
