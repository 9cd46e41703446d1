package v1alpha1

import "testing"

// TestAFailureIsResumedOnlyByARepeatOfItsValue: a resume repeats the failed
// value, and no clocks are compared, so a resume stamped by a clock ahead
// does not cover a later failure; an empty failed value records nothing.
func TestAFailureIsResumedOnlyByARepeatOfItsValue(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{FailedAnnotation: ""}, false},
		{map[string]string{FailedAnnotation: "", ResumeAnnotation: "2026-03-02T10:00:00Z"}, false},
		{map[string]string{FailedAnnotation: "2026-03-02T10:00:00Z"}, true},
		{map[string]string{FailedAnnotation: "2026-03-02T10:00:00Z", ResumeAnnotation: "2026-03-02T10:00:00Z"}, false},
		{map[string]string{FailedAnnotation: "2026-03-02T11:00:00Z", ResumeAnnotation: "2026-03-02T12:00:00Z"}, true},
		{map[string]string{ResumeAnnotation: "2026-03-02T10:00:00Z"}, false},
		{map[string]string{FailedAnnotation: "soon", ResumeAnnotation: "soon"}, false},
		{map[string]string{FailedAnnotation: "soon", ResumeAnnotation: "2026-03-02T12:00:00Z"}, true},
	} {
		if got := Halting(tc.annotations); got != tc.want {
			t.Errorf("Halting(%v) = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}
