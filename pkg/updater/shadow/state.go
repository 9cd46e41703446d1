package shadow

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// NodeUID is the UID of the Node the shadow describes: the node-uid
// annotation, or for a shadow an earlier operator created, its Node
// ownerReference. Empty when neither is there.
func NodeUID(s *updatesv1alpha1.BottlerocketShadow) types.UID {
	if uid := s.Annotations[updatesv1alpha1.NodeUIDAnnotation]; uid != "" {
		return types.UID(uid)
	}
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "Node" && ref.APIVersion == "v1" {
			return ref.UID
		}
	}
	return ""
}

// Describes reports whether the shadow is about this Node and not about an
// earlier Node of the same name. A shadow that recorded no UID describes
// whichever Node has its name.
func Describes(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	if node == nil {
		return false
	}
	uid := NodeUID(s)
	return uid == "" || uid == node.UID
}

// PastDrain reports whether the node's update reached the point where
// losing the node is the update's failure: the agent asked for the reboot
// (status.rebootRequestedAt) or the node is in MonitoringUpdate. Before it
// the node still served, or was drained but never rebooted, and deleting it
// is an ordinary scale-down.
func PastDrain(s *updatesv1alpha1.BottlerocketShadow) bool {
	switch s.Spec.State {
	case updatesv1alpha1.StateMonitoringUpdate:
		return true
	case updatesv1alpha1.StateRebootedIntoUpdate:
		return s.Status.RebootRequestedAt != nil
	}
	return false
}

// MarkedFailed reports whether the node's current update attempt was failed
// by the operator: the failure is not older than the last spec transition
// (failing writes both in one update; a later start moves the transition on).
func MarkedFailed(s *updatesv1alpha1.BottlerocketShadow) bool {
	failed, ok := annotationTime(s, updatesv1alpha1.FailedAnnotation)
	if !ok {
		return false
	}
	return s.Spec.StateTransitionTimestamp != nil && !failed.Before(s.Spec.StateTransitionTimestamp.Time.Truncate(time.Second))
}

func annotationTime(s *updatesv1alpha1.BottlerocketShadow, key string) (time.Time, bool) {
	v, ok := s.Annotations[key]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
