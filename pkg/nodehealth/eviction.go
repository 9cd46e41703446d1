package nodehealth

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// mirrorPodAnnotation marks static pods' mirrors, which cannot be evicted.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

func (c *Controller) evictionWorker(ctx context.Context) {
	for c.processNextEviction(ctx) {
	}
}

func (c *Controller) processNextEviction(ctx context.Context) bool {
	name, quit := c.evictions.Get()
	if quit {
		return false
	}
	defer c.evictions.Done(name)
	retry, err := c.escalate(ctx, name)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Escalating node failed, will retry", "node", name)
		c.evictions.AddRateLimited(name)
	case retry:
		c.evictions.AddRateLimited(name)
	default:
		c.evictions.Forget(name)
	}
	return true
}

// escalate evicts the pods of a node whose extension failed long enough, or
// asks for the NoExecute taint. It reports whether blocked evictions need a
// retry. The cluster-wide rate limit applies once per node escalation; retries
// of blocked evictions do not consume it.
func (c *Controller) escalate(ctx context.Context, name string) (bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", name)
	if !c.stillFailing(name) {
		return false, nil
	}
	c.mu.Lock()
	st := c.nodes[name]
	first := st != nil && !st.escalated
	c.mu.Unlock()
	if first {
		if err := c.evictionLimiter.Wait(ctx); err != nil {
			return false, err
		}
		// The wait may have been long: check again.
		if !c.stillFailing(name) {
			return false, nil
		}
		c.mu.Lock()
		st.escalated = true
		c.mu.Unlock()
	}
	node, err := c.nodeLister.Get(name)
	if err != nil {
		return false, client404(err)
	}

	switch c.opts.Eviction.Mode {
	case EvictionModeNoExecute:
		logger.Info("Escalating: adding the NoExecute readiness taint so that pods' tolerationSeconds apply", "timeout", c.opts.Eviction.Timeout)
		c.metrics.Evictions.WithLabelValues("noexecute").Inc()
		if c.opts.DryRun {
			c.metrics.DryRunActions.WithLabelValues("noexecute").Inc()
			return false, nil
		}
		c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictingPods,
			"A required extension failed %s ago; adding taint %s:NoExecute", c.opts.Eviction.Timeout, c.opts.TaintKey)
		c.queue.Add(name)
		return false, nil
	case EvictionModeEvict:
		return c.evictPods(ctx, node, first)
	default:
		return false, nil
	}
}

// stillFailing re-checks that escalation is due and allowed.
func (c *Controller) stillFailing(name string) bool {
	c.mu.Lock()
	st := c.nodes[name]
	ok := st != nil && st.failing && st.gated
	c.mu.Unlock()
	if !ok {
		return false
	}
	if suspended, _ := c.blast.suspended(c.zoneOf(name)); suspended {
		return false
	}
	return c.canary == nil || !c.canary.stale()
}

func (c *Controller) zoneOf(name string) string {
	node, err := c.nodeLister.Get(name)
	if err != nil {
		return ""
	}
	return node.Labels[zoneLabel]
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// evictPods evicts, through the Eviction API, every pod on the node except
// DaemonSet pods (they would come back at once), mirror pods (they cannot be
// evicted), finished pods and pods that tolerate the readiness taint (they
// chose to run on gated nodes, like the extensions themselves).
func (c *Controller) evictPods(ctx context.Context, node *v1.Node, first bool) (bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", node.Name)
	pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String(),
	})
	if err != nil {
		return false, fmt.Errorf("listing pods of node %s: %w", node.Name, err)
	}
	taint := v1.Taint{Key: c.opts.TaintKey, Effect: c.opts.TaintEffect}
	var evictable []*v1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if skipEviction(pod, &taint) {
			continue
		}
		evictable = append(evictable, pod)
	}
	if len(evictable) == 0 {
		return false, nil
	}
	if first && !c.opts.DryRun {
		c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictingPods,
			"A required extension failed %s ago; evicting %d pods through the Eviction API", c.opts.Eviction.Timeout, len(evictable))
	}
	logger.Info("Evicting pods of a node whose required extension failed", "pods", len(evictable), "timeout", c.opts.Eviction.Timeout)
	blocked := 0
	for _, pod := range evictable {
		if c.opts.DryRun {
			c.metrics.DryRunActions.WithLabelValues("evict").Inc()
			continue
		}
		err := c.client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		})
		switch {
		case err == nil:
			c.metrics.Evictions.WithLabelValues("evicted").Inc()
			logger.V(2).Info("Evicted pod", "pod", klog.KObj(pod))
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			blocked++
			c.metrics.Evictions.WithLabelValues("blocked").Inc()
			why := blockingBudget(err)
			logger.Info("Eviction blocked; will retry with back-off", "pod", klog.KObj(pod), "reason", why)
			c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictionBlocked, "Cannot evict pod %s/%s yet: %s", pod.Namespace, pod.Name, why)
		default:
			c.metrics.Evictions.WithLabelValues("error").Inc()
			return true, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return blocked > 0, nil
}

func skipEviction(pod *v1.Pod, taint *v1.Taint) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.DeletionTimestamp != nil {
		return true
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return true
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return true
		}
	}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// blockingBudget names the PodDisruptionBudget behind a 429 from the Eviction
// API, from the causes the API server attaches.
func blockingBudget(err error) string {
	var status apierrors.APIStatus
	msg := err.Error()
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	}
	if status != nil && status.Status().Details != nil {
		var causes []string
		for _, cause := range status.Status().Details.Causes {
			if cause.Type == policyv1.DisruptionBudgetCause || cause.Message != "" {
				causes = append(causes, cause.Message)
			}
		}
		if len(causes) > 0 {
			return strings.Join(causes, "; ")
		}
	}
	return msg
}
