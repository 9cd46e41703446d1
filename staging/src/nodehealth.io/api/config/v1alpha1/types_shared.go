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
}

// LeaseSettings describes the coordination.k8s.io/v1 Lease through which an
// extension proves it is alive (docs/controller.md, §6). The extension heartbeat and the
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
	// nodes started together does not renew in lockstep. It must be shorter than
	// duration; a quarter of it (the default) survives two lost renewals.
	RenewInterval *metav1.Duration `json:"renewInterval,omitempty"`
}
