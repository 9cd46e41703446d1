package nodehealth

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// FailurePolicy says what a startup timeout does to a node whose extension
// never came up after the node was gated.
type FailurePolicy string

const (
	// FailurePolicyKeepGated keeps the node gated (fail closed) and reports it.
	FailurePolicyKeepGated FailurePolicy = "KeepGated"
	// FailurePolicyUngate stops the extension from gating the node for the rest
	// of the current boot (fail open).
	FailurePolicyUngate FailurePolicy = "Ungate"
)

// EvictionMode says how a node whose extension failed after it was ready is
// escalated once the eviction timeout has passed.
type EvictionMode string

const (
	// EvictionModeEvict evicts pods through the Eviction API (PDBs honoured).
	EvictionModeEvict EvictionMode = "Evict"
	// EvictionModeNoExecute adds the readiness taint with effect NoExecute, so
	// the taint-eviction controller applies each pod's tolerationSeconds.
	EvictionModeNoExecute EvictionMode = "NoExecute"
	// EvictionModeNone never escalates.
	EvictionModeNone EvictionMode = "None"
)

// Rule makes every node matching Selector require an extension.
type Rule struct {
	// Name of the rule; entries it injects carry source "rule/<Name>".
	Name string
	// Extension is the name of the extension the rule requires.
	Extension string
	// Selector picks the nodes the rule applies to.
	Selector labels.Selector
	// LeaseName, when set, names the extension's Lease on a node (in the
	// lease namespace); nil means "<extension>.<node>".
	LeaseName func(node string) string
	// AffectsReadiness false makes the extension tracked but never gating.
	AffectsReadiness bool
	// StartupTimeout, when positive, bounds how long after a node was gated
	// the extension may take to become ready.
	StartupTimeout time.Duration
	// FailurePolicy applies when StartupTimeout passes.
	FailurePolicy FailurePolicy
}

// EvictionOptions configure escalation.
type EvictionOptions struct {
	Mode EvictionMode
	// Timeout is how long a node may fail after it was ready before escalation.
	Timeout time.Duration
	// NodesPerSecond limits escalations cluster-wide (burst 1).
	NodesPerSecond float64
	// Force and DeleteEmptyDirData (mode Evict) also evict pods that declare
	// no controller and pods with emptyDir volumes, as kubectl drain's
	// --force and --delete-emptydir-data; without them such pods are left on
	// the node and named.
	Force, DeleteEmptyDirData bool
}

// BlastRadiusOptions configure the suspension of failure taints and evictions
// when too many nodes fail at once.
type BlastRadiusOptions struct {
	// ClusterThreshold and ZoneThreshold are shares of failing nodes (0..1)
	// among nodes with at least one gating extension; 0 disables the check.
	ClusterThreshold float64
	ZoneThreshold    float64
}

// Options are the plain values the controller runs with.
type Options struct {
	// LeaseNamespace is the only namespace whose Leases the controller watches.
	LeaseNamespace string
	// TaintKey and TaintEffect identify the readiness taint.
	TaintKey    string
	TaintEffect v1.TaintEffect
	Rules       []Rule
	// RenewalGrace is added to a Lease's duration before it counts as expired.
	RenewalGrace time.Duration
	// RegistrationGrace is how long a node that lists no gating extension may
	// keep a readiness taint placed at its creation.
	RegistrationGrace time.Duration
	// MaintenanceReasons are release reasons that make a release planned.
	MaintenanceReasons sets.Set[string]
	// LeavingNodeTaints are the taint keys that make a node leaving: never
	// escalated, not counted in the blast radius (docs/controller.md).
	LeavingNodeTaints sets.Set[string]
	// LifecycleConditionMaxAge is how long after its lastTransitionTime a
	// foreign KEP-5683 lifecycle condition makes a schedulable node leaving.
	LifecycleConditionMaxAge time.Duration
	Eviction                 EvictionOptions
	BlastRadius              BlastRadiusOptions
	// CanaryInterval is how often the controller renews its canary Lease;
	// zero disables the canary.
	CanaryInterval time.Duration
	// MinimumLeaseDuration: Leases with a shorter duration are treated as
	// this long, so that the canary notices a stale view before any Lease
	// can expire. Zero honours every duration.
	MinimumLeaseDuration time.Duration
	// Identity is this controller instance's name (canary holder identity).
	Identity string
	// DryRun computes and logs every change but writes nothing.
	DryRun bool
}

// Validate reports option combinations the controller cannot run with. The
// configuration API validates users' files; this catches programming errors
// in callers that build Options themselves.
func (o *Options) Validate() error {
	switch {
	case o.LeaseNamespace == "":
		return fmt.Errorf("lease namespace is required")
	case o.TaintKey == "":
		return fmt.Errorf("taint key is required")
	case o.TaintEffect != v1.TaintEffectNoSchedule && o.TaintEffect != v1.TaintEffectNoExecute && o.TaintEffect != v1.TaintEffectPreferNoSchedule:
		return fmt.Errorf("unsupported taint effect %q", o.TaintEffect)
	case o.RenewalGrace < 0 || o.RegistrationGrace < 0 || o.LifecycleConditionMaxAge < 0:
		return fmt.Errorf("grace periods must not be negative")
	case o.CanaryInterval < 0 || o.MinimumLeaseDuration < 0:
		return fmt.Errorf("canary interval and minimum lease duration must not be negative")
	case o.CanaryInterval > 0 && o.MinimumLeaseDuration > 0 && staleAfterIntervals*o.CanaryInterval >= GuardDeadline(o.MinimumLeaseDuration, o.RenewalGrace):
		return fmt.Errorf("%d × canary interval (%s) must be less than 3/4 × minimum lease duration + renewal grace (%s): the controller must notice a stale view before a Lease renewed a quarter of its duration before the stall can expire",
			staleAfterIntervals, staleAfterIntervals*o.CanaryInterval, GuardDeadline(o.MinimumLeaseDuration, o.RenewalGrace))
	}
	for _, r := range o.Rules {
		if r.Name == "" || r.Extension == "" || r.Selector == nil {
			return fmt.Errorf("rule %q needs a name, an extension and a selector", r.Name)
		}
	}
	return nil
}

// GuardDeadline is how long after a stall begins the shortest healthy Lease
// can expire, and so the bound the own-view guard must fire within: every
// renewer renews at least every quarter of its Lease's duration (the
// heartbeat refuses a longer renew interval, as the kubelet renews its node
// Lease at a quarter of its duration), so when a stall begins a Lease of
// minimumLeaseDuration may have been renewed a quarter of it ago and expires
// 3/4 × minimumLeaseDuration + renewalGrace into the stall.
func GuardDeadline(minimumLeaseDuration, renewalGrace time.Duration) time.Duration {
	return minimumLeaseDuration*3/4 + renewalGrace
}
