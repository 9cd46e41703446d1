// Package heartbeat is the library a node extension embeds to prove it is
// alive: it creates and renews the extension's Lease "<extension>.<node>" in
// the extension namespace, gated on a health probe, and releases it with a
// reason when the extension fails or shuts down (docs/heartbeat.md).
//
// # Using it
//
//	cfg, err := rest.InClusterConfig()
//	...
//	client, err := heartbeat.NewClient(cfg) // or clientset.New(cs), below
//	...
//	r, err := heartbeat.New(client, heartbeat.Options{
//		NodeName:  os.Getenv("NODE_NAME"), // downward API: spec.nodeName
//		Extension: "kube-proxy",
//		Holder:    os.Getenv("POD_NAME"),  // downward API: metadata.name
//		Probe:     func(ctx context.Context) error { return checkMyself(ctx) },
//	})
//	...
//	_ = r.Run(ctx) // until ctx ends
//	if shuttingDown {
//		_ = r.Release(context.WithoutCancel(ctx), heartbeat.ReasonTerminating, "shutting down")
//	}
//
// # The client
//
// A Renewer needs five calls of the API server, the Client interface: get,
// create and update a coordination.k8s.io/v1 Lease, a SelfSubjectReview,
// and, failing that, a Node's UID. NewClient builds one from a *rest.Config
// that links and registers only those two API groups and speaks protobuf;
// client-go's clientset would link the types of every API group, most of a
// small process's memory. A process that already has a clientset passes
// clientset.New(cs) (package nodehealth.io/heartbeat/clientset) instead and
// pays nothing more; a process without one never links that package.
//
// # What it writes
//
// The Lease carries the labels of nodehealth.io/api/node/v1alpha1.LeaseLabels
// (plus nodehealth.io/register=true and nodehealth.io/affects-readiness=false
// when Options.Register and Options.AffectsReadiness ask for them), an
// ownerReference to the Node so that the Lease is garbage-collected with it,
// holderIdentity = Options.Holder, leaseDurationSeconds, and a renewTime
// written every RenewInterval plus up to 4% jitter. The Node's UID comes from
// a SelfSubjectReview: a pod-bound service-account token carries
// authentication.kubernetes.io/node-uid, so no Node permission is needed.
// Failing that the Node is read; failing that the Lease is written without an
// ownerReference and the reason is logged.
//
// # Releasing
//
// A released Lease has an empty holderIdentity and says why in the
// nodehealth.io/reason and nodehealth.io/message annotations; the node-health
// controller gates the node as soon as it sees it, instead of waiting for the
// Lease to expire. The Renewer releases on its own when the probe failed
// FailureThreshold times in a row (reason ProbeFailed) and re-acquires after
// SuccessThreshold successes. Callers release with Release: with
// ReasonTerminating on SIGTERM, or with nodev1alpha1.ReasonUpdating before
// planned maintenance (never escalated to eviction). When Run's context ends
// nothing is written: a process restarting to load a changed configuration
// file must not release, or one ConfigMap edit would gate every node at once.
//
// # Only fresh health is renewed
//
// A renewal attests that the probe succeeded within the last
// FailureThreshold × ProbePeriod, the time the probe needs to find a failure.
// After a freeze or stall longer than that (SIGSTOP, a paused VM, a starved
// process) the verdict from before it is unknown: nothing is renewed until a
// probe succeeds again, which the Renewer runs at once. Failed probes count
// towards the release as at start. A Renewer without a Probe renews whenever
// its process runs.
//
// # Being gentle with the API server
//
// One write per renewal (updates start from the last written copy); a
// conflict costs one GET and an immediate retry; other failures are retried
// with exponential back-off from 200ms to at most 7s, like the kubelet's node
// Lease. A shorter Lease caps the back-off at (duration − renew interval)/4,
// but never below the renew interval: a missed renewal still leaves several
// tries before the Lease expires, and a failing API server sees no more
// writes than a healthy one. Nothing is written while the Lease stays
// released.
//
// # Metrics
//
// Reported through Options.Metrics; package nodehealth.io/heartbeat/prommetrics
// exports them to Prometheus, each with the constant label extension:
// nodehealth_heartbeat_renewals_total, nodehealth_heartbeat_renewal_failures_total,
// nodehealth_heartbeat_releases_total{reason}, nodehealth_heartbeat_probe_duration_seconds{result},
// nodehealth_heartbeat_holding and nodehealth_heartbeat_last_renewal_timestamp_seconds.
//
// The module is kept separate from nodehealth's main module so that extension
// vendors depend only on client-go, prometheus client_golang and
// nodehealth.io/api.
package heartbeat
