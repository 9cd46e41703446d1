package updater

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/window"
)

// Options are the update controller's settings, in plain values.
type Options struct {
	// Selector selects the managed nodes.
	Selector labels.Selector
	// MaxConcurrent limits the nodes that count as updating (a count or a
	// percentage of the managed nodes, at least 1).
	MaxConcurrent intstr.IntOrString
	// MaxConcurrentPerZone, when set, limits them per
	// topology.kubernetes.io/zone (a count or a percentage of the zone's
	// managed nodes, at least 1).
	MaxConcurrentPerZone *intstr.IntOrString
	// Windows are the update windows; empty means always open.
	Windows window.Set
	// Paused stops starts; nodes in flight finish.
	Paused bool
	// TargetVersion pins the version; empty means each node's offered one.
	TargetVersion string
	// Deadlines bound each non-Idle state.
	Deadlines Deadlines
	// PostRebootSoak is the continuous readiness a rebooted node needs.
	PostRebootSoak time.Duration
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
	if _, err := scaledLimit(o.MaxConcurrent, 1); err != nil {
		return fmt.Errorf("maxConcurrentUpdates: %w", err)
	}
	if o.MaxConcurrentPerZone != nil {
		if _, err := scaledLimit(*o.MaxConcurrentPerZone, 1); err != nil {
			return fmt.Errorf("maxConcurrentUpdatesPerZone: %w", err)
		}
	}
	if o.Deadlines.StagedAndPerformedUpdate <= 0 || o.Deadlines.RebootedIntoUpdate <= 0 || o.Deadlines.MonitoringUpdate <= 0 ||
		o.Deadlines.ReturnToIdle <= 0 {
		return fmt.Errorf("every state deadline must be positive")
	}
	if o.Deadlines.MonitoringUpdate <= o.PostRebootSoak {
		return fmt.Errorf("the MonitoringUpdate deadline must be longer than postRebootSoak")
	}
	if o.TargetVersion != "" {
		if _, err := brapi.ParseVersion(o.TargetVersion); err != nil {
			return fmt.Errorf("targetVersion: %w", err)
		}
	}
	return nil
}

// scaledLimit resolves a count or percentage against total: a percentage
// rounds down, and the result is at least 1 so a rollout always progresses.
func scaledLimit(v intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, false)
	if err != nil {
		return 0, err
	}
	if v.Type == intstr.Int && n < 1 {
		return 0, fmt.Errorf("must be at least 1")
	}
	return max(n, 1), nil
}
