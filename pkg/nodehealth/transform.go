package nodehealth

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Bounds on what the informer caches keep of strings that anyone allowed to
// write a Lease or a Node chooses. The API server lets a Lease or a Node carry
// 256 KiB of annotations and a holderIdentity of any length; without bounds one
// hostile extension could grow the controller's memory, its Events and the
// node condition it writes by that much per object.
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
	// maxBootRecordLength bounds the nodehealth.io/boot annotation kept from
	// a Node: a real record is a bootID, a UID and a few extension names.
	maxBootRecordLength = 4096
)

// oversizedPrefix starts the value TransformNode keeps in place of an
// annotation too large to be valid. It cannot start valid JSON, so nothing
// mistakes it for a list or a boot record.
const oversizedPrefix = "\x00nodehealth-oversized:"

// TransformNode drops what the controller never reads from Nodes before they
// enter the informer cache: managed fields, container images (often the
// largest part of a Node), volume lists, daemon endpoints, and every
// annotation but the extension list and the boot record. An extension list
// larger than the codec's limit, or a boot record larger than any real one,
// is replaced by a short marker that keeps its size and a digest (so changes
// are still seen), and is reported as invalid. The controller never writes an
// object it read from the cache (writes are merge patches of its own keys, and
// conflicts re-read), so nothing is lost on writes.
func TransformNode(obj interface{}) (interface{}, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	node.Status.VolumesInUse = nil
	node.Status.VolumesAttached = nil
	node.Status.Addresses = nil
	node.Status.Capacity = nil
	node.Status.Allocatable = nil
	node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{}
	node.Status.Config = nil
	node.Status.RuntimeHandlers = nil
	node.Annotations = keepAnnotations(node.Annotations, map[string]int{
		nodev1alpha1.SystemExtensionsAnnotation: nodev1alpha1.MaxSystemExtensionsAnnotationBytes,
		nodev1alpha1.BootAnnotation:             maxBootRecordLength,
	}, oversized)
	return node, nil
}

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
	lease.Annotations = keepAnnotations(lease.Annotations, map[string]int{
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

// keepAnnotations returns the annotations named in limits, each bounded by its
// limit with shorten; nil when none is present.
func keepAnnotations(in map[string]string, limits map[string]int, shorten func(string, int) string) map[string]string {
	var out map[string]string
	for key, limit := range limits {
		v, ok := in[key]
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(limits))
		}
		if len(v) > limit {
			v = shorten(v, limit)
		}
		out[key] = v
	}
	return out
}

// truncated cuts s to at most limit bytes (on a rune boundary), ending with a
// digest of the whole so that two long values differing only past the cut
// still differ.
func truncated(s string, limit int) string {
	suffix := fmt.Sprintf("…(truncated, %d bytes, %s)", len(s), digest(s))
	cut := max(limit-len(suffix), 0)
	for cut > 0 && cut < len(s) && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// oversized is the marker kept in place of an annotation over its limit.
func oversized(s string, _ int) string {
	return oversizedPrefix + strconv.Itoa(len(s)) + ":" + digest(s)
}

// oversizedLength reports whether value is the marker of an oversized
// annotation, and the size of the original.
func oversizedLength(value string) (int, bool) {
	rest, ok := strings.CutPrefix(value, oversizedPrefix)
	if !ok {
		return 0, false
	}
	size, _, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(size)
	return n, err == nil
}

func digest(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(h.Sum64(), 16)
}
