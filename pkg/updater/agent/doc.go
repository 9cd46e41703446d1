// Package agent is the Bottlerocket update agent of one node (docs/updater.md): it
// acts on its BottlerocketShadow's spec.state and reports what it reached in
// the shadow's status, talking to the node's Bottlerocket API.
//
// What it owns:
//   - the node's side of the update state machine: keeping the offered
//     version current while Idle; StagedAndPerformedUpdate (record, pin and
//     restore the version lock around prepare and activate, the node keeps
//     serving); RebootedIntoUpdate (release the bottlerocket-updater Lease with
//     reason Updating, wait for the node-health controller's readiness taint
//     and for the operator's drain (the shadow's drained annotation naming
//     this boot), write rebootFromBootID, reboot; after the boot verify the
//     version and renew the Lease); MonitoringUpdate; and the
//     abort of an update that failed before its reboot;
//   - the never-twice rule: once rebootFromBootID is written the agent never
//     asks for a reboot again in that boot; a Node bootID different from it
//     proves the reboot happened.
//
// All state lives in the shadow and in Bottlerocket, never only in memory, so
// the agent may be killed at any step and a new process continues where the
// old one stopped. In-memory state (when the taint wait began, the reboot's
// retries) only bounds waits and is rebuilt on start.
//
// The agent takes narrow interfaces (ShadowClient, NodeGetter, BottlerocketAPI,
// Lease, EventRecorder) and an injected clock. It never writes a Node, never
// cordons, evicts nothing (the operator drains), and never reads or writes
// another node's shadow.
package agent
