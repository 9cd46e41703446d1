package main

import (
	"nodehealth.io/nodehealth/test/framework"
)

// The sandbox's heartbeats run as the extensions they stand for would in a
// cluster (test/framework's InstallExtensionIdentity): each extension has a
// ServiceAccount in kube-system bound to deploy/extensions' Role and
// ClusterRole, a DaemonSet whose pod on each of its nodes kwok "runs", and
// each heartbeat process authenticates with a token bound to its node's pod.
// The admission policy of deploy/extensions is installed too, so a heartbeat
// may write only the Leases of its own node, as in a cluster installed from
// deploy/ or the chart.

// extensionNamespace is where the sandbox's extensions run, as kube-proxy
// and most CNI plugins do.
const extensionNamespace = "kube-system"

// extensionIdentity returns the DaemonSet pods of extension ext run as.
func extensionIdentity(ext string) framework.PodIdentity {
	return framework.ExtensionIdentity(extensionNamespace, ext)
}
