package app

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/validation"
	"nodehealth.io/nodehealth/pkg/nodehealth"
)

// controllerOptions translates the validated configuration into the plain
// values the controller takes; the controller never sees the config API.
func controllerOptions(cfg *config.NodeHealthControllerConfiguration) (nodehealth.Options, error) {
	opts := nodehealth.Options{
		LeaseNamespace:           cfg.LeaseNamespace,
		TaintKey:                 cfg.Taint.Key,
		TaintEffect:              v1.TaintEffect(cfg.Taint.Effect),
		RenewalGrace:             cfg.RenewalGrace.Duration,
		RegistrationGrace:        cfg.RegistrationGrace.Duration,
		MaintenanceReasons:       sets.New(cfg.MaintenanceReasons...),
		LeavingNodeTaints:        sets.New(cfg.LeavingNodeTaints...),
		LifecycleConditionMaxAge: cfg.LifecycleConditionMaxAge.Duration,
		Eviction: nodehealth.EvictionOptions{
			Mode:               nodehealth.EvictionMode(cfg.Eviction.Mode),
			Timeout:            cfg.Eviction.Timeout.Duration,
			NodesPerSecond:     cfg.Eviction.NodesPerSecond,
			Force:              cfg.Eviction.Force,
			DeleteEmptyDirData: cfg.Eviction.DeleteEmptyDirData,
		},
		BlastRadius: nodehealth.BlastRadiusOptions{
			ClusterThreshold: float64(cfg.BlastRadius.ClusterThresholdPercent) / 100,
			ZoneThreshold:    float64(cfg.BlastRadius.ZoneThresholdPercent) / 100,
		},
		CanaryInterval:       cfg.CanaryInterval.Duration,
		MinimumLeaseDuration: cfg.MinimumLeaseDuration.Duration,
		DryRun:               cfg.DryRun,
	}
	for i, r := range cfg.ExtensionRules {
		selector, err := metav1.LabelSelectorAsSelector(r.NodeSelector)
		if err != nil {
			// Validation already checked it; this guards callers that skip it.
			return opts, fmt.Errorf("extensionRules[%d].nodeSelector: %w", i, err)
		}
		rule := nodehealth.Rule{
			Name:             r.Name,
			Extension:        r.Name,
			Selector:         selector,
			AffectsReadiness: r.AffectsReadiness,
			StartupTimeout:   r.StartupTimeout.Duration,
			FailurePolicy:    nodehealth.FailurePolicy(r.FailurePolicy),
		}
		if tmpl, extension := r.LeaseNameTemplate, r.Name; tmpl != "" {
			rule.LeaseName = func(node string) string { return validation.RenderLeaseName(tmpl, extension, node) }
		}
		opts.Rules = append(opts.Rules, rule)
	}
	return opts, opts.Validate()
}
