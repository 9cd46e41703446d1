// Package v1alpha1 holds the versioned configuration files of every nodehealth
// binary: NodeHealthControllerConfiguration, ExtensionHeartbeatConfiguration,
// UpdateOperatorConfiguration and UpdateAgentConfiguration, all in the group
// config.nodehealth.io.
//
// These are external types in the Kubernetes componentconfig sense: they are
// what users write into the file passed with --config. Defaulting, conversion
// to the internal types and validation live in the main module under
// nodehealth.io/nodehealth/pkg/componentconfig, exactly as kube-scheduler keeps
// k8s.io/kube-scheduler/config/v1 apart from pkg/scheduler/apis/config.
//
// Conventions: lowerCamel JSON names; pointers for scalars with a non-zero
// default so that an explicit zero can be told apart from "not set";
// metav1.Duration for every duration; no unversioned types.
//
// +k8s:deepcopy-gen=package
// +groupName=config.nodehealth.io
package v1alpha1
