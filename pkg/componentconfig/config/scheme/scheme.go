// Package scheme holds the scheme and the strict codec factory of the
// nodehealth configuration group.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/v1alpha1"
)

var (
	// Scheme knows the internal and every external version of the group,
	// with their defaulting and conversion functions.
	Scheme = runtime.NewScheme()

	// Codecs decode strictly: an unknown or duplicate field is an error, so a
	// typo in a configuration file is never silently dropped. There is no
	// lenient fallback, because no version of this API was ever decoded
	// leniently.
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
)

func init() {
	AddToScheme(Scheme)
}

// AddToScheme registers the whole group in a scheme, preferring v1alpha1.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(configv1alpha1.SchemeGroupVersion))
}
