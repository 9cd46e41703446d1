// Package features declares nodehealth's own feature gates. Features that
// ship alpha are added here, default off, and every binary shows them in
// --help under "Feature gate flags" and accepts them in the featureGates map
// of its configuration file and in --feature-gates.
package features

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

const (
	// ConfigFileWatch makes a binary watch its --config file and restart
	// (exit 0 after its shutdown hook) when a valid new version appears, so
	// that a ConfigMap update takes effect without a rollout. An invalid new
	// version is reported and ignored.
	//
	// owner: config machinery; beta since v0.1.
	ConfigFileWatch featuregate.Feature = "ConfigFileWatch"
)

// defaultFeatures holds every nodehealth feature with its maturity. Keep it
// sorted by name.
var defaultFeatures = map[featuregate.Feature]featuregate.FeatureSpec{
	ConfigFileWatch: {Default: true, PreRelease: featuregate.Beta},
}

// NewFeatureGate returns a fresh mutable gate with nodehealth's features and
// component-base's logging features. Each binary (and each test) uses its own
// gate, so that nothing leaks between processes sharing a package.
func NewFeatureGate() featuregate.MutableVersionedFeatureGate {
	gate := featuregate.NewFeatureGate()
	runtime.Must(gate.Add(defaultFeatures))
	// Logging features (e.g. LoggingAlphaOptions) are validated by
	// logsapi.ValidateAndApply against the same gate.
	runtime.Must(logsapi.AddFeatureGates(gate))
	return gate
}
