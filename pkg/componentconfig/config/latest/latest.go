// Package latest returns the defaulted internal configuration of each Kind,
// as if an empty file of the newest version had been loaded. Binaries start
// from it when no --config is given.
package latest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/scheme"
)

// NodeHealthControllerConfiguration returns the controller's defaults.
func NodeHealthControllerConfiguration() (*config.NodeHealthControllerConfiguration, error) {
	return defaulted[*config.NodeHealthControllerConfiguration](&configv1alpha1.NodeHealthControllerConfiguration{})
}

// ExtensionHeartbeatConfiguration returns the heartbeat's defaults.
func ExtensionHeartbeatConfiguration() (*config.ExtensionHeartbeatConfiguration, error) {
	return defaulted[*config.ExtensionHeartbeatConfiguration](&configv1alpha1.ExtensionHeartbeatConfiguration{})
}

// UpdateOperatorConfiguration returns the update operator's defaults.
func UpdateOperatorConfiguration() (*config.UpdateOperatorConfiguration, error) {
	return defaulted[*config.UpdateOperatorConfiguration](&configv1alpha1.UpdateOperatorConfiguration{})
}

// UpdateAgentConfiguration returns the update agent's defaults.
func UpdateAgentConfiguration() (*config.UpdateAgentConfiguration, error) {
	return defaulted[*config.UpdateAgentConfiguration](&configv1alpha1.UpdateAgentConfiguration{})
}

// defaulted defaults an external object and converts it to the internal type
// T, restoring the TypeMeta that conversion clears (as kube-scheduler's
// latest.Default does).
func defaulted[T runtime.Object](external runtime.Object) (T, error) {
	var zero T
	scheme.Scheme.Default(external)
	obj, err := scheme.Scheme.ConvertToVersion(external, config.SchemeGroupVersion)
	if err != nil {
		return zero, err
	}
	internal, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("converted %T to unexpected type %T", external, obj)
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(external)
	if err != nil {
		return zero, err
	}
	internal.GetObjectKind().SetGroupVersionKind(gvks[0])
	return internal, nil
}
