package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// Reasons of the drain's Events and of its failure.
const (
	// ReasonDrainBlocked names what holds a drain up (a PodDisruptionBudget,
	// a pod the overrides do not allow evicting) and, past the drain's
	// timeout, the failure that halts the node's policy.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonDrained: the operator drained the node; its agent may reboot.
	ReasonDrained = "Drained"
	// ReasonNotEvictedBeforeReboot: the last pass before the reboot could
	// not evict every pod; they stop with the reboot.
	ReasonNotEvictedBeforeReboot = "NotEvictedBeforeReboot"
)

// nodeDrain is one node's drain in this process. It lives in memory only:
// the drained annotation is the one record, and a new leader that finds a
// node in the drain step lists its pods and evicts again, which is
// idempotent (an eviction of a terminating pod changes nothing).
type nodeDrain struct {
	bootID  string
	drainer *drain.Drainer
	started time.Time
	// settings are those of the node's policy when the drain began.
	settings drainSettings
	// left holds the pods the last pass's filter left for the overrides,
	// named; they block the drain.
	left []string
	// told is the last DrainBlocked message sent, so each is sent once.
	told string
}

// drainStep reports whether the shadow is at the operator's drain: spec
// RebootedIntoUpdate, the agent still reporting StagedAndPerformedUpdate
// (it released its Lease and waits), and no reboot asked for yet.
func drainStep(s *updatesv1alpha1.BottlerocketShadow) bool {
	return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate &&
		s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate &&
		s.Status.RebootFromBootID == ""
}

// awaitingReboot reports whether the operator marked the node drained in
// the boot it still runs and its agent asked for the reboot: the host may
// refuse (a shutdown inhibitor) or lose the request, and the agent asks
// again later.
func awaitingReboot(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) bool {
	boot := node.Status.NodeInfo.BootID
	return s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate &&
		s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate &&
		boot != "" && s.Status.RebootFromBootID == boot && s.Annotations[updatesv1alpha1.DrainedAnnotation] == boot
}

// syncAwaitingReboot repeats the last pass every poll interval while the
// node waits for its reboot: a pod that tolerates the taint may land on it
// between a refused request and the agent's next, and nothing but the
// reboot would stop it otherwise.
func (c *Controller) syncAwaitingReboot(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) {
	if c.opts.DryRun {
		return
	}
	c.lastPodPass(ctx, s, node)
	poll := c.opts.Drain.Tuning.PollInterval
	if poll <= 0 {
		poll = drain.DefaultPollInterval
	}
	c.after(s.Name, poll)
}

// syncDrain drains a node whose agent waits for it, and says so with the
// drained annotation. Nothing is evicted before the node carries the
// readiness taint (the node-health controller's answer to the agent's
// Lease release): the taint, not a cordon, keeps new pods off the node.
func (c *Controller) syncDrain(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, now time.Time) error {
	logger := klog.FromContext(ctx).WithValues("node", s.Name)
	bootID := node.Status.NodeInfo.BootID
	if bootID == "" || s.Annotations[updatesv1alpha1.DrainedAnnotation] == bootID ||
		!nodeutil.HasTaint(node, c.opts.Drain.ReadinessTaintKey, "") {
		// No bootID: the agent fails the update (NoBootID). Drained: the
		// agent reboots. No taint yet: the node's informer brings it back.
		c.forgetDrain(s.Name)
		return nil
	}
	// The drain begins only once the beforeDrain hook succeeded.
	if done, err := c.runHook(ctx, s, node, c.policyOf(s, node), updatesv1alpha1.HookBeforeDrain); !done || err != nil {
		return err
	}
	if c.opts.DryRun {
		logger.Info("Dry run: would drain the node")
		return nil
	}
	d := c.drainOf(s, bootID, node, now)
	d.left = d.left[:0]
	st, err := d.drainer.Pass(ctx)
	if err != nil {
		return fmt.Errorf("draining node %s: %w", s.Name, err)
	}
	if st.Done() && len(d.left) == 0 {
		logger.Info("Node drained", "took", now.Sub(d.started))
		c.lastPodPass(ctx, s, node)
		if err := c.markDrained(ctx, s, bootID); err != nil {
			return err
		}
		c.forgetDrain(s.Name)
		c.event(s, v1.EventTypeNormal, ReasonDrained, "Node %s drained; its agent may reboot it into Bottlerocket %s", s.Name, s.Spec.Version)
		return nil
	}
	blocked := append([]string(nil), d.left...)
	for _, r := range st.Pending {
		blocked = append(blocked, r.String())
	}
	message := strings.Join(blocked, "; ")
	if message != "" && message != d.told {
		d.told = message
		c.event(s, v1.EventTypeWarning, ReasonDrainBlocked, "Drain of node %s blocked: %s", s.Name, message)
	}
	if now.Sub(d.started) >= d.settings.timeout {
		left := message
		if n := len(st.Terminating); n > 0 {
			left = strings.TrimPrefix(left+fmt.Sprintf("; %d pods still terminating", n), "; ")
		}
		c.forgetDrain(s.Name)
		// Serialized with the start pass, as every failure that halts.
		c.countMu.Lock()
		defer c.countMu.Unlock()
		return c.fail(ctx, s, ReasonDrainBlocked, fmt.Sprintf("%s: the drain of node %s did not finish within %s: %s",
			ReasonDrainBlocked, s.Name, d.settings.timeout, left))
	}
	c.after(s.Name, c.drainWait(d, st, now))
	return nil
}

// drainWait is when the drain looks again: at the poll interval while pods
// terminate, earlier when a refused pod's back-off ends, never past the
// timeout. A PodDisruptionBudget that lets go says nothing the informers
// see, so this re-check is what notices it; the drain's per-pod back-off
// rate-limits it.
func (c *Controller) drainWait(d *nodeDrain, st drain.Status, now time.Time) time.Duration {
	wait := c.opts.Drain.Tuning.PollInterval
	if wait <= 0 {
		wait = drain.DefaultPollInterval
	}
	if !st.NextAttempt.IsZero() {
		if until := st.NextAttempt.Sub(now); len(st.Terminating) == 0 || until < wait {
			wait = until
		}
	}
	return min(max(wait, time.Millisecond), d.started.Add(d.settings.timeout).Sub(now))
}

// drainOf is the node's drain, begun now unless this process is already
// draining it in this boot.
func (c *Controller) drainOf(s *updatesv1alpha1.BottlerocketShadow, bootID string, node *v1.Node, now time.Time) *nodeDrain {
	name := s.Name
	c.mu.Lock()
	d := c.drains[name]
	c.mu.Unlock()
	if d != nil && d.bootID == bootID {
		return d
	}
	// Read outside c.mu: the policy comes from the lister.
	d = &nodeDrain{bootID: bootID, started: now, settings: c.drainSettingsOf(s, node)}
	opts := c.opts.Drain.Tuning
	opts.Report = nil
	opts.Filter = c.drainFilter(node, d)
	opts.GracePeriodSeconds = d.settings.gracePeriodSeconds
	d.drainer = drain.New(c.opts.Drain.Client, name, c.drainClock, opts)
	c.mu.Lock()
	c.drains[name] = d
	c.mu.Unlock()
	klog.Background().Info("Draining the node", "node", name, "timeout", d.settings.timeout, "policy", d.settings.policy)
	return d
}

// drainSettings are a drain's options: the node's policy's spec.drain over
// the operator's configuration.
type drainSettings struct {
	policy             string
	timeout            time.Duration
	overrides          drain.Overrides
	gracePeriodSeconds *int64
	// skip selects the pods the drain leaves alone (nil: none).
	skip labels.Selector
}

// drainSettingsOf resolves the drain of the policy the node's update
// belongs to (policyOf); without one, the configuration's.
func (c *Controller) drainSettingsOf(s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) drainSettings {
	out := drainSettings{timeout: c.opts.Drain.Timeout, overrides: c.opts.Drain.Overrides}
	if out.timeout <= 0 {
		out.timeout = DefaultDrainTimeout
	}
	pol := c.policyOf(s, node)
	if pol == nil {
		return out
	}
	out.policy = pol.name
	pd := pol.drain
	if pd.timeout > 0 {
		out.timeout = pd.timeout
	}
	if pd.force != nil {
		out.overrides.Force = *pd.force
	}
	if pd.deleteEmptyDir != nil {
		out.overrides.DeleteEmptyDirData = *pd.deleteEmptyDir
	}
	out.gracePeriodSeconds, out.skip = pd.gracePeriodSeconds, pd.skip
	return out
}

// skipped reports whether the policy's skipPodSelector leaves the pod alone.
func (ds drainSettings) skipped(pod *v1.Pod) bool {
	return ds.skip != nil && ds.skip.Matches(labels.Set(pod.Labels))
}

func (c *Controller) forgetDrain(name string) {
	c.mu.Lock()
	delete(c.drains, name)
	c.mu.Unlock()
}

func (c *Controller) forgetLastPass(name string) {
	c.mu.Lock()
	delete(c.lastPassTold, name)
	c.mu.Unlock()
}

// drainFilter admits the pods the drain evicts: kubectl drain's (never
// DaemonSet or mirror pods; pods without a controller only with force,
// pods with emptyDir data only with deleteEmptyDirData), and not the pods
// that tolerate the readiness taint as the node carries it. Those chose to
// run on gated nodes — the controller's and the operator's own
// Deployments, anything with operator Exists — and nobody cordons, so an
// evicted one is scheduled straight back onto the node and its
// PodDisruptionBudget refuses the next eviction until the replacement is
// ready: the drain would never end. lastPodPass evicts them right before the
// reboot. A pod the overrides stop is recorded in d.left: it blocks the
// drain and is named, as kubectl drain refuses such a node.
func (c *Controller) drainFilter(node *v1.Node, d *nodeDrain) drain.Filter {
	var gate []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == c.opts.Drain.ReadinessTaintKey {
			gate = append(gate, t)
		}
	}
	skip := drain.All(drain.SkipDaemonSetAndMirrorPods, drain.SkipTolerating(gate...))
	return func(pod *v1.Pod) bool {
		// Neither evicted nor waited for, nor named: the policy chose to
		// let these stop with the reboot.
		if !skip(pod) || d.settings.skipped(pod) {
			return false
		}
		if why := d.settings.overrides.LeftBy(pod); why != "" {
			d.left = append(d.left, fmt.Sprintf("pod %s/%s: %s", pod.Namespace, pod.Name, why))
			return false
		}
		return true
	}
}

// lastPodPass lists the node's pods once more right before the agent may
// reboot it and evicts every one but DaemonSet and mirror pods (and those
// the overrides protect): the pods that tolerate the readiness taint, which
// the drain left, and any pod that arrived since. It does not wait for
// them: the evictions start their graceful termination and let their
// controllers replace them, elsewhere if the scheduler finds room.
//
// Best effort: one whose PodDisruptionBudget refuses the eviction stops with
// the reboot, like the DaemonSet pods; waiting for the budget would not
// help, as the replacement of an evicted pod that tolerates the taint may
// be scheduled back onto this node. The refusal is named in a Warning
// Event, so that the budget the reboot overrode is on record.
func (c *Controller) lastPodPass(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node) {
	logger := klog.FromContext(ctx).WithValues("node", s.Name)
	ds := c.drainSettingsOf(s, node)
	opts := c.opts.Drain.Tuning
	opts.GracePeriodSeconds = ds.gracePeriodSeconds
	opts.Filter = drain.All(drain.SkipDaemonSetAndMirrorPods, drain.SkipUnmanagedAndLocalData(ds.overrides),
		func(pod *v1.Pod) bool { return !ds.skipped(pod) })
	opts.Report = func(r drain.Result) {
		if r.Outcome == drain.Evicted {
			logger.Info("Evicted a pod before the reboot", "pod", klog.KObj(r.Pod))
		}
	}
	st, err := drain.New(c.opts.Drain.Client, s.Name, c.drainClock, opts).Pass(ctx)
	if err != nil {
		logger.Error(err, "Listing the node's pods before the reboot failed; the node is drained nonetheless")
		return
	}
	var left []string
	for _, r := range st.Pending {
		left = append(left, r.String())
	}
	message := strings.Join(left, "; ")
	c.mu.Lock()
	told := c.lastPassTold[s.Name]
	c.lastPassTold[s.Name] = message
	c.mu.Unlock()
	if message == "" || message == told {
		return
	}
	c.event(s, v1.EventTypeWarning, ReasonNotEvictedBeforeReboot,
		"Node %s reboots with pods the Eviction API refused to evict; they stop with the reboot: %s", s.Name, message)
}

// markDrained writes the drained annotation, guarded by the resourceVersion
// the drain was judged on: a shadow whose spec moved meanwhile is judged
// again.
func (c *Controller) markDrained(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, bootID string) error {
	n := s.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[updatesv1alpha1.DrainedAnnotation] = bootID
	if _, err := c.client.UpdatesV1alpha1().BottlerocketShadows().Update(ctx, n, metav1.UpdateOptions{FieldManager: "update-operator"}); err != nil {
		return fmt.Errorf("recording the drain of node %s: %w", s.Name, err)
	}
	return nil
}
