package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxLeaseNameLength is the longest object name the API server accepts
// (a DNS subdomain). "<extension>.<node>" must fit; it is never truncated,
// because a truncated name could collide with another node's Lease.
const MaxLeaseNameLength = validation.DNS1123SubdomainMaxLength

// ValidateExtensionName checks an extension name: a DNS label, so that it holds
// no dot and the Lease name "<extension>.<node>" splits unambiguously.
func ValidateExtensionName(name string) []string {
	return validation.IsDNS1123Label(name)
}

// LeaseName returns "<extension>.<node>", the name of the Lease an extension
// renews for a node, or an error if the extension is not a DNS label, the node
// name is not a DNS subdomain, or the result would exceed MaxLeaseNameLength.
func LeaseName(extension, node string) (string, error) {
	if msgs := ValidateExtensionName(extension); len(msgs) > 0 {
		return "", fmt.Errorf("invalid extension name %q: %s", extension, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		return "", fmt.Errorf("invalid node name %q: %s", node, strings.Join(msgs, "; "))
	}
	name := extension + "." + node
	if len(name) > MaxLeaseNameLength {
		return "", fmt.Errorf("lease name for extension %q on node %q would be %d characters, more than the limit of %d for object names; use a shorter extension name",
			extension, node, len(name), MaxLeaseNameLength)
	}
	return name, nil
}

// ParseLeaseName splits an extension Lease name at its first dot into the
// extension and the node. Node names may hold dots, extension names never do,
// so the split is exact: "kube-proxy.b.n1" belongs to node "b.n1".
func ParseLeaseName(name string) (extension, node string, err error) {
	if len(name) > MaxLeaseNameLength {
		return "", "", fmt.Errorf("lease name is %d characters, more than the limit of %d", len(name), MaxLeaseNameLength)
	}
	extension, node, found := strings.Cut(name, ".")
	if !found {
		return "", "", fmt.Errorf("lease name %q is not of the form <extension>.<node>", name)
	}
	if msgs := ValidateExtensionName(extension); len(msgs) > 0 {
		return "", "", fmt.Errorf("lease name %q: invalid extension %q: %s", name, extension, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		return "", "", fmt.Errorf("lease name %q: invalid node %q: %s", name, node, strings.Join(msgs, "; "))
	}
	return extension, node, nil
}

// LeaseLabels returns the labels an extension Lease carries. The node label is
// set only when the node name fits a label value (63 characters): labels are
// for people and selectors, the Lease name is authoritative.
func LeaseLabels(extension, node string) map[string]string {
	labels := map[string]string{ExtensionLabel: extension}
	if len(validation.IsValidLabelValue(node)) == 0 {
		labels[NodeLabel] = node
	}
	return labels
}
