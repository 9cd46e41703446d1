package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/queue"
)

// Reasons of the hooks' Events, of their failure and of the Blocked
// condition of a policy whose hooks cannot run.
const (
	ReasonHookStarted   = "HookStarted"
	ReasonHookSucceeded = "HookSucceeded"
	// ReasonHookFailed is the hook's Warning Event and the failure that
	// halts the node's policy: the Job failed or ran past its timeout.
	ReasonHookFailed = "HookFailed"
	// HooksNotConfigured: a policy sets spec.hooks, but the operator's
	// configuration names no namespace and service account to run them
	// with; the policy starts nothing.
	HooksNotConfigured = "HooksNotConfigured"
)

// Labels and annotations of the hooks' Jobs. HookLabel is what the
// operator's Job informer selects; label values are cut to what a label
// holds, the annotations keep the full names.
const (
	HookLabel              = updatesv1alpha1.HookLabel
	HookPolicyLabel        = "updates.nodehealth.io/policy"
	HookNodeLabel          = "updates.nodehealth.io/node"
	HookTargetVersionLabel = "updates.nodehealth.io/target-version"
	// HookNodeAnnotation names the node in full: the Job's events bring
	// that node's sync back (and kubectl nodehealth update status reads
	// it).
	HookNodeAnnotation   = updatesv1alpha1.HookNodeAnnotation
	HookPolicyAnnotation = "updates.nodehealth.io/policy"
)

// Results of update_operator_hooks_total.
const (
	HookResultSucceeded = "succeeded"
	HookResultFailed    = "failed"
	HookResultTimedOut  = "timedOut"
)

// DefaultHookTimeout is a hook's timeout when the policy sets none (the
// CRD defaults it too).
const DefaultHookTimeout = 10 * time.Minute

// Bounds of a hook's timeout, as the CRD's rules have them.
const (
	MinHookTimeout = time.Minute
	MaxHookTimeout = 2 * time.Hour
)

// HookOptions say where the policies' hooks run: the configuration's
// hooks.namespace and hooks.serviceAccountName, never a policy's choice,
// so that whoever may write a policy cannot run pods as the operator.
type HookOptions struct {
	Namespace          string
	ServiceAccountName string
	// Jobs creates the hooks' Jobs in Namespace.
	Jobs batchclient.JobsGetter
	// Informer watches the Jobs of Namespace that carry HookLabel; the
	// caller starts it with the other informers.
	Informer batchinformers.JobInformer
}

// configured reports whether hooks can run at all.
func (h *HookOptions) configured() bool {
	return h.Namespace != "" && h.ServiceAccountName != "" && h.Jobs != nil && h.Informer != nil
}

// policyHooks are a policy's spec.hooks (nil: unset).
type policyHooks struct {
	beforeDrain, afterReboot *updatesv1alpha1.Hook
}

func (h policyHooks) any() bool { return h.beforeDrain != nil || h.afterReboot != nil }

func (h policyHooks) of(name string) *updatesv1alpha1.Hook {
	switch name {
	case updatesv1alpha1.HookBeforeDrain:
		return h.beforeDrain
	case updatesv1alpha1.HookAfterReboot:
		return h.afterReboot
	}
	return nil
}

// parseHooks checks spec.hooks against what the operator relies on: an
// older CRD may let through a NODE_NAME of the user's or a timeout out of
// bounds, and no CRD knows the operator's deadlines. A hook runs inside
// its step's deadline (beforeDrain in RebootedIntoUpdate, before the drain
// and the reboot; afterReboot in MonitoringUpdate, beside the soak): one
// whose timeout the deadline cannot hold would be failed as
// DeadlineExceeded, never naming the hook.
func (out *policy) parseHooks(in *updatesv1alpha1.PolicyHooks, d Deadlines) error {
	if in == nil {
		return nil
	}
	// newPolicy took the hooks already, so that an invalid policy's nodes
	// in flight still run them; an invalid policy starts nothing new.
	for _, h := range []struct {
		name     string
		hook     *updatesv1alpha1.Hook
		deadline time.Duration
		state    string
	}{
		{updatesv1alpha1.HookBeforeDrain, in.BeforeDrain, d.RebootedIntoUpdate, "RebootedIntoUpdate"},
		{updatesv1alpha1.HookAfterReboot, in.AfterReboot, d.MonitoringUpdate, "MonitoringUpdate"},
	} {
		if h.hook == nil {
			continue
		}
		if h.hook.Image == "" {
			return fmt.Errorf("spec.hooks.%s.image is required", h.name)
		}
		for _, e := range h.hook.Env {
			if e.Name == hookNodeEnv {
				return fmt.Errorf("spec.hooks.%s.env: %s is set by the operator to the node's name", h.name, hookNodeEnv)
			}
		}
		t := hookTimeout(h.hook)
		if t < MinHookTimeout || t > MaxHookTimeout {
			return fmt.Errorf("spec.hooks.%s.timeout (%s) must be between %s and %s", h.name, t, MinHookTimeout, MaxHookTimeout)
		}
		if h.deadline > 0 && t >= h.deadline {
			return fmt.Errorf("spec.hooks.%s.timeout (%s) must be shorter than the operator's %s deadline (%s), which includes it",
				h.name, t, h.state, h.deadline)
		}
	}
	return nil
}

// hookNodeEnv is the variable that names the node to the hook.
const hookNodeEnv = "NODE_NAME"

func hookTimeout(h *updatesv1alpha1.Hook) time.Duration {
	if h.Timeout == nil || h.Timeout.Duration == 0 {
		return DefaultHookTimeout
	}
	return h.Timeout.Duration
}

// hooksHeld is why the policy starts nothing because its hooks cannot run
// (nil when they can, or it has none): an update started now would reach
// a hook it cannot run and fail.
func hooksHeld(snap *snapshot, pol *policy) *blocked {
	if !pol.hooks.any() || snap.hooksConfigured {
		return nil
	}
	return &blocked{reason: HooksNotConfigured, message: "No node starts: spec.hooks is set, but the operator's configuration names no namespace and service account " +
		"to run hooks with (hooks.namespace, hooks.serviceAccountName)"}
}

// addHookHandlers brings a node's sync back whenever one of its hooks'
// Jobs changes: its completion is what the drain or the health gate waits
// for.
func (c *Controller) addHookHandlers() error {
	inf := c.opts.Hooks.Informer
	if inf == nil {
		return nil
	}
	enqueue := func(obj interface{}) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if j, ok := obj.(*batchv1.Job); ok && j.Annotations[HookNodeAnnotation] != "" {
			c.queue.Add(j.Annotations[HookNodeAnnotation])
		}
	}
	reg, err := inf.Informer().AddEventHandler(queue.Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, newObj interface{}) { enqueue(newObj) },
		DeleteFunc: enqueue,
	}, &c.handled))
	if err != nil {
		return err
	}
	c.jobLister = inf.Lister()
	c.jobsSynced = reg.HasSynced
	return nil
}

// runHook runs the policy's hook of this name for the node's current
// step and reports whether the step may go on: true when the policy has
// no such hook or its Job succeeded. A Job that failed or timed out fails
// the update, which halts the policy. The Job's name is derived from the
// step (hookJobName), so an operator that restarts, or a new leader, finds
// the Job the last one created instead of running the hook twice, and
// reads a finished one rather than running it again.
func (c *Controller) runHook(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, pol *policy, hook string) (bool, error) {
	if pol == nil || pol.hooks.of(hook) == nil {
		return true, nil
	}
	spec := pol.hooks.of(hook)
	logger := klog.FromContext(ctx).WithValues("node", s.Name, "hook", hook, "policy", pol.name)
	if !c.opts.Hooks.configured() {
		// The policy gained hooks after this node started, or the
		// configuration lost them: the hook cannot run, and going on
		// without it is what the policy asked not to happen.
		return false, c.failHook(ctx, s, fmt.Sprintf("%s: hook %s of UpdatePolicy %s cannot run: the operator's configuration names no namespace and service account for hooks (hooks.namespace, hooks.serviceAccountName)",
			ReasonHookFailed, hook, pol.name))
	}
	ns := c.opts.Hooks.Namespace
	name := hookJobName(pol.name, s, node, hook)
	job, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return false, c.createHookJob(ctx, logger, s, pol, hook, spec, name)
	}
	if err != nil {
		return false, err
	}
	ok, failed, why := jobOutcome(job)
	logs := fmt.Sprintf("kubectl logs -n %s job/%s", ns, name)
	switch {
	case ok:
		if c.tellHook(s.Name, name) {
			c.metrics.Hooks.WithLabelValues(hook, HookResultSucceeded).Inc()
			c.event(s, v1.EventTypeNormal, ReasonHookSucceeded, "Hook %s of UpdatePolicy %s succeeded (Job %s/%s)", hook, pol.name, ns, name)
			logger.Info("Hook succeeded", "job", klog.KRef(ns, name))
		}
		return true, nil
	case failed != "":
		c.metrics.Hooks.WithLabelValues(hook, failed).Inc()
		c.event(s, v1.EventTypeWarning, ReasonHookFailed, "Hook %s of UpdatePolicy %s failed (Job %s/%s): %s; its logs: %s", hook, pol.name, ns, name, why, logs)
		return false, c.failHook(ctx, s, fmt.Sprintf("%s: hook %s of UpdatePolicy %s failed: Job %s/%s %s; its logs: %s",
			ReasonHookFailed, hook, pol.name, ns, name, why, logs))
	}
	return false, nil // running: the Job's informer brings the node back
}

// failHook records a hook's failure as every failure that halts: the
// policy halts until the node is resumed. Serialized with the start pass.
func (c *Controller) failHook(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow, msg string) error {
	c.countMu.Lock()
	defer c.countMu.Unlock()
	return c.fail(ctx, s, ReasonHookFailed, msg)
}

// tellHook reports whether the success of the Job name is news for the
// node (once per Job and process): the drain and the soak pass through
// the hook again on every sync.
func (c *Controller) tellHook(node, job string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hooksTold[node] == job {
		return false
	}
	c.hooksTold[node] = job
	return true
}

// createHookJob creates the hook's Job.
func (c *Controller) createHookJob(ctx context.Context, logger klog.Logger, s *updatesv1alpha1.BottlerocketShadow, pol *policy, hook string,
	spec *updatesv1alpha1.Hook, name string) error {
	job := c.hookJob(s, pol.name, hook, spec, name)
	if c.opts.DryRun {
		logger.Info("Dry run: would run the hook", "job", klog.KObj(job))
		return nil
	}
	_, err := c.opts.Hooks.Jobs.Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: "update-operator"})
	if apierrors.IsAlreadyExists(err) {
		// Created a moment ago, by this process or the last leader: the
		// informer has not shown it yet. It runs once.
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating Job %s/%s of hook %s for node %s: %w", job.Namespace, name, hook, s.Name, err)
	}
	logger.Info("Hook started", "job", klog.KObj(job))
	c.event(s, v1.EventTypeNormal, ReasonHookStarted, "Hook %s of UpdatePolicy %s started: Job %s/%s (timeout %s)", hook, pol.name, job.Namespace, name, hookTimeout(spec))
	return nil
}

// hookJob is the Job that runs the hook for the node: one pod, no retry,
// bounded by the hook's timeout, in the configuration's namespace under
// its service account. Owned by the node's shadow, so that the garbage
// collector deletes the Jobs of a node that leaves; TTLSecondsAfterFinished
// deletes the others once the step they belong to is surely over.
func (c *Controller) hookJob(s *updatesv1alpha1.BottlerocketShadow, policyName, hook string, spec *updatesv1alpha1.Hook, name string) *batchv1.Job {
	labels := map[string]string{
		HookLabel:              hook,
		HookPolicyLabel:        labelValue(policyName),
		HookNodeLabel:          labelValue(s.Name),
		HookTargetVersionLabel: labelValue(s.Spec.Version),
	}
	env := []v1.EnvVar{{Name: hookNodeEnv, Value: s.Name}}
	for _, e := range spec.Env {
		if e.Name != hookNodeEnv {
			env = append(env, v1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: c.opts.Hooks.Namespace, Labels: labels,
			Annotations: map[string]string{HookNodeAnnotation: s.Name, HookPolicyAnnotation: policyName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: updatesv1alpha1.SchemeGroupVersion.String(), Kind: "BottlerocketShadow",
				Name: s.Name, UID: s.UID}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(hookTimeout(spec) / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(c.hookJobTTL() / time.Second)),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					RestartPolicy:      v1.RestartPolicyNever,
					ServiceAccountName: c.opts.Hooks.ServiceAccountName,
					Containers: []v1.Container{{
						Name: "hook", Image: spec.Image, Command: spec.Command, Args: spec.Args, Env: env,
					}},
				},
			},
		},
	}
}

// hookJobTTL is how long a finished hook Job is kept: past the longest
// step a hook belongs to, with an hour to spare, so that a restarted
// operator still reads the outcome of every hook whose step is not over
// instead of running it again.
func (c *Controller) hookJobTTL() time.Duration {
	return max(c.opts.Deadlines.RebootedIntoUpdate, c.opts.Deadlines.MonitoringUpdate) + time.Hour
}

// hookJobName names the Job of one hook of one update step: the policy,
// the node, the hook, the version, the node's boot and the step's
// transition time (an attempt retried in the same boot is another step).
// The same step always gets the same name, which is what lets a restarted
// operator find its Job; the hash keeps it within the 63 characters a Job
// name may have.
func hookJobName(policyName string, s *updatesv1alpha1.BottlerocketShadow, node *v1.Node, hook string) string {
	step := ""
	if t := s.Spec.StateTransitionTimestamp; t != nil {
		step = t.UTC().Format(time.RFC3339)
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{policyName, s.Name, hook, s.Spec.Version, node.Status.NodeInfo.BootID, step}, "\x00")))
	prefix := "before-drain-"
	if hook == updatesv1alpha1.HookAfterReboot {
		prefix = "after-reboot-"
	}
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	nodePart := strings.ReplaceAll(s.Name, ".", "-")
	if room := 63 - len(prefix) - len(suffix); len(nodePart) > room {
		nodePart = nodePart[:room]
	}
	return prefix + strings.Trim(nodePart, "-") + suffix
}

// jobOutcome reads a Job's final condition: ok when it completed; failed
// is the metric's result (timedOut past activeDeadlineSeconds) and why
// says what happened; both empty while it runs.
func jobOutcome(j *batchv1.Job) (ok bool, failed, why string) {
	for _, cond := range j.Status.Conditions {
		if cond.Status != v1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return true, "", ""
		case batchv1.JobFailed:
			if cond.Reason == batchv1.JobReasonDeadlineExceeded {
				return false, HookResultTimedOut, fmt.Sprintf("did not finish within its timeout (activeDeadlineSeconds %d)", ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0))
			}
			return false, HookResultFailed, fmt.Sprintf("failed (%s: %s)", cond.Reason, cond.Message)
		}
	}
	return false, "", ""
}

// labelValue is s as a label value holds it: at most 63 characters of
// [A-Za-z0-9._-], beginning and ending with a letter or digit.
func labelValue(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "._-")
}
