package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Defaults mirror the kubelet's node Lease (docs/heartbeat.md): a 40 s Lease renewed
// every quarter of it, so that two lost renewals still leave it valid.
const (
	DefaultLeaseDuration    = 40 * time.Second
	DefaultRenewInterval    = 10 * time.Second
	DefaultJitterFactor     = 0.04 // the kubelet's lease controller jitter
	DefaultProbeTimeout     = time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 1

	// MinRetryInterval and MaxRetryInterval bound the exponential back-off
	// after a failed write, like the kubelet's "starting at 200 milliseconds
	// and capped at 7 seconds": a struggling API server sees at most one
	// write every 7 s from each node, never a tight loop. A Lease too short
	// for a 7 s wait caps it lower (retryCap).
	MinRetryInterval = 200 * time.Millisecond
	MaxRetryInterval = 7 * time.Second
)

// Reasons the renewer writes into the nodehealth.io/reason annotation when it
// releases the Lease. Callers may release with any other CamelCase reason,
// such as nodev1alpha1.ReasonUpdating for planned maintenance.
const (
	// ReasonProbeFailed: the health probe failed FailureThreshold times in a row.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonTerminating: the extension is shutting down (SIGTERM).
	ReasonTerminating = "Terminating"
)

// Probe checks the extension's health. A nil error means healthy; the error's
// text becomes the nodehealth.io/message of a released Lease, so it should say
// what failed ("GET http://127.0.0.1:10256/healthz: 503 Service Unavailable").
type Probe func(ctx context.Context) error

// Options configure a Renewer. Only Client (given to New), NodeName, Extension
// and Holder are required; everything else has a kubelet-like default.
type Options struct {
	// Namespace holds the extension Leases; default "node-extension-lease".
	// It must be the namespace the node-health controller watches.
	Namespace string
	// NodeName is the node the extension runs on, usually from the downward
	// API (spec.nodeName).
	NodeName string
	// Extension is the system extension's name, a DNS label (no dots).
	Extension string
	// Holder is written as holderIdentity while the Lease is held; use the pod
	// name, so that "kubectl get lease" says which pod renews it.
	Holder string

	// LeaseDuration is written as spec.leaseDurationSeconds (whole seconds);
	// default 40s. A Lease much shorter than the default also shortens the
	// back-off after failed writes (MaxRetryInterval), so that a missed
	// renewal is retried several times before the Lease expires.
	LeaseDuration time.Duration
	// RenewInterval is the time between two renewals while healthy; default
	// 10s. Each interval is stretched by a random share of up to JitterFactor
	// so that nodes started together do not renew in lockstep. It must be at
	// most a quarter of LeaseDuration, as the kubelet renews its node Lease:
	// the node-health controller assumes every renewer does (docs/heartbeat.md).
	RenewInterval time.Duration
	// JitterFactor is the largest share added to RenewInterval; default 0.04.
	JitterFactor float64

	// Probe gates every renewal on the extension's health. Nil means always
	// healthy: the Lease then only proves that the process is alive.
	Probe Probe
	// ProbePeriod is the time between two probes; default RenewInterval.
	// Probing more often than renewing detects a failure sooner without
	// writing more: a failure releases the Lease at once, not at the next
	// renewal.
	ProbePeriod time.Duration
	// ProbeTimeout bounds one probe; default 1s.
	ProbeTimeout time.Duration
	// FailureThreshold consecutive failures release the Lease (reason
	// ProbeFailed); default 3, so one slow answer does not gate the node.
	FailureThreshold int
	// SuccessThreshold consecutive successes after a failure re-acquire it;
	// default 1. At start one success is enough: a restart must not leave a
	// held Lease unrenewed longer than necessary.
	SuccessThreshold int

	// Register labels the Lease nodehealth.io/register=true so that the
	// node-health controller adds the extension to the node's list itself.
	Register bool
	// AffectsReadiness false (with Register) labels the Lease
	// nodehealth.io/affects-readiness=false: tracked, never gating. Nil means
	// true.
	AffectsReadiness *bool

	// NodeUID, when known, is used for the Lease's ownerReference to its Node.
	// When empty the renewer reads it from a SelfSubjectReview (a pod-bound
	// token carries it, no Node permission needed) or, failing that, from the
	// Node object.
	NodeUID types.UID

	// Clock is injected by tests; default the real clock.
	Clock clock.WithTicker
	// Metrics receives the renewer's observations; nil records nothing.
	// prommetrics.New(registerer, extension) (package
	// nodehealth.io/heartbeat/prommetrics) exports them to Prometheus.
	Metrics Metrics
}

// retryCap is the longest the back-off waits between two failed writes:
// MaxRetryInterval, unless the Lease is too short for it. After a missed
// renewal a Lease has duration − renew interval left, and a 7 s wait could
// use up most of that: an API server back from a short outage would see the
// Lease expire before the renewer tried again, although the controller's
// grace after an outage (a whole duration + renewalGrace from the moment its
// view is current again) is there to cover exactly that. So the cap is also
// at most a quarter of what is left, which leaves several tries before
// expiry, but never below the renew interval: a struggling API server sees
// no more writes per Lease than a healthy one does. The kubelet's numbers,
// a 40 s Lease renewed every 10 s, keep the 7 s cap. Call it on defaulted
// options.
func (o *Options) retryCap() time.Duration {
	return min(MaxRetryInterval, max(o.RenewInterval, (o.LeaseDuration-o.RenewInterval)/4))
}

// complete fills in defaults and validates; it returns the Lease name.
func (o *Options) complete() (string, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return "", err
	}
	// The shared contract refuses names over 253 characters with an error
	// naming the limit: a truncated name could be another node's Lease.
	return nodev1alpha1.LeaseName(o.Extension, o.NodeName)
}

func (o *Options) setDefaults() {
	if o.Namespace == "" {
		o.Namespace = nodev1alpha1.DefaultLeaseNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.JitterFactor == 0 {
		o.JitterFactor = DefaultJitterFactor
	}
	if o.ProbePeriod == 0 {
		o.ProbePeriod = o.RenewInterval
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.SuccessThreshold == 0 {
		o.SuccessThreshold = DefaultSuccessThreshold
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// validate returns every problem of the defaulted options at once.
func (o *Options) validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("NodeName is required"))
	}
	if o.Extension == "" {
		errs = append(errs, errors.New("extension name is required"))
	}
	if o.Holder == "" {
		errs = append(errs, errors.New("holder is required (use the pod name)"))
	}
	if msgs := validation.IsDNS1123Subdomain(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid namespace %q: %v", o.Namespace, msgs))
	}
	if o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("lease duration %s must be whole seconds, at least 1s (the Lease stores leaseDurationSeconds)", o.LeaseDuration))
	}
	switch {
	case o.RenewInterval <= 0:
		errs = append(errs, fmt.Errorf("renew interval %s must be positive", o.RenewInterval))
	case o.RenewInterval > o.LeaseDuration/4:
		// The node-health controller assumes every renewer renews at least
		// every duration/4, as the kubelet renews its node Lease (40s, every
		// 10s): two renewals may then be lost before the Lease expires.
		errs = append(errs, fmt.Errorf("renew interval %s is longer than a quarter of the lease duration %s: renew at least every %s (duration/4), as the kubelet does its node Lease",
			o.RenewInterval, o.LeaseDuration, o.LeaseDuration/4))
	}
	if o.JitterFactor < 0 {
		errs = append(errs, fmt.Errorf("jitter factor %v must not be negative", o.JitterFactor))
	}
	if o.ProbePeriod <= 0 || o.ProbeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("probe period %s and timeout %s must be positive", o.ProbePeriod, o.ProbeTimeout))
	}
	if o.FailureThreshold < 1 || o.SuccessThreshold < 1 {
		errs = append(errs, fmt.Errorf("failure threshold %d and success threshold %d must be at least 1", o.FailureThreshold, o.SuccessThreshold))
	}
	return errors.Join(errs...)
}
