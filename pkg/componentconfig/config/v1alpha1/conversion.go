package v1alpha1

import (
	"k8s.io/apimachinery/pkg/conversion"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
)

// The shared component-base structs convert with component-base's own
// functions. conversion-gen only looks for conversion functions in the
// packages it generates for (and in explicit peer packages), so these thin
// wrappers make it use component-base's instead of emitting "requires manual
// conversion" stubs. This is the kube-controller-manager's pattern for the
// same structs.

// Convert_v1alpha1_LeaderElectionConfiguration_To_config_LeaderElectionConfiguration converts the shared leader-election struct.
func Convert_v1alpha1_LeaderElectionConfiguration_To_config_LeaderElectionConfiguration(in *componentbaseconfigv1alpha1.LeaderElectionConfiguration, out *componentbaseconfig.LeaderElectionConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_v1alpha1_LeaderElectionConfiguration_To_config_LeaderElectionConfiguration(in, out, s)
}

// Convert_config_LeaderElectionConfiguration_To_v1alpha1_LeaderElectionConfiguration converts the shared leader-election struct.
func Convert_config_LeaderElectionConfiguration_To_v1alpha1_LeaderElectionConfiguration(in *componentbaseconfig.LeaderElectionConfiguration, out *componentbaseconfigv1alpha1.LeaderElectionConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_config_LeaderElectionConfiguration_To_v1alpha1_LeaderElectionConfiguration(in, out, s)
}

// Convert_v1alpha1_ClientConnectionConfiguration_To_config_ClientConnectionConfiguration converts the shared client-connection struct.
func Convert_v1alpha1_ClientConnectionConfiguration_To_config_ClientConnectionConfiguration(in *componentbaseconfigv1alpha1.ClientConnectionConfiguration, out *componentbaseconfig.ClientConnectionConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_v1alpha1_ClientConnectionConfiguration_To_config_ClientConnectionConfiguration(in, out, s)
}

// Convert_config_ClientConnectionConfiguration_To_v1alpha1_ClientConnectionConfiguration converts the shared client-connection struct.
func Convert_config_ClientConnectionConfiguration_To_v1alpha1_ClientConnectionConfiguration(in *componentbaseconfig.ClientConnectionConfiguration, out *componentbaseconfigv1alpha1.ClientConnectionConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_config_ClientConnectionConfiguration_To_v1alpha1_ClientConnectionConfiguration(in, out, s)
}

// Convert_v1alpha1_DebuggingConfiguration_To_config_DebuggingConfiguration converts the shared debugging struct.
func Convert_v1alpha1_DebuggingConfiguration_To_config_DebuggingConfiguration(in *componentbaseconfigv1alpha1.DebuggingConfiguration, out *componentbaseconfig.DebuggingConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_v1alpha1_DebuggingConfiguration_To_config_DebuggingConfiguration(in, out, s)
}

// Convert_config_DebuggingConfiguration_To_v1alpha1_DebuggingConfiguration converts the shared debugging struct.
func Convert_config_DebuggingConfiguration_To_v1alpha1_DebuggingConfiguration(in *componentbaseconfig.DebuggingConfiguration, out *componentbaseconfigv1alpha1.DebuggingConfiguration, s conversion.Scope) error {
	return componentbaseconfigv1alpha1.Convert_config_DebuggingConfiguration_To_v1alpha1_DebuggingConfiguration(in, out, s)
}
