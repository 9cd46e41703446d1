// Package config holds the internal (hub) version of nodehealth's component
// configuration, group config.nodehealth.io. Files are decoded from a
// versioned Kind (nodehealth.io/api/config/v1alpha1), defaulted, converted to
// these types and validated here; binaries only ever work with these types.
//
// Internal types carry no JSON tags and no pointers for defaulted scalars:
// after defaulting every value is known. They are an implementation detail of
// the cmd/ layer: controllers never import this package; cmd/ turns a
// configuration into the plain values a controller takes.
//
// +k8s:deepcopy-gen=package
// +groupName=config.nodehealth.io
package config
