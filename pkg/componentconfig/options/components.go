package options

import (
	cliflag "k8s.io/component-base/cli/flag"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/validation"
	"nodehealth.io/nodehealth/pkg/componentconfig/loader"
	"nodehealth.io/nodehealth/pkg/features"
)

// The four nodehealth components. Binaries build their options with
// New(NodeHealthController()) etc., so every binary gets the same machinery.

// NodeHealthController describes nodehealth-controller.
func NodeHealthController() Component[*config.NodeHealthControllerConfiguration] {
	return Component[*config.NodeHealthControllerConfiguration]{
		Name: "nodehealth-controller",
		Kind: loader.Kind[*config.NodeHealthControllerConfiguration]{
			Name:     configv1alpha1.NodeHealthControllerConfigurationKind,
			PathRefs: config.NodeHealthControllerConfigurationPathRefs,
		},
		Default: latest.NodeHealthControllerConfiguration,
		Common: func(c *config.NodeHealthControllerConfiguration) Common {
			return Common{&c.ClientConnection, &c.LeaderElection, &c.Debugging, &c.Logging, &c.FeatureGates, &c.Serving}
		},
		Validate: validation.ValidateNodeHealthControllerConfiguration,
		BindFlags: func(c *config.NodeHealthControllerConfiguration, fss *cliflag.NamedFlagSets) {
			fss.FlagSet(SectionMisc).BoolVar(&c.DryRun, "dry-run", c.DryRun,
				"Compute, log and count every taint, untaint and eviction without writing them. Overrides dryRun.")
		},
		NewFeatureGate: features.NewFeatureGate,
	}
}

// ExtensionHeartbeat describes extension-heartbeat.
func ExtensionHeartbeat() Component[*config.ExtensionHeartbeatConfiguration] {
	return Component[*config.ExtensionHeartbeatConfiguration]{
		Name: "extension-heartbeat",
		Kind: loader.Kind[*config.ExtensionHeartbeatConfiguration]{
			Name:     configv1alpha1.ExtensionHeartbeatConfigurationKind,
			PathRefs: config.ExtensionHeartbeatConfigurationPathRefs,
		},
		Default: latest.ExtensionHeartbeatConfiguration,
		Common: func(c *config.ExtensionHeartbeatConfiguration) Common {
			return Common{&c.ClientConnection, nil, &c.Debugging, &c.Logging, &c.FeatureGates, &c.Serving}
		},
		Validate:       validation.ValidateExtensionHeartbeatConfiguration,
		NewFeatureGate: features.NewFeatureGate,
	}
}

// UpdateOperator describes update-operator.
func UpdateOperator() Component[*config.UpdateOperatorConfiguration] {
	return Component[*config.UpdateOperatorConfiguration]{
		Name: "update-operator",
		Kind: loader.Kind[*config.UpdateOperatorConfiguration]{
			Name:     configv1alpha1.UpdateOperatorConfigurationKind,
			PathRefs: config.UpdateOperatorConfigurationPathRefs,
		},
		Default: latest.UpdateOperatorConfiguration,
		Common: func(c *config.UpdateOperatorConfiguration) Common {
			return Common{&c.ClientConnection, &c.LeaderElection, &c.Debugging, &c.Logging, &c.FeatureGates, &c.Serving}
		},
		Validate: validation.ValidateUpdateOperatorConfiguration,
		BindFlags: func(c *config.UpdateOperatorConfiguration, fss *cliflag.NamedFlagSets) {
			fss.FlagSet(SectionMisc).BoolVar(&c.DryRun, "dry-run", c.DryRun,
				"Log and count every shadow write (creations, deletions, state changes, failures) without making it. Overrides dryRun.")
		},
		NewFeatureGate: features.NewFeatureGate,
	}
}

// UpdateAgent describes update-agent.
func UpdateAgent() Component[*config.UpdateAgentConfiguration] {
	return Component[*config.UpdateAgentConfiguration]{
		Name: "update-agent",
		Kind: loader.Kind[*config.UpdateAgentConfiguration]{
			Name:     configv1alpha1.UpdateAgentConfigurationKind,
			PathRefs: config.UpdateAgentConfigurationPathRefs,
		},
		Default: latest.UpdateAgentConfiguration,
		Common: func(c *config.UpdateAgentConfiguration) Common {
			return Common{&c.ClientConnection, nil, &c.Debugging, &c.Logging, &c.FeatureGates, &c.Serving}
		},
		Validate:       validation.ValidateUpdateAgentConfiguration,
		NewFeatureGate: features.NewFeatureGate,
	}
}
