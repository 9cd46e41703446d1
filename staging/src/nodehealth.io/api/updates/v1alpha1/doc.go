// Package v1alpha1 is the API of nodehealth's Bottlerocket OS updater:
// BottlerocketShadow, one cluster-scoped object per managed node (named after
// the node) through which the update operator asks a node's update agent to
// move through the update states and the agent reports where the node is.
//
// The operator writes spec and metadata, the node's agent writes status only;
// the well-known names in this package (annotations, condition types, the
// default managed-node label, the updater's extension name) are the contract
// between the two, the kubectl plugin and users.
//
// +k8s:deepcopy-gen=package
// +groupName=updates.nodehealth.io
package v1alpha1
