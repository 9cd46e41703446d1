// Package v1alpha1 holds defaulting and conversion for the external types in
// nodehealth.io/api/config/v1alpha1. The functions are registered on the
// external package's SchemeBuilder, exactly as kube-scheduler's
// pkg/scheduler/apis/config/v1 does for k8s.io/kube-scheduler/config/v1: the
// external module stays free of behaviour and of the main module.
//
// +k8s:conversion-gen=nodehealth.io/nodehealth/pkg/componentconfig/config
// +k8s:conversion-gen-external-types=nodehealth.io/api/config/v1alpha1
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=nodehealth.io/api/config/v1alpha1
package v1alpha1
