// Package fuzzer holds the fuzzer functions of the configuration group for
// round-trip tests.
package fuzzer

import (
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	logsapi "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/randfill"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/scheme"
)

// Funcs returns the fuzzer functions. A round trip decodes with defaulting,
// so every fuzzed object is passed through defaulting first: a random zero in
// a defaulted field would otherwise come back as the default and fail the
// comparison for no real reason (the kubelet fuzzer pre-fills defaults for
// the same reason; running the real defaulting keeps this from drifting).
func Funcs(_ runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(obj *config.NodeHealthControllerConfiguration, c randfill.Continue) {
			c.FillNoCustom(obj)
			sanitizeLogging(&obj.Logging, c)
			defaulted(obj)
		},
		func(obj *config.ExtensionHeartbeatConfiguration, c randfill.Continue) {
			c.FillNoCustom(obj)
			sanitizeLogging(&obj.Logging, c)
			defaulted(obj)
		},
		func(obj *config.UpdateOperatorConfiguration, c randfill.Continue) {
			c.FillNoCustom(obj)
			sanitizeLogging(&obj.Logging, c)
			defaulted(obj)
		},
		func(obj *config.UpdateAgentConfiguration, c randfill.Continue) {
			c.FillNoCustom(obj)
			sanitizeLogging(&obj.Logging, c)
			defaulted(obj)
		},
		// An IntOrString is either a number or a string, never both.
		func(obj *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*obj = intstr.FromInt32(c.Int31())
			} else {
				*obj = intstr.FromString(c.String(0))
			}
		},
	}
}

// sanitizeLogging keeps the logging struct to values it can encode: its
// options hold resource quantities whose random bit patterns do not survive
// a round trip through their string form (component-base's own concern, not
// ours).
func sanitizeLogging(l *logsapi.LoggingConfiguration, c randfill.Continue) {
	verbosity := logsapi.VerbosityLevel(c.Uint32())
	*l = *logsapi.NewLoggingConfiguration()
	l.Verbosity = verbosity
	l.FlushFrequency.SerializeAsString = true
}

// defaulted runs the scheme's defaulting over an internal object by way of
// its v1alpha1 form.
func defaulted(obj runtime.Object) {
	external, err := scheme.Scheme.ConvertToVersion(obj.DeepCopyObject(), schemeVersion)
	if err != nil {
		panic(err)
	}
	scheme.Scheme.Default(external)
	if err := scheme.Scheme.Convert(external, obj, nil); err != nil {
		panic(err)
	}
}

var schemeVersion = configv1alpha1.SchemeGroupVersion
