package app

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
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
	sources, err := alertSources(cfg.AlertSources)
	if err != nil {
		return operator.Options{}, err
	}
	opts.AlertSources = sources
	// The Job client and informer are the caller's (internal/setup/operator).
	opts.Hooks = operator.HookOptions{Namespace: cfg.Hooks.Namespace, ServiceAccountName: cfg.Hooks.ServiceAccountName}
	return opts, opts.Validate()
}

// alertSources builds a client of each Alertmanager the configuration
// defines; a CA file that cannot be read stops the operator at its start
// rather than at a rollout's first start.
func alertSources(list []config.AlertSource) (map[string]operator.AlertSource, error) {
	out := make(map[string]operator.AlertSource, len(list))
	for i, s := range list {
		c, err := alertmanager.New(alertmanager.Options{URL: s.URL, CAFile: s.CAFile, BearerTokenFile: s.BearerTokenFile, Timeout: s.Timeout.Duration})
		if err != nil {
			return nil, fmt.Errorf("alertSources[%d] (%s): %w", i, s.Name, err)
		}
		out[s.Name] = c
	}
	return out, nil
}
