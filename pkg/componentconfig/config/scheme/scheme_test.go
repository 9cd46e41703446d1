package scheme_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	"k8s.io/apimachinery/pkg/runtime"

	"nodehealth.io/nodehealth/pkg/componentconfig/config/fuzzer"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/latest"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/scheme"
	"nodehealth.io/nodehealth/pkg/componentconfig/loader"
)

// TestEveryKindRoundTripsThroughEveryExternalVersionWithoutLoss fuzzes every Kind, converts it to every external version and
// back, and fails on any loss: a field missing from conversion shows up here
// with a diff.
func TestEveryKindRoundTripsThroughEveryExternalVersionWithoutLoss(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, scheme.AddToScheme, fuzzer.Funcs)
}

// TestTheDefaultsOfEveryKindMatchTheGoldenFiles compares the defaults of every Kind (an empty file, written
// back as v1alpha1) with the committed golden files. Run with
// UPDATE_GOLDEN=true to accept a deliberate change, and review the diff: a
// changed default changes the behaviour of every deployment that relies on
// it.
func TestTheDefaultsOfEveryKindMatchTheGoldenFiles(t *testing.T) {
	for kind, defaults := range map[string]func() (runtime.Object, error){
		"NodeHealthControllerConfiguration": func() (runtime.Object, error) { return latest.NodeHealthControllerConfiguration() },
		"ExtensionHeartbeatConfiguration":   func() (runtime.Object, error) { return latest.ExtensionHeartbeatConfiguration() },
		"UpdateOperatorConfiguration":       func() (runtime.Object, error) { return latest.UpdateOperatorConfiguration() },
		"UpdateAgentConfiguration":          func() (runtime.Object, error) { return latest.UpdateAgentConfiguration() },
	} {
		t.Run(kind, func(t *testing.T) {
			obj, err := defaults()
			if err != nil {
				t.Fatal(err)
			}
			got, err := loader.EncodeYAML(obj)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "defaults", kind+".yaml")
			if os.Getenv("UPDATE_GOLDEN") == "true" {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_GOLDEN=true to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("defaults differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}
