package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServingConfiguration says where a binary serves its HTTP endpoints. Every
// nodehealth binary has one, so that probes and scraping look the same
// everywhere.
type ServingConfiguration struct {
	// MetricsBindAddress is the host:port that serves Prometheus metrics at
	// /metrics (and /debug/pprof when debugging.enableProfiling is true).
	// When it equals healthzBindAddress, one listener serves both.
	MetricsBindAddress string `json:"metricsBindAddress,omitempty"`

	// HealthzBindAddress is the host:port that serves /healthz, /livez and
	// /readyz for the kubelet's probes.
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"`

	// MetricsAuthentication is None (plain HTTP, anyone who reaches the port
	// reads /metrics) or Delegated: /metrics (and /debug/pprof) over HTTPS
	// with a self-signed certificate, for clients whose bearer token the API
	// server authenticates (TokenReview) and authorizes for get on the
	// non-resource URL /metrics (SubjectAccessReview), as
	// kube-controller-manager does. Health endpoints stay plain. Delegated
	// needs metricsBindAddress to differ from healthzBindAddress; only the
	// node-health controller and the update operator support it.
	MetricsAuthentication MetricsAuthentication `json:"metricsAuthentication,omitempty"`

	// TLSCertFile is a PEM certificate (its chain after it) that serves
	// /metrics when metricsAuthentication is Delegated, for instance from a
	// cert-manager Certificate's Secret; TLSPrivateKeyFile is its key. Both or
	// neither. The files are read again when they change, so a renewed
	// certificate is served without a restart; a pair that cannot be read
	// keeps the last good one. Empty: a self-signed certificate made at
	// start, which scrapers cannot verify.
	TLSCertFile string `json:"tlsCertFile,omitempty"`

	// TLSPrivateKeyFile is the PEM private key of tlsCertFile.
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile,omitempty"`
}

// MetricsAuthentication says who may read a binary's metrics.
type MetricsAuthentication string

const (
	// MetricsAuthenticationNone serves the metrics over plain HTTP to anyone.
	MetricsAuthenticationNone MetricsAuthentication = "None"
	// MetricsAuthenticationDelegated serves them over HTTPS to clients the
	// API server authenticates and authorizes.
	MetricsAuthenticationDelegated MetricsAuthentication = "Delegated"
)

// LeaseSettings describes the coordination.k8s.io/v1 Lease through which an
// extension proves it is alive (docs/controller.md). The extension heartbeat and the
// update agent share it.
type LeaseSettings struct {
	// Namespace holds the extension Leases. It must be the namespace the
	// node-health controller watches (its leaseNamespace).
	Namespace string `json:"namespace,omitempty"`

	// Duration is written as the Lease's spec.leaseDurationSeconds: how long the
	// controller waits without seeing a renewal (plus its renewalGrace) before it
	// treats the extension as not ready. The default mirrors the kubelet's node
	// Lease. Whole seconds only, because the Lease stores seconds.
	Duration *metav1.Duration `json:"duration,omitempty"`

	// RenewInterval is how often the Lease is renewed while the extension is
	// healthy; a small jitter is added to every interval so that a fleet of
	// nodes started together does not renew in lockstep. It must be at most a
	// quarter of duration (the default is exactly a quarter), as the kubelet
	// renews its node Lease: the node-health controller assumes every renewer
	// renews at least every duration/4, so that two lost renewals still leave
	// the Lease valid.
	RenewInterval *metav1.Duration `json:"renewInterval,omitempty"`
}
