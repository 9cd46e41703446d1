package drain

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The comparison of these filters with kubectl drain's own is in
// pkg/drain/kubectlparity, a test-only package outside the race-detector run:
// k8s.io/kubectl's dependencies are large.

func controlledBy(kind, name string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
}

func withEmptyDir(p *v1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
}

func TestLeftByNamesThePodsKubectlDrainWouldLeaveUnlessForcedOrAllowedToDeleteEmptyDirData(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		o    Overrides
		want string
	}{
		{"ReplicaSet pod", newPod("p", controlledBy("ReplicaSet", "rs")), Overrides{}, ""},
		{"bare pod", newPod("p"), Overrides{}, ReasonUnmanaged},
		{"bare pod, force", newPod("p"), Overrides{Force: true}, ""},
		{"emptyDir", newPod("p", controlledBy("ReplicaSet", "rs"), withEmptyDir), Overrides{}, ReasonLocalStorage},
		{"emptyDir, deleteEmptyDirData", newPod("p", controlledBy("ReplicaSet", "rs"), withEmptyDir), Overrides{DeleteEmptyDirData: true}, ""},
		// kubectl checks local storage first; the pod is named for it.
		{"bare pod with emptyDir", newPod("p", withEmptyDir), Overrides{}, ReasonLocalStorage},
		{"bare pod with emptyDir, force", newPod("p", withEmptyDir), Overrides{Force: true}, ReasonLocalStorage},
		{"bare pod with emptyDir, deleteEmptyDirData", newPod("p", withEmptyDir), Overrides{DeleteEmptyDirData: true}, ReasonUnmanaged},
		{"finished bare pod with emptyDir", newPod("p", finished, withEmptyDir), Overrides{}, ""},
		{"other volumes are no local storage", newPod("p", controlledBy("ReplicaSet", "rs"), func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}}
		}), Overrides{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.LeftBy(tc.pod); got != tc.want {
				t.Errorf("LeftBy = %q, want %q", got, tc.want)
			}
			if got := SkipUnmanagedAndLocalData(tc.o)(tc.pod); got != (tc.want == "") {
				t.Errorf("SkipUnmanagedAndLocalData admits: %v, want %v", got, tc.want == "")
			}
		})
	}
}
