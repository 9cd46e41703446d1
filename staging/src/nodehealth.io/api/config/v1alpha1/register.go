package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the group of every nodehealth configuration Kind.
const GroupName = "config.nodehealth.io"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder is exported so that the internal side
	// (nodehealth.io/nodehealth/pkg/componentconfig/config/v1alpha1) can register
	// its defaulting and conversion functions on the same builder, the way
	// kube-scheduler's pkg/scheduler/apis/config/v1 extends
	// k8s.io/kube-scheduler/config/v1.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers the external types (and whatever was registered on
	// SchemeBuilder) in a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the configuration Kinds. They are never served by an
// API server, so no list types or watch events are registered.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&NodeHealthControllerConfiguration{},
		&ExtensionHeartbeatConfiguration{},
		&UpdateOperatorConfiguration{},
		&UpdateAgentConfiguration{},
	)
	return nil
}

// Kind names, so callers and error messages never spell them by hand.
const (
	NodeHealthControllerConfigurationKind = "NodeHealthControllerConfiguration"
	ExtensionHeartbeatConfigurationKind   = "ExtensionHeartbeatConfiguration"
	UpdateOperatorConfigurationKind       = "UpdateOperatorConfiguration"
	UpdateAgentConfigurationKind          = "UpdateAgentConfiguration"
)
