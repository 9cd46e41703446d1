// Package nodehealth owns the node-health controller of KEP-28 Approach A: it
// keeps each node's SystemExtensions list current (rule and self-registered
// entries), tracks the extension Leases by the controller's own observation
// clock, and keeps one readiness taint, the SystemExtensionsReady condition,
// Events and metrics current from them: gating new, rebooted and re-created
// nodes, re-gating on expiry or release, escalating to rate-limited eviction,
// and suspending failure taints when too many nodes fail at once.
//
// The controller takes plain values (Options); it never sees the configuration
// API. cmd/nodehealth-controller translates the configuration into Options.
package nodehealth
