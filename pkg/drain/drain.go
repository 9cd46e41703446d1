package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultInitialBackoff = 5 * time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultPollInterval   = 5 * time.Second
)

// Outcome is what one eviction attempt did.
type Outcome string

const (
	// Evicted: the API server accepted the eviction; the pod terminates.
	Evicted Outcome = "Evicted"
	// Gone: the pod no longer exists (404); nothing to do.
	Gone Outcome = "Gone"
	// Blocked: a PodDisruptionBudget (or the server's throttling) refused
	// the eviction with 429; it is retried with back-off.
	Blocked Outcome = "Blocked"
	// Failed: any other error; only this pod is backed off.
	Failed Outcome = "Failed"
)

// Result reports one eviction attempt.
type Result struct {
	Pod     *v1.Pod
	Outcome Outcome
	// Budget is the name of the PodDisruptionBudget that blocked the
	// eviction, when the API server named one.
	Budget string
	// Reason says why the eviction was blocked or failed, as the API server
	// put it.
	Reason string
	Err    error
	// Attempts counts the consecutive refused attempts for this pod.
	Attempts int
	// RetryAt is when a blocked or failed pod is tried again.
	RetryAt time.Time
}

// String names the pod and what stops it, for Events, conditions and logs.
func (r Result) String() string {
	pod := r.Pod.Namespace + "/" + r.Pod.Name
	switch r.Outcome {
	case Blocked:
		if r.Budget != "" {
			return fmt.Sprintf("pod %s blocked by PodDisruptionBudget %s: %s", pod, r.Budget, r.Reason)
		}
		return fmt.Sprintf("pod %s blocked: %s", pod, r.Reason)
	case Failed:
		return fmt.Sprintf("pod %s: eviction failed: %s", pod, r.Reason)
	default:
		return fmt.Sprintf("pod %s: %s", pod, strings.ToLower(string(r.Outcome)))
	}
}

// Status is where a drain stands after a pass.
type Status struct {
	// Pending holds the admitted pods not yet evicted, each with its last
	// refused attempt (pods tried in this pass or still backing off).
	Pending []Result
	// Terminating holds the admitted pods whose eviction was accepted (or
	// whose deletion began otherwise) and that are still on the node.
	Terminating []*v1.Pod
	// Evicted counts the evictions this pass issued.
	Evicted int
	// NextAttempt is the earliest time a pending pod may be tried again;
	// zero when nothing is pending.
	NextAttempt time.Time
}

// EvictionsIssued reports whether every admitted pod has been evicted (some
// may still be terminating).
func (s Status) EvictionsIssued() bool { return len(s.Pending) == 0 }

// Done reports whether no admitted pod is left on the node.
func (s Status) Done() bool { return len(s.Pending) == 0 && len(s.Terminating) == 0 }

// Options tune a Drainer; the zero value of each field means its default.
type Options struct {
	// Filter admits the pods to evict; nil admits every pod. Finished pods
	// (Succeeded, Failed) are never evicted: they hold nothing.
	Filter Filter
	// InitialBackoff and MaxBackoff bound the per-pod exponential back-off
	// after a refused eviction; a server's Retry-After lengthens it.
	InitialBackoff, MaxBackoff time.Duration
	// PollInterval is how often Drain lists the node while evicted pods
	// terminate.
	PollInterval time.Duration
	// Report, when set, is called after every eviction attempt.
	Report func(Result)
	// GracePeriodSeconds, when set, is every eviction's grace period
	// instead of each pod's own.
	GracePeriodSeconds *int64
}

// Drainer drains one node. It remembers per-pod back-off between passes, so
// keep one per drain. It is not safe for concurrent use.
type Drainer struct {
	client Client
	node   string
	clock  clock.Clock
	opts   Options

	// Keyed by namespace, name and UID: a pod re-created under its name is
	// a new pod.
	refused map[podKey]*Result
	evicted sets.Set[podKey]
}

type podKey struct {
	namespace, name string
	uid             types.UID
}

func keyOf(pod *v1.Pod) podKey { return podKey{pod.Namespace, pod.Name, pod.UID} }

// New returns a Drainer for the node.
func New(client Client, node string, clk clock.Clock, opts Options) *Drainer {
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = DefaultInitialBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.InitialBackoff {
		opts.MaxBackoff = opts.InitialBackoff
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	return &Drainer{client: client, node: node, clock: clk, opts: opts,
		refused: map[podKey]*Result{}, evicted: sets.New[podKey]()}
}

// Node is the node this Drainer drains.
func (d *Drainer) Node() string { return d.node }

// Admitted lists the pods on the node the drain would evict now (admitted,
// not finished, not terminating), without evicting anything: for dry runs
// and announcements.
func (d *Drainer) Admitted(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []*v1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil && !d.evicted.Has(keyOf(pod)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// list returns the admitted, unfinished pods of the node.
func (d *Drainer) list(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := d.client.ListPods(ctx, d.node)
	if err != nil {
		return nil, fmt.Errorf("listing pods of node %s: %w", d.node, err)
	}
	var out []*v1.Pod
	for i := range pods {
		pod := &pods[i]
		// Guard against clients that ignore the field selector.
		if pod.Spec.NodeName != d.node {
			continue
		}
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if d.opts.Filter != nil && !d.opts.Filter(pod) {
			continue
		}
		out = append(out, pod)
	}
	return out, nil
}

// Pass lists the node's pods once and evicts every admitted pod that is not
// backing off. One refused eviction never stops the others. It returns an
// error only when the list fails; refused evictions are in the Status (and
// reported). Once ctx ends it tries no further pod and lists the untried ones
// as pending.
func (d *Drainer) Pass(ctx context.Context) (Status, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", d.node)
	pods, err := d.list(ctx)
	if err != nil {
		return Status{}, err
	}
	var st Status
	seen := sets.New[podKey]()
	for _, pod := range pods {
		key := keyOf(pod)
		seen.Insert(key)
		if pod.DeletionTimestamp != nil || d.evicted.Has(key) {
			st.Terminating = append(st.Terminating, pod)
			continue
		}
		if last := d.refused[key]; last != nil && (d.clock.Now().Before(last.RetryAt) || ctx.Err() != nil) {
			st.Pending = append(st.Pending, *last)
			continue
		}
		if ctx.Err() != nil {
			st.Pending = append(st.Pending, Result{Pod: pod, Outcome: Failed, Reason: "not tried before the drain ended", Err: ctx.Err()})
			continue
		}
		r := d.evict(ctx, pod)
		switch r.Outcome {
		case Evicted:
			logger.V(2).Info("Evicted pod", "pod", klog.KObj(pod))
			st.Evicted++
			d.evicted.Insert(key)
			st.Terminating = append(st.Terminating, pod)
		case Gone:
		default:
			// Whether the pod is tried again is the caller's choice (a
			// one-shot pass does not), so the message does not promise it;
			// retryAt is when Pass would try it next.
			logger.Info("Eviction refused", "pod", klog.KObj(pod),
				"outcome", r.Outcome, "budget", r.Budget, "reason", r.Reason, "retryAt", r.RetryAt)
			st.Pending = append(st.Pending, r)
		}
		if d.opts.Report != nil {
			d.opts.Report(r)
		}
	}
	for key := range d.refused {
		if !seen.Has(key) {
			delete(d.refused, key)
		}
	}
	for key := range d.evicted {
		if !seen.Has(key) {
			d.evicted.Delete(key)
		}
	}
	for _, r := range st.Pending {
		if !r.RetryAt.IsZero() && (st.NextAttempt.IsZero() || r.RetryAt.Before(st.NextAttempt)) {
			st.NextAttempt = r.RetryAt
		}
	}
	return st, nil
}

func (d *Drainer) evict(ctx context.Context, pod *v1.Pod) Result {
	err := d.client.Evict(ctx, pod, d.opts.GracePeriodSeconds)
	r := Result{Pod: pod, Err: err}
	switch {
	case err == nil:
		r.Outcome = Evicted
		delete(d.refused, keyOf(pod))
		return r
	case apierrors.IsNotFound(err):
		r.Outcome = Gone
		delete(d.refused, keyOf(pod))
		return r
	case apierrors.IsTooManyRequests(err):
		r.Outcome = Blocked
		r.Budget, r.Reason = BlockingBudget(err)
	default:
		r.Outcome = Failed
		r.Reason = err.Error()
	}
	r.Attempts = 1
	if last := d.refused[keyOf(pod)]; last != nil {
		r.Attempts = last.Attempts + 1
	}
	delay := d.backoff(r.Attempts)
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(seconds)*time.Second > delay {
		delay = time.Duration(seconds) * time.Second
	}
	r.RetryAt = d.clock.Now().Add(delay)
	d.refused[keyOf(pod)] = &r
	return r
}

// backoff doubles from InitialBackoff per refused attempt, up to MaxBackoff.
func (d *Drainer) backoff(attempts int) time.Duration {
	delay := d.opts.InitialBackoff
	for i := 1; i < attempts && delay < d.opts.MaxBackoff; i++ {
		delay *= 2
	}
	return min(delay, d.opts.MaxBackoff)
}

// Drain passes over the node until no admitted pod is left on it (every
// eviction issued and every evicted pod gone) or ctx ends. It waits for the
// earliest back-off while pods are pending and polls every PollInterval while
// pods terminate. A failed list is retried with back-off. On ctx's end it
// returns an *IncompleteError naming what was left.
func (d *Drainer) Drain(ctx context.Context) (Status, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", d.node)
	var last Status
	listFailures := 0
	for {
		st, err := d.Pass(ctx)
		if err == nil {
			last, listFailures = st, 0
			if st.Done() {
				return st, nil
			}
		}
		if ctx.Err() != nil {
			return last, &IncompleteError{Node: d.node, Status: last, Err: ctx.Err()}
		}
		var wait time.Duration
		if err != nil {
			listFailures++
			wait = d.backoff(listFailures)
			logger.Info("Listing the node's pods failed; retrying", "err", err, "retryIn", wait)
		} else {
			wait = d.opts.PollInterval
			if !st.NextAttempt.IsZero() {
				until := st.NextAttempt.Sub(d.clock.Now())
				if len(st.Terminating) == 0 || until < wait {
					wait = until
				}
			}
		}
		timer := d.clock.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return last, &IncompleteError{Node: d.node, Status: last, Err: ctx.Err()}
		case <-timer.C():
		}
	}
}

// IncompleteError is a drain that ended before the node was empty.
type IncompleteError struct {
	Node   string
	Status Status
	Err    error
}

func (e *IncompleteError) Error() string {
	var parts []string
	for _, r := range e.Status.Pending {
		parts = append(parts, r.String())
	}
	if n := len(e.Status.Terminating); n > 0 {
		parts = append(parts, fmt.Sprintf("%d pods still terminating", n))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("drain of node %s did not finish: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("drain of node %s did not finish (%s): %v", e.Node, strings.Join(parts, "; "), e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// BlockingBudget names the PodDisruptionBudget behind a 429 of the Eviction
// API, from the causes the API server attaches ("The disruption budget NAME
// needs 2 healthy pods and has 2 currently", "... NAME is still being
// processed by the server."), and returns the server's explanation. The name
// is empty when the error names no budget (throttling, another server).
func BlockingBudget(err error) (budget, reason string) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		if err == nil {
			return "", ""
		}
		return "", err.Error()
	}
	var causes []string
	for _, cause := range status.Status().Details.Causes {
		if cause.Message == "" {
			continue
		}
		causes = append(causes, cause.Message)
		if cause.Type == policyv1.DisruptionBudgetCause && budget == "" {
			if rest, ok := strings.CutPrefix(cause.Message, "The disruption budget "); ok {
				budget, _, _ = strings.Cut(rest, " ")
			}
		}
	}
	if len(causes) == 0 {
		return budget, err.Error()
	}
	return budget, strings.Join(causes, "; ")
}
