package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func d(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }

func TestTheSummarySaysTheStartupInOneLine(t *testing.T) {
	exts := []StartupExtension{{Name: "cni", Ready: d(38 * time.Second)}, {Name: "kube-proxy", Ready: d(12 * time.Second)}, {Name: "csi", Ready: d(time.Second)}}
	tests := []struct {
		name string
		tl   *StartupTimeline
		want string
	}{
		{"none", nil, ""},
		{"a reboot", &StartupTimeline{Cause: ReasonNodeRebooted, Ready: metav1.Duration{Duration: 41 * time.Second}, Extensions: exts},
			"ready 41s after reboot; slowest cni 38s, then kube-proxy 12s"},
		{"a new node", &StartupTimeline{Cause: ReasonNodeRegistered, Ready: metav1.Duration{Duration: 3210 * time.Millisecond},
			SinceCreation: d(5 * time.Second), Extensions: exts[2:]},
			"ready 3.2s after registration (5s after creation); slowest csi 1s"},
		{"found at start, failed open", &StartupTimeline{Cause: ReasonControllerStarted, FoundAtStart: true, Ready: metav1.Duration{Duration: 2 * time.Minute},
			Extensions: []StartupExtension{{Name: "gpu"}}},
			"ready 2m0s after the controller started (found at the controller's start: the start-up began earlier); slowest gpu never (failed open)"},
		{"a re-creation without extensions", &StartupTimeline{Cause: ReasonNodeRecreated, Ready: metav1.Duration{Duration: 10 * time.Second}},
			"ready 10s after re-creation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tl.Summary(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSlowerListsNeverReadyFirstThenTheLatest(t *testing.T) {
	never, late, early := StartupExtension{Name: "z"}, StartupExtension{Name: "b", Ready: d(9 * time.Second)}, StartupExtension{Name: "a", Ready: d(time.Second)}
	if !Slower(never, late) || !Slower(late, early) || Slower(early, late) || !Slower(StartupExtension{Name: "a", Ready: d(time.Second)}, StartupExtension{Name: "b", Ready: d(time.Second)}) {
		t.Error("wrong order")
	}
}
