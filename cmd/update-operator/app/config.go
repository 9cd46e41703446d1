package app

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/updater"
	"nodehealth.io/nodehealth/pkg/updater/window"
)

// updaterOptions translates the validated configuration into the plain
// values the controllers take; they never see the config API.
func updaterOptions(cfg *config.UpdateOperatorConfiguration, ownNode string) (updater.Options, error) {
	selector, err := metav1.LabelSelectorAsSelector(cfg.ManagedNodeSelector)
	if err != nil {
		return updater.Options{}, fmt.Errorf("managedNodeSelector: %w", err)
	}
	schedules := make([]string, 0, len(cfg.UpdateWindows))
	durations := make([]time.Duration, 0, len(cfg.UpdateWindows))
	for _, w := range cfg.UpdateWindows {
		schedules = append(schedules, w.Schedule)
		durations = append(durations, w.Duration.Duration)
	}
	windows, err := window.Parse(schedules, durations)
	if err != nil {
		return updater.Options{}, err
	}
	opts := updater.Options{
		Selector:             selector,
		MaxConcurrent:        cfg.MaxConcurrentUpdates,
		MaxConcurrentPerZone: cfg.MaxConcurrentUpdatesPerZone,
		Windows:              windows,
		Paused:               cfg.Paused,
		TargetVersion:        cfg.TargetVersion,
		Deadlines: updater.Deadlines{
			StagedAndPerformedUpdate: cfg.StateDeadlines.StagedAndPerformedUpdate.Duration,
			RebootedIntoUpdate:       cfg.StateDeadlines.RebootedIntoUpdate.Duration,
			MonitoringUpdate:         cfg.StateDeadlines.MonitoringUpdate.Duration,
			ReturnToIdle:             cfg.StateDeadlines.ReturnToIdle.Duration,
		},
		PostRebootSoak: cfg.PostRebootSoak.Duration,
		OwnNode:        ownNode,
		DryRun:         cfg.DryRun,
	}
	return opts, opts.Validate()
}
