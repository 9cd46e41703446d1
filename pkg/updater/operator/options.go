package operator

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"

	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Options are the update controller's process settings, in plain values.
// The rollout itself (which nodes, which version, how many at once, when,
// the soak) is in UpdatePolicy objects, read through an informer.
type Options struct {
	// Selector selects the managed nodes.
	Selector labels.Selector
	// Deadlines bound each non-Idle state.
	Deadlines Deadlines
	// OwnNode is the node the operator runs on; it is updated last.
	OwnNode string
	// LeaseNamespace is the node-health controller's extension namespace,
	// needed to read the nodes' extension lists.
	LeaseNamespace string
	// DryRun logs and counts the writes instead of making them.
	DryRun bool
	// Drain is how the operator drains a node before its reboot.
	Drain DrainOptions
	// LeavingNodeTaints and LifecycleConditionMaxAge say which nodes are
	// leaving (nodeutil.Leaving), as the node-health controller's options
	// of the same names: a policy's leaving nodes take its budget.
	LeavingNodeTaints        sets.Set[string]
	LifecycleConditionMaxAge time.Duration
	// Nodes patches the status of Nodes: the KEP-5683 lifecycle conditions
	// of their updates (lifecycle.go). NewController requires it.
	Nodes nodeutil.NodeStatuses
	// Pods lists the pods of the policies' spec.gates.blockingPods: a
	// label selector across namespaces, only before a start, no cache.
	// NewController requires it.
	Pods typedcorev1.PodsGetter
	// AlertSources are the Alertmanagers the policies' spec.gates.alerts
	// name, by name (the configuration's alertSources). A policy that names
	// another holds its starts (UnknownAlertSource).
	AlertSources map[string]AlertSource
	// StartClient carries what decides and records a start — the start
	// pass's consistent LISTs, its policy status writes and its starts, and
	// a success's record — on a connection with a rate limit of its own,
	// so that no backlog of per-node writes delays the next start (a
	// hand-off). Nil: the controller's client.
	StartClient versioned.Interface
	// Hooks say where the policies' hooks run (the configuration's
	// hooks); unset, a policy with hooks starts nothing.
	Hooks HookOptions
	// GateRecheck is how soon the policies' gates are read again while
	// they hold a start back, and how long an answer of the alert sources
	// is shared (alertAnswers); DefaultGateRecheck when zero. Each read is
	// a LIST of pods and a query of every alert source of the policy, so
	// it is seconds, not less.
	GateRecheck time.Duration
	// Queue and StartQueue are the controller's work queues: the nodes'
	// keys, and the start pass's key. Nil builds the production ones on
	// the controller's clock. A simulation passes queues whose delayed
	// adds it releases at its own simulated instants.
	Queue, StartQueue workqueue.TypedRateLimitingInterface[string]
}

// DefaultDrainTimeout bounds a node's drain when DrainOptions.Timeout is
// zero.
const DefaultDrainTimeout = 10 * time.Minute

// DrainOptions configure the drains the operator runs (docs/updater.md):
// the agents hold no pod permissions, so every eviction is the operator's.
type DrainOptions struct {
	// Client lists one node's pods (a field selector, no cluster-wide pod
	// cache) and evicts them through the Eviction API. NewController
	// requires it; Validate does not, so a configuration is checked before
	// any client exists.
	Client drain.Client
	// Timeout bounds a node's drain from when this process began it; past
	// it the update fails (DrainBlocked) and halts its policy.
	// DefaultDrainTimeout when zero.
	Timeout time.Duration
	// Overrides are kubectl drain's --force and --delete-emptydir-data. A
	// pod they do not allow evicting blocks the drain and is named.
	Overrides drain.Overrides
	// ReadinessTaintKey is the node-health controller's taint (default
	// nodehealth.io/not-ready): no pod is evicted before the node carries
	// it, and the pods that tolerate it are left to the last pass.
	ReadinessTaintKey string
	// Tuning sets the per-pod back-off and the polling; its Filter and
	// Report are the operator's.
	Tuning drain.Options
}

// Deadlines are the longest times a node may spend in each state.
type Deadlines struct {
	StagedAndPerformedUpdate time.Duration
	RebootedIntoUpdate       time.Duration
	MonitoringUpdate         time.Duration
	// ReturnToIdle bounds how long a node whose spec is back at Idle may
	// still report an update state (it counts toward the limits meanwhile).
	ReturnToIdle time.Duration
}

// Validate checks what the controller relies on.
func (o *Options) Validate() error {
	if o.Selector == nil {
		return fmt.Errorf("a managed-node selector is required")
	}
	if o.Deadlines.StagedAndPerformedUpdate <= 0 || o.Deadlines.RebootedIntoUpdate <= 0 || o.Deadlines.MonitoringUpdate <= 0 ||
		o.Deadlines.ReturnToIdle <= 0 {
		return fmt.Errorf("every state deadline must be positive")
	}
	if o.LifecycleConditionMaxAge < 0 {
		return fmt.Errorf("the lifecycle condition max age must not be negative, got %s", o.LifecycleConditionMaxAge)
	}
	if o.Drain.Timeout < 0 {
		return fmt.Errorf("the drain timeout must not be negative, got %s", o.Drain.Timeout)
	}
	if o.GateRecheck < 0 {
		// Zero takes the default; a negative value would read the gates
		// again at once, in a loop.
		return fmt.Errorf("the gates' recheck interval must not be negative, got %s", o.GateRecheck)
	}
	return nil
}
