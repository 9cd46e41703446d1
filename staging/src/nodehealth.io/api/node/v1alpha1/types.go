package v1alpha1

// SystemExtension is one extension a node requires before it is ready for user
// workloads (KEP-28 Node.spec.systemExtensions[]).
type SystemExtension struct {
	// Name identifies the extension on the node. A DNS label (no dots), unique
	// within the node's list.
	Name string `json:"name"`

	// Lease is the Lease the extension renews. When nil it is
	// "<name>.<node>" in the controller's extension namespace.
	// +optional
	Lease *LeaseReference `json:"lease,omitempty"`

	// AffectsReadiness says whether the extension gates the node. When nil it
	// is true; false means the extension is tracked and reported but never
	// gates the node.
	// +optional
	AffectsReadiness *bool `json:"affectsReadiness,omitempty"`

	// Source says who wrote the entry: "rule/<rule>" for a rule of the
	// controller's configuration, "lease" for a self-registering Lease, or
	// empty for a manual entry. Only the controller removes non-manual entries.
	// +optional
	Source string `json:"source,omitempty"`
}

// LeaseReference names a coordination.k8s.io/v1 Lease.
type LeaseReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ReadinessAffected reports whether the extension gates its node, applying the
// default (true) when AffectsReadiness is unset.
func (e *SystemExtension) ReadinessAffected() bool {
	return e.AffectsReadiness == nil || *e.AffectsReadiness
}

// LeaseFor returns the Lease the extension renews on the given node, applying
// the default "<name>.<node>" in namespace when Lease is unset.
func (e *SystemExtension) LeaseFor(node, namespace string) LeaseReference {
	if e.Lease != nil {
		return *e.Lease
	}
	return LeaseReference{Namespace: namespace, Name: e.Name + "." + node}
}

// String returns "namespace/name".
func (r LeaseReference) String() string {
	return r.Namespace + "/" + r.Name
}
