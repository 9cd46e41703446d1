package shadow

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// TestAResumeRepeatsTheFailedValueAndNoClockIsCompared: `kubectl nodehealth
// update resume` copies the failed value. Comparing times would let a resume
// written by a clock that runs ahead also cover a later failure, which must
// halt again.
func TestAResumeRepeatsTheFailedValueAndNoClockIsCompared(t *testing.T) {
	for _, tc := range []struct {
		name           string
		failed, resume string
		halting        bool
	}{
		{"no failure", "", "", false},
		{"failed, never resumed", "2026-03-02T10:00:00Z", "", true},
		{"resumed: the failed value repeated", "2026-03-02T10:00:00Z", "2026-03-02T10:00:00Z", false},
		{"a later failure than the one resumed", "2026-03-02T11:00:00Z", "2026-03-02T10:00:00Z", true},
		{"a resume stamped by a clock ahead does not cover a later failure", "2026-03-02T11:00:00Z", "2026-03-02T12:00:00Z", true},
		{"an unparsable failure, repeated", "soon", "soon", false},
		{"an unparsable failure, not repeated", "soon", "2026-03-02T12:00:00Z", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &updatesv1alpha1.BottlerocketShadow{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
			if tc.failed != "" {
				s.Annotations[updatesv1alpha1.FailedAnnotation] = tc.failed
			}
			if tc.resume != "" {
				s.Annotations[updatesv1alpha1.ResumeAnnotation] = tc.resume
			}
			if got := Halting(s); got != tc.halting {
				t.Errorf("Halting = %v, want %v", got, tc.halting)
			}
		})
	}
}
