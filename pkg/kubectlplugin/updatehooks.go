package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// DefaultHooksNamespace is the namespace the operator runs the policies'
// hooks in as deploy/update-operator and the chart configure it (the
// operator configuration's hooks.namespace).
const DefaultHooksNamespace = "nodehealth-update-hooks"

// HookWait is the hook a node's update waits on: its Job has not finished.
type HookWait struct {
	// Hook is beforeDrain (the drain waits) or afterReboot (the health
	// gate waits).
	Hook string `json:"hook"`
	// Job is namespace/name.
	Job string `json:"job"`
	// Running is how long the Job has run.
	Running string `json:"running"`
}

// stepHook is the hook a node's update can wait on in the state its spec
// is in: the drain of RebootedIntoUpdate waits for beforeDrain, the health
// gate of MonitoringUpdate for afterReboot.
func stepHook(spec updatesv1alpha1.ShadowState) string {
	switch spec {
	case updatesv1alpha1.StateRebootedIntoUpdate:
		return updatesv1alpha1.HookBeforeDrain
	case updatesv1alpha1.StateMonitoringUpdate:
		return updatesv1alpha1.HookAfterReboot
	}
	return ""
}

// addHookWaits names, for each node in flight, the hook Job of its current
// step that has not finished. It lists the Jobs of the hooks' namespace only
// when some policy has hooks, so that reading the status of a rollout
// without hooks needs no permission on Jobs; a list refused (no permission
// there) is reported, not an error: the rest of the status stands.
func addHookWaits(ctx context.Context, r *UpdateReport, newClient func() (kubernetes.Interface, error), ns string, now time.Time) {
	hooks := false
	for _, p := range r.Policies {
		hooks = hooks || len(p.Hooks) > 0
	}
	if !hooks {
		return
	}
	var jobs []batchv1.Job
	client, err := newClient()
	if err == nil {
		var list *batchv1.JobList
		list, err = client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: updatesv1alpha1.HookLabel})
		if list != nil {
			jobs = list.Items
		}
	}
	if err != nil {
		r.HooksUnreadable = fmt.Sprintf("cannot list the hooks' Jobs in namespace %s: %v", ns, err)
		return
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		hook := stepHook(updatesv1alpha1.ShadowState(n.Desired))
		if !n.InFlight || hook == "" || n.stepSince.IsZero() {
			continue
		}
		var wait *batchv1.Job
		for j := range jobs {
			job := &jobs[j]
			// A Job created before the step began is an earlier attempt's.
			if job.Annotations[updatesv1alpha1.HookNodeAnnotation] != n.Name || job.Labels[updatesv1alpha1.HookLabel] != hook ||
				job.CreationTimestamp.Time.Before(n.stepSince.Truncate(time.Second)) || finished(job) {
				continue
			}
			if wait == nil || job.CreationTimestamp.After(wait.CreationTimestamp.Time) {
				wait = job
			}
		}
		if wait == nil {
			continue
		}
		started := wait.CreationTimestamp.Time
		if wait.Status.StartTime != nil {
			started = wait.Status.StartTime.Time
		}
		n.WaitingForHook = &HookWait{Hook: hook, Job: wait.Namespace + "/" + wait.Name, Running: now.Sub(started).Round(time.Second).String()}
	}
}

// finished reports whether the Job completed or failed.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Status == v1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}

// policyHooks names the hooks a policy sets.
func policyHooks(p *updatesv1alpha1.UpdatePolicy) []string {
	var out []string
	if h := p.Spec.Hooks; h != nil {
		if h.BeforeDrain != nil {
			out = append(out, updatesv1alpha1.HookBeforeDrain)
		}
		if h.AfterReboot != nil {
			out = append(out, updatesv1alpha1.HookAfterReboot)
		}
	}
	return out
}

// printHookWaits prints a line for each node that waits on a hook, and why
// none could be told.
func printHookWaits(out io.Writer, r UpdateReport) {
	for _, n := range r.Nodes {
		if w := n.WaitingForHook; w != nil {
			fmt.Fprintf(out, "%s  waiting for hook %s: Job %s running for %s\n", n.Name, w.Hook, w.Job, w.Running)
		}
	}
	if r.HooksUnreadable != "" {
		fmt.Fprintf(out, "Hooks: %s; the nodes waiting on a hook are not shown (--hooks-namespace names the operator's hooks.namespace; listing Jobs there needs get/list on jobs.batch)\n",
			r.HooksUnreadable)
	}
}
