package nodehealth

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Bounds on what the Lease informer keeps of strings that anyone allowed to
// write a Lease chooses (nodeutil.TransformNode bounds a Node's). The API
// server lets a Lease carry 256 KiB of annotations and a holderIdentity of any
// length; without bounds one hostile extension could grow the controller's
// memory, its Events and the node condition it writes by that much per object.
const (
	// maxReasonLength bounds the nodehealth.io/reason annotation kept from a
	// Lease: reasons are CamelCase words.
	maxReasonLength = 128
	// maxMessageLength bounds the nodehealth.io/message annotation kept from
	// a Lease; it ends up in Events and in the node condition.
	maxMessageLength = 1024
	// maxHolderLength bounds the holderIdentity kept from a Lease; only its
	// emptiness and its changes matter, which the digest suffix preserves.
	maxHolderLength = 256
)

// TransformLease keeps of a Lease what the controller reads: its name, spec
// and deletion timestamp, the self-registration labels, and the reason and
// message annotations (truncated). Everything else, managed fields,
// ownerReferences, other labels and annotations, is dropped before it is
// cached.
func TransformLease(obj interface{}) (interface{}, error) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return obj, nil
	}
	lease.ManagedFields = nil
	lease.OwnerReferences = nil
	lease.Finalizers = nil
	lease.Annotations = nodeutil.BoundAnnotations(lease.Annotations, map[string]int{
		nodev1alpha1.ReasonAnnotation:  maxReasonLength,
		nodev1alpha1.MessageAnnotation: maxMessageLength,
	}, truncated)
	var kept map[string]string
	for _, key := range []string{nodev1alpha1.RegisterLabel, nodev1alpha1.AffectsReadinessLabel} {
		if v, ok := lease.Labels[key]; ok {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[key] = v
		}
	}
	lease.Labels = kept
	if h := lease.Spec.HolderIdentity; h != nil && len(*h) > maxHolderLength {
		short := truncated(*h, maxHolderLength)
		lease.Spec.HolderIdentity = &short
	}
	return lease, nil
}

// truncated cuts s to at most limit bytes (on a rune boundary), ending with a
// digest of the whole so that two long values differing only past the cut
// still differ.
func truncated(s string, limit int) string {
	suffix := fmt.Sprintf("…(truncated, %d bytes, %s)", len(s), nodeutil.Digest(s))
	cut := max(limit-len(suffix), 0)
	for cut > 0 && cut < len(s) && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
