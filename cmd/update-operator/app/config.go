package app

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/updater/operator"
)

// updaterOptions translates the validated configuration into the plain
// values the controllers take; they never see the config API. The rollout
// itself is in UpdatePolicy objects, which the update controller reads.
func updaterOptions(cfg *config.UpdateOperatorConfiguration, ownNode string) (operator.Options, error) {
	selector, err := metav1.LabelSelectorAsSelector(cfg.ManagedNodeSelector)
	if err != nil {
		return operator.Options{}, fmt.Errorf("managedNodeSelector: %w", err)
	}
	opts := operator.Options{
		Selector: selector,
		Deadlines: operator.Deadlines{
			StagedAndPerformedUpdate: cfg.StateDeadlines.StagedAndPerformedUpdate.Duration,
			RebootedIntoUpdate:       cfg.StateDeadlines.RebootedIntoUpdate.Duration,
			MonitoringUpdate:         cfg.StateDeadlines.MonitoringUpdate.Duration,
			ReturnToIdle:             cfg.StateDeadlines.ReturnToIdle.Duration,
		},
		OwnNode: ownNode,
		DryRun:  cfg.DryRun,
		// The client is the caller's (startControllers).
		Drain: operator.DrainOptions{
			Timeout:           cfg.Drain.Timeout.Duration,
			Overrides:         drain.Overrides{Force: cfg.Drain.Force, DeleteEmptyDirData: cfg.Drain.DeleteEmptyDirData},
			ReadinessTaintKey: cfg.ReadinessTaintKey,
		},
		LeavingNodeTaints:        sets.New(cfg.LeavingNodeTaints...),
		LifecycleConditionMaxAge: cfg.LifecycleConditionMaxAge.Duration,
	}
	return opts, opts.Validate()
}
