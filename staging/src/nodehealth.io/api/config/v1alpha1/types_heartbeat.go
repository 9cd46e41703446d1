package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ExtensionHeartbeatConfiguration configures extension-heartbeat, the sidecar
// that renews an extension's Lease while a local health probe succeeds. The
// node name is not part of this file (one ConfigMap serves every node): it
// comes from --node-name or the NODE_NAME environment variable.
type ExtensionHeartbeatConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// ClientConnection configures the connection to the API server. One Lease
	// write per renewInterval needs very little: QPS 5 / burst 10.
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration `json:"clientConnection"`

	// Debugging configures profiling endpoints. Off by default: the sidecar
	// runs on every node, often in the host network.
	Debugging componentbaseconfigv1alpha1.DebuggingConfiguration `json:"debugging"`

	// Logging configures klog through k8s.io/component-base/logs.
	Logging logsapi.LoggingConfiguration `json:"logging"`

	// FeatureGates enables or disables nodehealth (and logging) features by
	// name. --feature-gates on the command line is merged over it per key.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// Serving says where /metrics and /healthz are served. The defaults avoid
	// the well-known ports of node components, because many extensions run in
	// the host network and share the node's ports.
	Serving ServingConfiguration `json:"serving"`

	// ExtensionName is the system extension this heartbeat speaks for (a DNS
	// label, no dots). The Lease is named <extensionName>.<node>. Required.
	ExtensionName string `json:"extensionName"`

	// Lease configures the extension's Lease.
	Lease LeaseSettings `json:"lease"`

	// Probe is the local health check whose success keeps the Lease renewed.
	Probe ProbeConfiguration `json:"probe"`

	// Register labels the Lease nodehealth.io/register=true, so that the
	// controller adds the extension to the node's list itself (source "lease")
	// and removes it when the Lease is deleted. Leave it false when a rule of
	// the controller or a person lists the extension.
	Register bool `json:"register,omitempty"`

	// AffectsReadiness false labels a self-registering Lease
	// nodehealth.io/affects-readiness=false: the extension is tracked and
	// reported but never gates the node. Only used with register.
	AffectsReadiness *bool `json:"affectsReadiness,omitempty"`
}

// ProbeConfiguration is a local health check. Exactly one of http, tcp, grpc
// and file is set. The thresholds work like the kubelet's probes.
type ProbeConfiguration struct {
	// HTTP probes an http:// or https:// URL.
	HTTP *HTTPProbe `json:"http,omitempty"`

	// TCP probes that a TCP connection can be opened.
	TCP *TCPProbe `json:"tcp,omitempty"`

	// GRPC calls the standard grpc.health.v1 Health/Check method (plaintext).
	GRPC *GRPCProbe `json:"grpc,omitempty"`

	// File checks that a file exists and was modified recently; device plugins
	// and agents without an endpoint touch a file instead.
	File *FileProbe `json:"file,omitempty"`

	// Period is the time between two probes.
	Period *metav1.Duration `json:"period,omitempty"`

	// Timeout bounds one probe. It must not be longer than period.
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// SuccessThreshold is the number of consecutive successes after a failure
	// before the extension counts as healthy again.
	SuccessThreshold *int32 `json:"successThreshold,omitempty"`

	// FailureThreshold is the number of consecutive failures before the Lease
	// is released (reason ProbeFailed), so that one slow answer does not gate
	// the node.
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
}

// HTTPProbe succeeds when a GET of URL answers with a status from 200 to 399.
type HTTPProbe struct {
	// URL is the absolute http:// or https:// URL to GET, usually on
	// 127.0.0.1 since the sidecar shares the extension's network namespace.
	URL string `json:"url"`

	// CAFile is a PEM bundle used to verify an https server instead of the
	// system roots. A relative path is resolved against the configuration
	// file's folder.
	CAFile string `json:"caFile,omitempty"`

	// InsecureSkipTLSVerify skips verification of the server certificate, like
	// the kubelet's https probes do. Prefer caFile.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// TCPProbe succeeds when a TCP connection to Address can be opened.
type TCPProbe struct {
	// Address is host:port.
	Address string `json:"address"`
}

// GRPCProbe succeeds when grpc.health.v1 Health/Check answers SERVING.
type GRPCProbe struct {
	// Address is host:port of a plaintext gRPC server.
	Address string `json:"address"`

	// Service is the service name sent in the check; empty asks for the
	// server's overall health.
	Service string `json:"service,omitempty"`
}

// FileProbe succeeds when Path exists and its modification time is not older
// than MaxAge.
type FileProbe struct {
	// Path is the file to check. A relative path is resolved against the
	// configuration file's folder.
	Path string `json:"path"`

	// MaxAge is how old the file's modification time may be.
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}
