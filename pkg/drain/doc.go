// Package drain owns the one Eviction-API drain of the project: the
// node-health controller's escalation and the Bottlerocket update agent both
// evict a node's pods through it, each with its own pod filter.
//
// A Drainer evicts every pod on its node that the filter admits, honouring
// PodDisruptionBudgets: a 429 names the blocking budget and that pod is
// retried with back-off; any other error backs off only the failing pod while
// the others are evicted. Every attempt is reported to the caller, so it can
// emit Events and set conditions naming the pod and the budget. The caller
// bounds a drain by its context; the back-off runs on an injected clock.
//
// The Drainer needs only Client (list one node's pods, evict one pod), so a
// per-node binary can pass a narrow client instead of a whole clientset.
package drain
