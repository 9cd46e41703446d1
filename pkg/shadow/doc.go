// Package shadow owns the lifecycle of BottlerocketShadow objects (DESIGN §7):
// one shadow per node matching the managed-node selector, named after the node
// and owned by it, created with spec.state Idle and no status (the node's agent
// writes the first status). When a node stops matching, its shadow is deleted,
// but only once the node is Idle, so an update in flight is never orphaned.
// When a node is deleted, kube-controller-manager's garbage collector removes
// the shadow through its ownerReference; this package does not race it.
package shadow
