package nodeutil

import (
	"hash/fnv"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// MaxBootRecordLength bounds the nodehealth.io/boot annotation TransformNode
// keeps: a real record is a bootID, a UID and a few extension names. The API
// server lets a Node carry 256 KiB of annotations; without bounds whoever may
// write a Node could grow every Node cache by that much per Node.
const MaxBootRecordLength = 4096

// oversizedPrefix starts the value TransformNode keeps in place of an
// annotation too large to be valid. It cannot start valid JSON, so nothing
// mistakes it for a list or a boot record.
const oversizedPrefix = "\x00nodehealth-oversized:"

// TransformNode is the Node informers' transform (informers.WithTransform) of
// the node-health controller and the update operator: it drops what neither
// reads before Nodes enter the cache: managed fields, container images (often
// the largest part of a Node), volume lists, addresses, capacity, daemon
// endpoints, and every annotation but the extension list and the boot record.
// An extension list larger than the codec's limit, or a boot record larger
// than any real one, is replaced by a short marker that keeps its size and a
// digest (so changes are still seen; OversizedLength reads it), and decodes
// as invalid. Neither component writes an object it read from the cache
// (writes are merge patches of their own keys, and conflicts re-read), so
// nothing is lost on writes.
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
	node.Annotations = BoundAnnotations(node.Annotations, map[string]int{
		nodev1alpha1.SystemExtensionsAnnotation: nodev1alpha1.MaxSystemExtensionsAnnotationBytes,
		nodev1alpha1.BootAnnotation:             MaxBootRecordLength,
	}, oversized)
	return node, nil
}

// OversizedLength reports whether value is TransformNode's marker of an
// oversized annotation, and the size of the original.
func OversizedLength(value string) (int, bool) {
	rest, ok := strings.CutPrefix(value, oversizedPrefix)
	if !ok {
		return 0, false
	}
	size, _, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(size)
	return n, err == nil
}

// BoundAnnotations returns the annotations named in limits, each one longer
// than its limit replaced by shorten's result; nil when none is present. The
// informer transforms of Nodes and Leases keep what they read with it.
func BoundAnnotations(in map[string]string, limits map[string]int, shorten func(value string, limit int) string) map[string]string {
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

// oversized is the marker kept in place of an annotation over its limit.
func oversized(s string, _ int) string {
	return oversizedPrefix + strconv.Itoa(len(s)) + ":" + Digest(s)
}

// Digest is a short digest of s, which a shortened value ends with so that
// two long values differing only past the cut still differ.
func Digest(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(h.Sum64(), 16)
}
