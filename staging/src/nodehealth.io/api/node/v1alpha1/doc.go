// Package v1alpha1 owns the node-side contracts of nodehealth that every
// component must agree on: the well-known names (annotations, labels, taint,
// condition, Lease namespace), the SystemExtension list carried in the
// nodehealth.io/system-extensions annotation together with its one codec, and
// the naming of extension Leases.
//
// SystemExtension is KEP-28's proposed Node.spec.systemExtensions field. A stock
// kube-apiserver drops unknown Node.spec fields, so the field is carried in its
// alpha annotation form, the way Kubernetes carried alpha fields before they
// became real fields.
//
// +k8s:deepcopy-gen=package
package v1alpha1
