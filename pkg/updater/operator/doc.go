// Package operator is the update controller of the Bottlerocket update
// operator (docs/updater.md). It owns the spec of every BottlerocketShadow and
// the status of every UpdatePolicy: it starts a node's update when the one
// policy that governs the node allows it (planStarts, a pure function of a
// snapshot, decides; syncStart reads and writes), moves the spec one
// state forward each time the node's agent reports reaching the current one,
// enforces a deadline per state, holds each rebooted node to the health gate
// (SystemExtensionsReady True with reason ExtensionsReady for postRebootSoak),
// and records failures after a reboot as annotations on the shadow that halt
// the node's policy until a user resumes it. It is event driven: informers on
// shadows, Nodes and UpdatePolicies, and workqueue timers for deadlines,
// soaks, back-offs and update windows — there is no polling loop.
//
// Its neighbours under pkg/updater are the other parts of the one feature:
// agent (the per-node update agent), brapi (the agent's Bottlerocket API
// client and the emulator of that API), shadow (the controller that keeps one
// BottlerocketShadow per managed node), model (the reference model the
// simulation judges this package by) and window (update windows).
package operator
