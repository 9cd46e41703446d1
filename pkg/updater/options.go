package updater

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
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
	return nil
}
