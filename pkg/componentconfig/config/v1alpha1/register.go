package v1alpha1

import (
	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
)

// GroupName is the group of every nodehealth configuration Kind.
const GroupName = configv1alpha1.GroupName

// SchemeGroupVersion is the external version handled by this package.
var SchemeGroupVersion = configv1alpha1.SchemeGroupVersion

var (
	// localSchemeBuilder extends the external SchemeBuilder: registering the
	// external types, and in this package the defaulting and conversion
	// functions, on one builder means one AddToScheme installs all of it.
	localSchemeBuilder = &configv1alpha1.SchemeBuilder
	// AddToScheme registers the external types with their defaulting and
	// conversion functions.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Only hand-written functions are registered here; the generated files
	// register theirs, so that this package compiles even while the generated
	// files are missing.
	localSchemeBuilder.Register(addDefaultingFuncs)
}
