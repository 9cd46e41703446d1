package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

// ShadowClient reads the node's own shadow and writes its status; nothing
// else. Errors must be the API server's (*apierrors.StatusError).
type ShadowClient interface {
	GetShadow(ctx context.Context, name string) (*updatesv1alpha1.BottlerocketShadow, error)
	UpdateShadowStatus(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow) (*updatesv1alpha1.BottlerocketShadow, error)
}

// NodeGetter reads the agent's Node (its bootID and taints). A lister backed
// by a watch of that one Node is enough: a stale answer only delays.
type NodeGetter interface {
	GetNode(ctx context.Context, name string) (*v1.Node, error)
}

// BottlerocketAPI is what the agent asks of the host; *brapi.Client
// implements it.
type BottlerocketAPI interface {
	OS(ctx context.Context) (*brapi.OSInfo, error)
	UpdateStatus(ctx context.Context) (*brapi.UpdateStatus, error)
	RefreshUpdates(ctx context.Context) (*brapi.UpdateStatus, error)
	PrepareUpdate(ctx context.Context) (*brapi.UpdateStatus, error)
	ActivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error)
	DeactivateUpdate(ctx context.Context) (*brapi.UpdateStatus, error)
	Reboot(ctx context.Context) error
	VersionLock(ctx context.Context) (string, error)
	SetVersionLock(ctx context.Context, lock string) error
	IgnoreWaves(ctx context.Context) (bool, error)
	SetIgnoreWaves(ctx context.Context, on bool) error
}

// Lease is the agent's own extension Lease (bottlerocket-updater.<node>);
// *heartbeat.Renewer implements it.
type Lease interface {
	// Release gives the Lease up with a reason; renewals stop until Resume.
	Release(ctx context.Context, reason, message string) error
	// Resume renews again.
	Resume()
}

// EventRecorder records an Event about the shadow.
type EventRecorder interface {
	Event(shadow *updatesv1alpha1.BottlerocketShadow, eventType, reason, message string)
}

// Reasons of the UpdateFailed condition and of Events.
const (
	ReasonNoVersion         = "NoVersion"
	ReasonVersionLockFailed = "VersionLockFailed"
	ReasonNotOffered        = updatesv1alpha1.ReasonVersionNotOffered
	ReasonPrepareFailed     = "PrepareFailed"
	ReasonActivateFailed    = "ActivateFailed"
	// ReasonStagedVersionMismatch: the prepare wrote another version than
	// the one asked for (or none), whatever the status says staged.
	ReasonStagedVersionMismatch = "StagedVersionMismatch"
	// ReasonVersionLockNotApplied: the updater kept choosing under another
	// lock than the agent's committed pin.
	ReasonVersionLockNotApplied = "VersionLockNotApplied"
	ReasonTaintNotApplied       = "ReadinessTaintNotApplied"
	ReasonNoBootID              = "NoBootID"
	ReasonWrongVersion          = "WrongVersionAfterReboot"
	ReasonRebooting             = "Rebooting"
	ReasonRebootUncertain       = "RebootUncertain"
	ReasonRebootRefused         = "RebootRefused"
	ReasonRebooted              = "Rebooted"
	ReasonAborted               = "UpdateAborted"
	ReasonVersionLockChanged    = "VersionLockChanged"
	ReasonUpdated               = "Updated"
	// ReasonDowngradeRefused: spec.version is older than the running
	// version and the rollback annotation does not name the running
	// version: only a rollback downgrades.
	ReasonDowngradeRefused = "DowngradeRefused"
)

// Defaults of Options.
const (
	DefaultUpdateCheckInterval = 2 * time.Minute
	DefaultTaintTimeout        = 2 * time.Minute
	DefaultRetryInterval       = 10 * time.Second
	// DefaultTransientAttempts is how many times a step that failed for a
	// reason that may pass (the API unreachable after the client's own
	// retries) is tried before the update is reported failed.
	DefaultTransientAttempts = 3
	// DefaultRebootGrace: a host that accepted a reboot goes down within
	// seconds; still up minutes later, the request was lost or refused.
	DefaultRebootGrace = 3 * time.Minute
	// DefaultPinRefreshes bounds the refreshes, RetryInterval apart, after
	// which a pin the updater still does not choose fails the update:
	// Bottlerocket applies a committed setting within seconds.
	DefaultPinRefreshes = 6
)

// Options configure an Agent; zero values take the defaults.
type Options struct {
	// NodeName is the node the agent runs on; its shadow has that name.
	NodeName string
	// ReadinessTaintKey is the node-health controller's taint (default
	// nodehealth.io/not-ready) the agent waits for before the operator's
	// drain.
	ReadinessTaintKey string
	// UpdateCheckInterval is how often the offered version is refreshed
	// while Idle.
	UpdateCheckInterval time.Duration
	// TaintTimeout bounds the wait for the readiness taint after the Lease
	// was released.
	TaintTimeout time.Duration
	// RetryInterval is the wait after a transient error, and how often the
	// agent looks again while it waits for the node (taint, reboot).
	RetryInterval time.Duration
	// TransientAttempts: see DefaultTransientAttempts.
	TransientAttempts int
	// RebootGrace is how long after asking for the reboot an agent that
	// still finds the node on the recorded bootID asks again
	// (DefaultRebootGrace).
	RebootGrace time.Duration
	// PinRefreshes: see DefaultPinRefreshes.
	PinRefreshes int
	Clock        clock.Clock
}

func (o *Options) complete() error {
	if o.NodeName == "" {
		return errors.New("agent: a node name is required")
	}
	if o.ReadinessTaintKey == "" {
		o.ReadinessTaintKey = nodev1alpha1.DefaultReadinessTaintKey
	}
	if o.UpdateCheckInterval <= 0 {
		o.UpdateCheckInterval = DefaultUpdateCheckInterval
	}
	if o.TaintTimeout <= 0 {
		o.TaintTimeout = DefaultTaintTimeout
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.TransientAttempts <= 0 {
		o.TransientAttempts = DefaultTransientAttempts
	}
	if o.RebootGrace <= 0 {
		o.RebootGrace = DefaultRebootGrace
	}
	if o.PinRefreshes <= 0 {
		o.PinRefreshes = DefaultPinRefreshes
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}

// Clients are the agent's narrow clients.
type Clients struct {
	Shadows ShadowClient
	Nodes   NodeGetter
	API     BottlerocketAPI
	Lease   Lease
	Events  EventRecorder
}

// Agent updates one node. Sync is not safe for concurrent use; Run calls it
// from one goroutine.
type Agent struct {
	c    Clients
	opts Options

	// leaseHeld is what the agent last asked of the Lease (nil: nothing yet).
	leaseHeld *bool
	// nextCheck is when the offered version is refreshed next while Idle.
	nextCheck time.Time

	// Per update attempt, in memory only; they bound waits and are rebuilt
	// after a restart (which restarts the bounds).
	taintWaitStart time.Time
	// drainWaitLogged: the wait for the operator's drain was logged.
	drainWaitLogged bool
	transient       int
	// pinRefreshes counts refreshes that chose under another lock than the
	// committed pin.
	pinRefreshes int
	// rebootRetryAt is when a refused reboot is asked for again, and
	// rebootRefusals how many refusals in a row; markerSeen is when a
	// marker without rebootRequestedAt was first seen.
	rebootRetryAt  time.Time
	rebootRefusals int
	markerSeen     time.Time
	// hostChecked: this process has read /os in RebootedIntoUpdate before
	// draining and found the host not yet on the update.
	hostChecked bool

	// mu guards lastSpec, read by Shutdown from another goroutine.
	mu       sync.Mutex
	lastSpec updatesv1alpha1.ShadowState

	wake chan struct{}
}

// New returns an Agent.
func New(c Clients, opts Options) (*Agent, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if c.Shadows == nil || c.Nodes == nil || c.API == nil || c.Lease == nil {
		return nil, errors.New("agent: the shadow, node, Bottlerocket API and Lease clients are required")
	}
	if c.Events == nil {
		c.Events = nopRecorder{}
	}
	return &Agent{c: c, opts: opts, wake: make(chan struct{}, 1)}, nil
}

type nopRecorder struct{}

func (nopRecorder) Event(*updatesv1alpha1.BottlerocketShadow, string, string, string) {}

// Wake makes Run sync now (a watch saw the shadow or the Node change).
func (a *Agent) Wake() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// InitLease decides, before the Lease renewer starts, whether the Lease may
// be renewed: an agent restarted between its release (reason Updating) and
// the reboot, or after a failure in that phase, must not renew it. It needs
// the shadow; when there is none the agent is simply alive.
func (a *Agent) InitLease(ctx context.Context) error {
	shadow, err := a.c.Shadows.GetShadow(ctx, a.opts.NodeName)
	if apierrors.IsNotFound(err) {
		a.hold()
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading shadow %s: %w", a.opts.NodeName, err)
	}
	node, err := a.c.Nodes.GetNode(ctx, a.opts.NodeName)
	if err != nil {
		return fmt.Errorf("reading node %s: %w", a.opts.NodeName, err)
	}
	a.setLastSpec(shadow.Spec.State)
	if leaseWanted(shadow, node) {
		a.hold()
		return nil
	}
	return a.release(ctx, "update in progress (agent restarted before the reboot)")
}

// leaseWanted is false only between the release before the drain and the
// boot into the update, and after a failure in that phase until the abort.
func leaseWanted(shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	if shadow.Spec.State != updatesv1alpha1.StateRebootedIntoUpdate {
		return true
	}
	switch shadow.Status.CurrentState {
	case updatesv1alpha1.StateErrorReset:
		return false
	case updatesv1alpha1.StateStagedAndPerformedUpdate:
		return rebooted(shadow, node)
	}
	return true
}

// rebooted reports whether the node booted since the agent asked for the
// reboot: its bootID is no longer the one recorded in rebootFromBootID.
func rebooted(shadow *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	from := shadow.Status.RebootFromBootID
	boot := node.Status.NodeInfo.BootID
	return from != "" && boot != "" && boot != from
}

// Shutdown runs when the process stops (SIGTERM). During an update it
// releases the Lease with reason Updating, never another reason: a SIGTERM
// during an update must not turn the planned release into a failure that
// could start an eviction clock (docs/updater.md). While Idle it releases nothing:
// an agent outage is not a node failure. The Lease, registered with
// affects-readiness=false, expires, which never gates the node; a DaemonSet
// rollout's new pod renews it before that.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	spec := a.lastSpec
	a.mu.Unlock()
	if spec == "" || spec == updatesv1alpha1.StateIdle {
		klog.FromContext(ctx).Info("Stopping while Idle; the Lease is left to expire")
		return nil
	}
	return a.c.Lease.Release(ctx, nodev1alpha1.ReasonUpdating, fmt.Sprintf("the update agent stopped during an update (%s)", spec))
}

func (a *Agent) setLastSpec(s updatesv1alpha1.ShadowState) {
	a.mu.Lock()
	a.lastSpec = s
	a.mu.Unlock()
}

func (a *Agent) hold() {
	if a.leaseHeld != nil && *a.leaseHeld {
		return
	}
	a.c.Lease.Resume()
	held := true
	a.leaseHeld = &held
}

func (a *Agent) release(ctx context.Context, message string) error {
	if a.leaseHeld != nil && !*a.leaseHeld {
		return nil
	}
	if err := a.c.Lease.Release(ctx, nodev1alpha1.ReasonUpdating, message); err != nil {
		return fmt.Errorf("releasing the %s Lease: %w", updatesv1alpha1.UpdaterExtension, err)
	}
	held := false
	a.leaseHeld = &held
	return nil
}

// Run syncs until ctx ends: at once, whenever Wake is called and whenever a
// sync asked to be called again.
func (a *Agent) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("node", a.opts.NodeName)
	ctx = klog.NewContext(ctx, logger)
	for {
		after, err := a.Sync(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			logger.Error(err, "Sync failed; retrying", "retryIn", after)
		}
		t := a.opts.Clock.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-a.wake:
			t.Stop()
		}
	}
}

// Sync reads the shadow and the Node and takes the next step. It returns
// when to sync again at the latest (a watch event may come sooner).
func (a *Agent) Sync(ctx context.Context) (time.Duration, error) {
	shadow, err := a.c.Shadows.GetShadow(ctx, a.opts.NodeName)
	if apierrors.IsNotFound(err) {
		// The operator creates the shadow of a managed node; until then the
		// agent is only an extension that is alive.
		a.hold()
		return a.opts.UpdateCheckInterval, nil
	}
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("reading shadow %s: %w", a.opts.NodeName, err)
	}
	node, err := a.c.Nodes.GetNode(ctx, a.opts.NodeName)
	if err != nil {
		return a.opts.RetryInterval, fmt.Errorf("reading node %s: %w", a.opts.NodeName, err)
	}
	a.setLastSpec(shadow.Spec.State)
	switch shadow.Spec.State {
	case updatesv1alpha1.StateIdle, "":
		a.resetAttempt()
		return a.syncIdle(ctx, shadow, node)
	case updatesv1alpha1.StateStagedAndPerformedUpdate:
		return a.syncStage(ctx, shadow)
	case updatesv1alpha1.StateRebootedIntoUpdate:
		return a.syncReboot(ctx, shadow, node)
	case updatesv1alpha1.StateMonitoringUpdate:
		a.resetAttempt()
		return a.syncMonitoring(ctx, shadow)
	}
	return a.opts.UpdateCheckInterval, fmt.Errorf("shadow %s asks for unknown state %q", shadow.Name, shadow.Spec.State)
}

func (a *Agent) resetAttempt() {
	a.taintWaitStart = time.Time{}
	a.drainWaitLogged = false
	a.transient = 0
	a.pinRefreshes = 0
	a.rebootRetryAt, a.rebootRefusals, a.markerSeen = time.Time{}, 0, time.Time{}
	a.hostChecked = false
}

// writeStatus applies change to a copy of the shadow's status and writes it
// when something changed. A conflict means someone (the operator) changed
// the shadow: the caller syncs again from a fresh read.
func (a *Agent) writeStatus(ctx context.Context, shadow *updatesv1alpha1.BottlerocketShadow, change func(*updatesv1alpha1.BottlerocketShadowStatus)) (*updatesv1alpha1.BottlerocketShadow, error) {
	updated := shadow.DeepCopy()
	change(&updated.Status)
	if apiequality.Semantic.DeepEqual(shadow.Status, updated.Status) {
		return shadow, nil
	}
	out, err := a.c.Shadows.UpdateShadowStatus(ctx, updated)
	if err != nil {
		return nil, fmt.Errorf("writing the status of shadow %s: %w", shadow.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote shadow status", "state", out.Status.CurrentState,
		"currentVersion", out.Status.CurrentVersion, "targetVersion", out.Status.TargetVersion)
	return out, nil
}

func (a *Agent) now() metav1.Time {
	return metav1.NewTime(a.opts.Clock.Now().Truncate(time.Second))
}

func (a *Agent) setCondition(st *updatesv1alpha1.BottlerocketShadowStatus, typ string, status metav1.ConditionStatus, reason, message string) {
	cond := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(message, 32768), LastTransitionTime: a.now()}
	if old := meta.FindStatusCondition(st.Conditions, typ); old != nil && old.Status == status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// runningVersion is refresh for ending an update (completing or aborting):
// it needs only /os. A refresh that fails — the update repository
// unreachable — reports the running version as the offered one until the
// next periodic refresh, instead of keeping the node in an update state
// that holds a slot of the rollout.
func (a *Agent) runningVersion(ctx context.Context) (current, target string, err error) {
	current, target, _, err = a.refresh(ctx)
	if err == nil {
		return current, target, nil
	}
	os, oerr := a.c.API.OS(ctx)
	if oerr != nil {
		return "", "", oerr
	}
	klog.FromContext(ctx).Error(err, "Refreshing the offered version failed; reporting the running one until the next check")
	return os.VersionID, os.VersionID, nil
}

// refresh reads the running version and refreshes the offered one, and
// returns the update status the refresh answered. After a boot the
// dispatcher's status is gone until the first command, so the refresh comes
// first.
func (a *Agent) refresh(ctx context.Context) (current, target string, s *brapi.UpdateStatus, err error) {
	os, err := a.c.API.OS(ctx)
	if err != nil {
		return "", "", nil, err
	}
	s, err = a.c.API.RefreshUpdates(ctx)
	if err != nil {
		return "", "", nil, err
	}
	target = s.ChosenVersion()
	if target == "" {
		target = os.VersionID
	}
	return os.VersionID, target, s, nil
}
