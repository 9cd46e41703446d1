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
