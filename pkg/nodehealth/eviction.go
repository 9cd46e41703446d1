package nodehealth

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/drain"
	drainclientset "nodehealth.io/nodehealth/pkg/drain/clientset"
)

// EventEvictionFailed names a pod whose eviction failed for a reason other
// than a PodDisruptionBudget; the other pods are evicted meanwhile.
const EventEvictionFailed = "EvictionFailed"

// EventEvictionSkipped names the pods mode Evict leaves on the node because
// kubectl drain would not remove them without a flag: pods that declare no
// controller (eviction.force) and pods with emptyDir data
// (eviction.deleteEmptyDirData).
const EventEvictionSkipped = "EvictionSkipped"

// maxPodsNamed bounds the pods an Event or the condition names; the rest are
// counted.
const maxPodsNamed = 10

// mirrorPodAnnotation marks static pods' mirrors, which cannot be evicted.
const mirrorPodAnnotation = drain.MirrorPodAnnotation

// Back-off of one pod whose eviction is refused (blocked by a budget or
// failed); other pods of the node are not held up by it.
const (
	evictionInitialBackoff = 5 * time.Second
	evictionMaxBackoff     = 5 * time.Minute
)

// drainers holds the drain in progress of each escalated node, so that the
// per-pod back-off survives between retries. A node's entry goes when its
// evictions are all issued or it no longer fails.
type drainers struct {
	mu sync.Mutex
	m  map[string]*drain.Drainer
	// left holds, per escalated node, the pods its drain's last pass left
	// because evicting them loses something (drain.Overrides.LeftBy: no
	// controller, emptyDir data), keyed by namespace/name, with the reason.
	// It outlives the node's drainer, so the condition keeps naming them
	// after every other eviction was issued, and goes when the node no
	// longer fails.
	left map[string]map[string]string
	// passLeft collects what the pass in progress over a node leaves; a
	// pass that fails to list keeps the last pass's record.
	passLeft map[string]map[string]string
}

// beginPass starts recording the pods a pass over the node leaves.
func (d *drainers) beginPass(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.passLeft == nil {
		d.passLeft = map[string]map[string]string{}
	}
	d.passLeft[node] = map[string]string{}
}

// leave records a pod the node's pass leaves, and why.
func (d *drainers) leave(node string, pod *v1.Pod, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.passLeft[node]; m != nil {
		m[pod.Namespace+"/"+pod.Name] = why
	}
}

// endPass makes the pass's record the node's, and returns the pods named
// before and after it (leftOn).
func (d *drainers) endPass(node string) (before, after string) {
	before = d.leftOn(node)
	d.mu.Lock()
	if m, ok := d.passLeft[node]; ok {
		delete(d.passLeft, node)
		if d.left == nil {
			d.left = map[string]map[string]string{}
		}
		d.left[node] = m
	}
	d.mu.Unlock()
	return before, d.leftOn(node)
}

// leftOn names the pods the node's drain left, sorted and bounded, or ""
// when it left none.
func (d *drainers) leftOn(node string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.left[node]
	if len(m) == 0 {
		return ""
	}
	pods := make([]string, 0, len(m))
	for pod := range m {
		pods = append(pods, pod)
	}
	sort.Strings(pods)
	var parts []string
	for i, pod := range pods {
		if i == maxPodsNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(pods)-i))
			break
		}
		parts = append(parts, pod+" ("+m[pod]+")")
	}
	return strings.Join(parts, ", ")
}

func (d *drainers) get(name string, create func() *drain.Drainer) *drain.Drainer {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]*drain.Drainer{}
	}
	dr := d.m[name]
	if dr == nil {
		dr = create()
		d.m[name] = dr
	}
	return dr
}

func (d *drainers) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
}

// forgetLeft forgets the pods the node's drain left.
func (d *drainers) forgetLeft(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.left, name)
}

// end forgets the node's drain and the pods it left: the node no longer
// fails (or is gone).
func (d *drainers) end(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
	delete(d.left, name)
	delete(d.passLeft, name)
}

// withPodsLeft adds to the SystemExtensionsReady condition of an escalated
// node the pods mode Evict left on it, so that the condition says what
// still runs there and which setting would move it; the signature changes
// with them, so the condition is rewritten when they do. Called under c.mu.
func (c *Controller) withPodsLeft(name string, st *nodeState, message, signature string) (string, string) {
	if st == nil || !st.escalation.marked || c.opts.Eviction.Mode != EvictionModeEvict {
		return message, signature
	}
	left := c.drains.leftOn(name)
	if left == "" {
		return message, signature
	}
	return message + podsLeftPrefix + left + ".", signature + "|left:" + left
}

// podsLeftPrefix begins the condition message's list of the pods an
// eviction left on the node.
const podsLeftPrefix = " Pods left on the node by the eviction: "

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
	after, err := c.escalateNode(ctx, name)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Escalating node failed, will retry", "node", name)
		c.evictions.AddRateLimited(name)
	case after > 0:
		// The drain's per-pod back-off decides when the node is due again.
		c.evictions.Forget(name)
		c.evictions.AddAfter(name, after)
	default:
		c.evictions.Forget(name)
	}
	return true
}

// escalate reports whether the node's escalation needs a retry.
func (c *Controller) escalate(ctx context.Context, name string) (bool, error) {
	after, err := c.escalateNode(ctx, name)
	return after > 0, err
}

// escalateNode evicts the pods of a node whose extension failed long enough,
// or asks for the NoExecute taint. It returns when the node needs another
// pass for refused evictions, or when its turn of the cluster-wide rate
// limit comes (0: neither). The rate limit applies once per node
// escalation; retries of refused evictions do not consume it.
func (c *Controller) escalateNode(ctx context.Context, name string) (time.Duration, error) {
	if wait := c.untilTurn(name); wait > 0 {
		return wait, nil
	}
	failing, held := c.escalationDue(ctx, name)
	if !failing {
		c.drains.end(name)
		c.spendTurn(name)
		return 0, nil
	}
	first := c.holdOrResumeDrain(name, held)
	if held {
		c.spendTurn(name)
		return 0, nil
	}
	if first {
		if wait, started := c.startEscalation(ctx, name); !started {
			return wait, nil
		}
	}
	node, err := c.nodeLister.Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.drains.end(name)
		}
		return 0, client404(err)
	}
	switch c.opts.Eviction.Mode {
	case EvictionModeNoExecute:
		c.askForNoExecute(ctx, node)
		return 0, nil
	case EvictionModeEvict:
		return c.evictPods(ctx, node, first)
	default:
		return 0, nil
	}
}

// untilTurn is how long the node still waits for the turn of the rate limit
// it took (0: it took none, or its instant has come).
func (c *Controller) untilTurn(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.nodes[name]
	if st == nil || st.escalationTurn.IsZero() {
		return 0
	}
	return max(st.escalationTurn.Sub(c.clock.Now()), 0)
}

// spendTurn ends the turn the node took, whose instant has come, without
// escalating it: it no longer fails, or a guard holds it. The token is gone
// as a wait for it would have spent it.
func (c *Controller) spendTurn(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.nodes[name]; st != nil && !c.clock.Now().Before(st.escalationTurn) {
		st.escalationTurn = time.Time{}
	}
}

// holdOrResumeDrain records whether a guard holds an escalated node's drain:
// a suspension that began while the node was being drained interrupts the
// drain (and its per-pod back-off), and the node's evaluation queues it again
// when the suspension ends, if it still fails. It reports whether the node
// has not been escalated yet.
func (c *Controller) holdOrResumeDrain(name string, held bool) (first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.nodes[name]
	if st == nil {
		return false
	}
	if !st.escalation.marked {
		return true
	}
	st.escalation.interrupted = held
	return false
}

// startEscalation marks the node escalated once its turn of the
// cluster-wide eviction rate limit has come, taking a turn if it has none;
// until then it reports how long the node waits.
func (c *Controller) startEscalation(ctx context.Context, name string) (time.Duration, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	st := c.nodes[name]
	if st == nil {
		c.mu.Unlock()
		return 0, false
	}
	took := st.escalationTurn.IsZero()
	if took {
		st.escalationTurn = c.evictionTurns.take(now)
	}
	if turn := st.escalationTurn; now.Before(turn) {
		c.mu.Unlock()
		klog.FromContext(ctx).V(2).Info("Escalation waits for its turn of the cluster-wide eviction rate (eviction.nodesPerSecond)", "node", name, "turn", turn)
		if took {
			c.deferred(name, now, turn)
		}
		return turn.Sub(now), false
	}
	st.escalationTurn = time.Time{}
	// What an earlier escalation of the node left is not news: this one's
	// first pass names what it leaves.
	c.drains.forgetLeft(name)
	st.escalation.marked = true
	c.mu.Unlock()
	if c.opts.Eviction.Mode == EvictionModeEvict {
		// Its sync says DrainInProgress (writeLifecycle).
		c.enqueue(name)
	}
	return 0, true
}

// askForNoExecute queues the node's sync, which adds the NoExecute readiness
// taint: the pods' tolerationSeconds then decide when they go.
func (c *Controller) askForNoExecute(ctx context.Context, node *v1.Node) {
	klog.FromContext(ctx).Info("Escalating: adding the NoExecute readiness taint so that pods' tolerationSeconds apply",
		"node", node.Name, "timeout", c.opts.Eviction.Timeout)
	c.metrics.Evictions.WithLabelValues("noexecute").Inc()
	if c.opts.DryRun {
		c.metrics.DryRunActions.WithLabelValues("noexecute").Inc()
		return
	}
	c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictingPods,
		"A required extension failed %s ago; adding taint %s:NoExecute", c.opts.Eviction.Timeout, c.opts.TaintKey)
	c.enqueue(node.Name)
}

// escalationDue re-checks a node queued for escalation: whether it still
// fails and is due (escalated, or its eviction clock ran out: a drain retry
// queued in an earlier failure may fire in the next one), and whether a
// guard (blast radius, own view) holds its escalation. The blast radius is
// asked on a count brought up to date first, as before a failure taint.
func (c *Controller) escalationDue(ctx context.Context, name string) (failing, held bool) {
	c.mu.Lock()
	st := c.nodes[name]
	failing = st != nil && c.blast.isFailing(name) && st.gated && (st.escalation.marked || st.escalation.clock.ranOut(c.clock.Now(), c.opts.Eviction.Timeout))
	c.mu.Unlock()
	if !failing {
		return false, false
	}
	// A node that started leaving (deleted, tainted by an autoscaler,
	// drained by someone else) is no longer drained, even before its next
	// evaluation takes it out of the count.
	zone := ""
	if node, err := c.nodeLister.Get(name); err == nil {
		if why, _ := leavingFactsOf(node, &c.opts).Signal(c.clock.Now(), c.opts.LifecycleConditionMaxAge); why != "" {
			return false, false
		}
		zone = zoneOf(node)
	}
	if ownViewStale, suspended, _ := c.guardsHold(zone); ownViewStale || suspended {
		return true, true
	}
	// Failures that came due in this instant, whose nodes' own
	// evaluations have not run yet, are counted before the node is
	// escalated: a suspension they begin holds this escalation too
	// (simulation seed 10902770050846289540: a Lease that expired in the
	// instant of a node's turn tripped the cluster's blast radius, and the
	// turn evicted the node all the same).
	now := c.clock.Now()
	c.mu.Lock()
	changes := c.recountFailing(name, now)
	c.mu.Unlock()
	c.handleSuspensionChanges(ctx, changes, now)
	ownViewStale, suspended, _ := c.guardsHold(zone)
	return true, suspended || ownViewStale
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// evictPods evicts, through the Eviction API, every pod on the node except
// DaemonSet pods (they would come back at once), mirror pods (they cannot be
// evicted), finished pods, pods that tolerate the readiness taint (they
// chose to run on gated nodes, like the extensions themselves) and, as
// kubectl drain, pods that declare no controller unless eviction.force and
// pods with emptyDir data unless eviction.deleteEmptyDirData: those are
// named (podsLeft). A refused eviction backs off only its pod, named in an
// Event; the others proceed.
func (c *Controller) evictPods(ctx context.Context, node *v1.Node, first bool) (time.Duration, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "node", node.Name)
	d := c.drains.get(node.Name, func() *drain.Drainer { return c.newDrainer(node) })
	c.drains.beginPass(node.Name)
	if first || c.opts.DryRun {
		pods, err := d.Admitted(ctx)
		if err != nil {
			return 0, err
		}
		if len(pods) == 0 {
			c.podsLeft(ctx, node)
			c.drains.forget(node.Name)
			c.markDrained(node.Name)
			return 0, nil
		}
		logger.Info("Evicting pods of a node whose required extension failed", "pods", len(pods), "timeout", c.opts.Eviction.Timeout, "dryRun", c.opts.DryRun)
		if c.opts.DryRun {
			c.podsLeft(ctx, node)
			c.metrics.DryRunActions.WithLabelValues("evict").Add(float64(len(pods)))
			c.drains.forget(node.Name)
			return 0, nil
		}
		c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictingPods,
			"A required extension failed %s ago; evicting %d pods through the Eviction API", c.opts.Eviction.Timeout, len(pods))
	}
	st, err := d.Pass(ctx)
	if err != nil {
		return 0, err
	}
	c.podsLeft(ctx, node)
	if st.EvictionsIssued() {
		// The escalation's drain ends here (evicted pods terminate by
		// their grace period): the node is Drained.
		c.drains.forget(node.Name)
		c.markDrained(node.Name)
		return 0, nil
	}
	return max(st.NextAttempt.Sub(c.clock.Now()), time.Millisecond), nil
}

// markDrained records that the escalation's drain issued every eviction it
// may issue on the node (what is left, the filters leave), and queues the node so that its lifecycle conditions say so.
func (c *Controller) markDrained(name string) {
	c.mu.Lock()
	st := c.nodes[name]
	changed := st != nil && st.escalation.marked && !st.escalation.drained
	if changed {
		st.escalation.drained = true
	}
	c.mu.Unlock()
	if changed {
		c.enqueue(name)
	}
}

// podsLeft ends the pass's record of the pods left for want of
// eviction.force or eviction.deleteEmptyDirData. When it names other pods
// than before, it logs them, names them in an EvictionSkipped Event, and
// queues the node so that its condition names them (withPodsLeft).
func (c *Controller) podsLeft(ctx context.Context, node *v1.Node) {
	before, after := c.drains.endPass(node.Name)
	if after == before {
		return
	}
	if after != "" {
		klog.FromContext(ctx).Info("Leaving pods that kubectl drain would not remove without a flag", "node", node.Name, "pods", after, "dryRun", c.opts.DryRun)
	}
	if c.opts.DryRun {
		return
	}
	if after != "" {
		c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictionSkipped,
			"Not evicting pods that kubectl drain would not remove without a flag (eviction.force, eviction.deleteEmptyDirData): %s", after)
	}
	c.enqueue(node.Name)
}

// newDrainer drains a node with the escalation's filter; its report counts
// each attempt and names every refused pod in an Event on the Node.
func (c *Controller) newDrainer(node *v1.Node) *drain.Drainer {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	taint := v1.Taint{Key: c.opts.TaintKey, Effect: c.opts.TaintEffect}
	overrides := drain.Overrides{Force: c.opts.Eviction.Force, DeleteEmptyDirData: c.opts.Eviction.DeleteEmptyDirData}
	name := node.Name
	// Last, so that only pods the escalation would otherwise evict are
	// recorded as left (not DaemonSet, mirror or tolerating pods).
	leftBy := func(pod *v1.Pod) bool {
		why := overrides.LeftBy(pod)
		if why != "" && pod.DeletionTimestamp == nil {
			c.drains.leave(name, pod, why)
		}
		return why == ""
	}
	return drain.New(drainclientset.New(c.client.CoreV1(), c.client.PolicyV1()), node.Name, c.clock, drain.Options{
		Filter:         drain.All(drain.SkipDaemonSetAndMirrorPods, drain.SkipTolerating(taint), leftBy),
		InitialBackoff: evictionInitialBackoff,
		MaxBackoff:     evictionMaxBackoff,
		Report: func(r drain.Result) {
			retry := r.RetryAt.Sub(c.clock.Now()).Round(time.Second)
			switch r.Outcome {
			case drain.Evicted:
				c.metrics.Evictions.WithLabelValues("evicted").Inc()
			case drain.Blocked:
				c.metrics.Evictions.WithLabelValues("blocked").Inc()
				c.recorder.Eventf(ref, v1.EventTypeWarning, EventEvictionBlocked,
					"Cannot evict pod %s/%s yet, retrying in %s: %s", r.Pod.Namespace, r.Pod.Name, retry, r.Reason)
			case drain.Failed:
				c.metrics.Evictions.WithLabelValues("error").Inc()
				c.recorder.Eventf(ref, v1.EventTypeWarning, EventEvictionFailed,
					"Evicting pod %s/%s failed, retrying in %s; the node's other pods are evicted meanwhile: %s", r.Pod.Namespace, r.Pod.Name, retry, r.Reason)
			}
		},
	})
}
