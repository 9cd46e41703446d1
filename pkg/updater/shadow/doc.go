// Package shadow owns the lifecycle of BottlerocketShadow objects (docs/updater.md):
// one shadow per node matching the managed-node selector, named after the
// node, created with spec.state Idle and no status (the node's agent writes
// the first status). When a node stops matching, its shadow is deleted, but
// only once the node is Idle, so an update in flight is never orphaned.
//
// Shadows have no ownerReference: the garbage collector would delete the
// shadow of a node deleted mid-update, and with it the record of a failure
// that must halt the rollout. The Node's UID is recorded in the annotation
// updates.nodehealth.io/node-uid instead, and this package deletes the shadow
// of a deleted Node itself: at once when the node had not been asked to
// reboot yet (a scale-down frees its slot), otherwise only once the update
// controller has marked it failed and a user has resumed that failure. A
// Node re-created under the name of such a shadow gets its own shadow only
// then.
package shadow
