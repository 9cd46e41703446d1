package drain

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// MirrorPodAnnotation marks the API mirrors of static pods; the kubelet owns
// them and the Eviction API cannot remove them.
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// Filter admits the pods a drain evicts (true) and skips the others.
type Filter func(pod *v1.Pod) bool

// SkipDaemonSetAndMirrorPods admits every pod except DaemonSet pods (the
// DaemonSet controller would recreate them on the node at once, and they must
// keep running until the node goes down) and mirror pods (not evictable).
// Both the update agent and the node-health controller's escalation combine
// it with SkipTolerating of the readiness taint.
func SkipDaemonSetAndMirrorPods(pod *v1.Pod) bool {
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; mirror {
		return false
	}
	if ref := controllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return true
}

// SkipTolerating skips pods that tolerate any of the taints: they chose to run
// on a node carrying it, like extensions on a gated node, and the scheduler
// would put an evicted one straight back onto a node that is not cordoned.
func SkipTolerating(taints ...v1.Taint) Filter {
	return func(pod *v1.Pod) bool {
		for i := range taints {
			for j := range pod.Spec.Tolerations {
				if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), &taints[i], false) {
					return false
				}
			}
		}
		return true
	}
}

// Overrides are kubectl drain's two flags that let a drain remove pods whose
// eviction loses something, both off by default as in kubectl:
type Overrides struct {
	// Force admits pods that declare no controller (kubectl drain --force):
	// nothing recreates them once evicted.
	Force bool
	// DeleteEmptyDirData admits pods with emptyDir volumes (kubectl drain
	// --delete-emptydir-data): the volume's data goes with the pod.
	DeleteEmptyDirData bool
}

// Reasons LeftBy gives, in kubectl drain's words.
const (
	ReasonLocalStorage = "pod with local storage (emptyDir); deleteEmptyDirData allows evicting it"
	ReasonUnmanaged    = "pod declares no controller; force allows evicting it"
)

// LeftBy says why a drain with these overrides leaves the pod on its node,
// or "" when they do not stop it. These are the decisions of kubectl drain's
// localStorageFilter and unreplicatedFilter (k8s.io/kubectl/pkg/drain, in
// that order, so a pod with both is named for its emptyDir), except that
// kubectl refuses to drain the node at all while such a pod is on it, and a
// drain here leaves the pod, names it, and evicts the others. A finished
// pod (Succeeded, Failed) is never stopped, as in kubectl: it holds nothing.
func (o Overrides) LeftBy(pod *v1.Pod) string {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return ""
	}
	if !o.DeleteEmptyDirData && hasEmptyDir(pod) {
		return ReasonLocalStorage
	}
	if !o.Force && controllerOf(pod) == nil {
		return ReasonUnmanaged
	}
	return ""
}

// SkipUnmanagedAndLocalData skips the pods Overrides.LeftBy names: pods that
// declare no controller unless Force, pods with emptyDir volumes unless
// DeleteEmptyDirData. With SkipDaemonSetAndMirrorPods it makes the pod
// selection of kubectl drain --ignore-daemonsets (pkg/drain's tests compare
// the two on the same pods).
func SkipUnmanagedAndLocalData(o Overrides) Filter {
	return func(pod *v1.Pod) bool { return o.LeftBy(pod) == "" }
}

func hasEmptyDir(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].EmptyDir != nil {
			return true
		}
	}
	return false
}

// All admits a pod only when every filter admits it.
func All(filters ...Filter) Filter {
	return func(pod *v1.Pod) bool {
		for _, f := range filters {
			if f != nil && !f(pod) {
				return false
			}
		}
		return true
	}
}

func controllerOf(pod *v1.Pod) *metav1.OwnerReference {
	for i := range pod.OwnerReferences {
		if ref := &pod.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref
		}
	}
	return nil
}
