package operator_test

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/updater/model"
	"nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/test/sim"
)

// The hooks in the update simulation: on the seeds that draw them the
// policy has a beforeDrain hook, an afterReboot hook or both, and the
// driver plays the Job controller: each Job the operator creates succeeds,
// fails (its pod exits non-zero) or runs past its activeDeadlineSeconds,
// at an instant drawn when it is created, in simulated time. The model
// judges the drain and the health gate against the runs (model.HookRun),
// and the driver requires that no step runs a hook twice (hook-once).

// simHookNamespace is the configuration's hooks.namespace.
const simHookNamespace = "nodehealth-update-hooks"

// simHookRun is one Job the operator created, as the driver's Job
// controller runs it.
type simHookRun struct {
	name string
	run  model.HookRun
	// endAt is when the Job ends; fails: it ends failed, by timeout when
	// endAt is its activeDeadlineSeconds.
	endAt    time.Time
	fails    bool
	timedOut bool
}

// simHooks draws the policy's hooks: either or both, each with a timeout
// its step's deadline holds (the operator refuses one that it does not).
func simHooks(r *sim.Rand) *updatesv1alpha1.PolicyHooks {
	hook := func() *updatesv1alpha1.Hook {
		return &updatesv1alpha1.Hook{Image: "registry.example/hook:1", Command: []string{"hook"},
			Timeout: &metav1.Duration{Duration: sim.Pick(r, []time.Duration{time.Minute, 2 * time.Minute})}}
	}
	h := &updatesv1alpha1.PolicyHooks{}
	switch r.Intn(3) {
	case 0:
		h.BeforeDrain = hook()
	case 1:
		h.AfterReboot = hook()
	default:
		h.BeforeDrain, h.AfterReboot = hook(), hook()
	}
	return h
}

// createJob is the operator's Job creation: recorded with the step and
// boot the operator decided on (its informers' shadow and Node), refused
// as the API refuses a name that exists, and judged: a second Job for a
// step and boot that has one runs the hook twice. Its end is drawn now.
func (s *updaterSimulation) createJob(action clienttesting.Action) (bool, runtime.Object, error) {
	job := action.(clienttesting.CreateActionImpl).Object.(*batchv1.Job)
	node, hook := job.Annotations[operator.HookNodeAnnotation], job.Labels[operator.HookLabel]
	w := s.operatorView()
	sh := w.Shadows[node]
	run := model.HookRun{Node: node, Hook: hook, Since: sh.SpecSince, Boot: w.Nodes[node].BootID}
	obj, err := s.obsKube.Invokes(action, nil)
	if err != nil {
		return true, obj, err
	}
	for _, r := range s.hookRuns {
		if r.run.Node == run.Node && r.run.Hook == run.Hook && r.run.Since.Equal(run.Since) && r.run.Boot == run.Boot {
			s.fail("hook-once", "t=%s %s: the operator created Job %s for hook %s of the step since %s in boot %s, which Job %s runs already",
				s.at(), node, job.Name, hook, run.Since.Sub(sim.Epoch), run.Boot, r.name)
		}
	}
	r := &simHookRun{name: job.Name, run: run}
	now := s.clk.Now()
	timeout := time.Duration(ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0)) * time.Second
	u := s.hookRng.Intn(20)
	if u < 5 && !s.on("hook-fails") {
		u = 5 // -sim.off: the Job succeeds, drawn as a success is
	}
	switch {
	case u < 3:
		r.fails, r.endAt = true, now.Add(time.Duration(1+s.hookRng.Intn(30))*time.Second)
	case u < 5:
		r.fails, r.timedOut, r.endAt = true, true, now.Add(timeout)
	default:
		r.endAt = now.Add(time.Duration(1+s.hookRng.Intn(40)) * time.Second)
	}
	s.hookRuns = append(s.hookRuns, r)
	s.trace.Add("t=%s %s: hook %s starts (Job %s, step since %s, boot %s), ends at %s failed %v", s.at(), node, hook, job.Name,
		run.Since.Sub(sim.Epoch), run.Boot, r.endAt.Sub(sim.Epoch), r.fails)
	return true, obj, nil
}

// finishHooks ends the Jobs whose end came, as the Job controller does:
// Complete, or Failed (BackoffLimitExceeded, or DeadlineExceeded past
// activeDeadlineSeconds).
func (s *updaterSimulation) finishHooks(now time.Time) {
	for _, r := range s.hookRuns {
		if r.run.Succeeded || r.run.Failed || now.Before(r.endAt) {
			continue
		}
		jobs := s.kube.BatchV1().Jobs(simHookNamespace)
		job, err := jobs.Get(s.ctx, r.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatalf("the hook's Job %s: %v", r.name, err)
		}
		cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
		switch {
		case r.timedOut:
			cond.Type, cond.Reason, cond.Message = batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"
		case r.fails:
			cond.Type, cond.Reason, cond.Message = batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"
		}
		job.Status.Conditions = append(job.Status.Conditions, cond)
		if _, err := jobs.UpdateStatus(s.ctx, job, metav1.UpdateOptions{}); err != nil {
			s.t.Fatalf("ending the hook's Job %s: %v", r.name, err)
		}
		r.run.Succeeded, r.run.Failed = !r.fails, r.fails
		s.trace.Add("t=%s %s: hook %s Job %s %s", s.at(), r.run.Node, r.run.Hook, r.name, cond.Type)
	}
}

// hookRunning: some hook's Job has not ended yet.
func (s *updaterSimulation) hookRunning() bool {
	for _, r := range s.hookRuns {
		if !r.run.Succeeded && !r.run.Failed {
			return true
		}
	}
	return false
}

// The policy's drain options in the update simulation: on the seeds that
// draw them the policy sets some of skipPodSelector, gracePeriodSeconds,
// force and deleteEmptyDirData (the configuration's deleteEmptyDirData is
// off there, so that the policy's is the one that counts), and each node
// gets the pods they are about: one the selector skips, one without a
// controller, one with emptyDir data. The model judges every eviction
// (drain-options) and lets a skipped pod stay for the reboot.

// simSkipLabel is the label of the pods the policy's skipPodSelector
// selects.
const simSkipLabel = "sim/skip"

// simDrain draws the policy's spec.drain. Force and deleteEmptyDirData are
// drawn only true: without them the pods they are about would block the
// drain until its timeout, a failure the model does not judge.
func (s *updaterSimulation) simDrain() *updatesv1alpha1.PolicyDrain {
	r := s.drainRng
	d := &updatesv1alpha1.PolicyDrain{GracePeriodSeconds: sim.Pick(r, []*int64{nil, ptr.To[int64](0), ptr.To[int64](5), ptr.To[int64](30)})}
	if r.Chance(0.7) {
		d.SkipPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{simSkipLabel: "true"}}
		s.skip = labels.SelectorFromSet(labels.Set{simSkipLabel: "true"})
	}
	if r.Chance(0.5) {
		d.Force = ptr.To(true)
	}
	if r.Chance(0.5) {
		d.DeleteEmptyDirData = ptr.To(true)
	}
	s.opts.Drain.Overrides.DeleteEmptyDirData = false
	s.drawnDrain = d
	s.trace.Add("drain skip %v grace %v force %v deleteEmptyDirData %v", d.SkipPodSelector != nil, ptr.Deref(d.GracePeriodSeconds, -1),
		d.Force != nil, d.DeleteEmptyDirData != nil)
	return d
}

// addDrainPods puts on the node, each on some of the nodes, the pods the
// policy's drain options are about.
func (s *updaterSimulation) addDrainPods(n *simNode) {
	r, d := s.drainRng, s.drawnDrain
	if d.SkipPodSelector != nil && r.Chance(0.7) {
		s.addPodWith(n, func(p *v1.Pod) { p.Labels = map[string]string{simSkipLabel: "true"} })
	}
	if ptr.Deref(d.Force, false) && r.Chance(0.7) {
		s.addPodWith(n, func(p *v1.Pod) { p.OwnerReferences = nil })
	}
	if ptr.Deref(d.DeleteEmptyDirData, false) && r.Chance(0.7) {
		s.addPodWith(n, func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		})
	}
}

// modelPod is what the model's drain rules read of a pod.
func (s *updaterSimulation) modelPod(p *v1.Pod) model.Pod {
	local := false
	for _, v := range p.Spec.Volumes {
		local = local || v.EmptyDir != nil
	}
	return model.Pod{Name: p.Name, Skip: s.skip != nil && s.skip.Matches(labels.Set(p.Labels)),
		Unmanaged: metav1.GetControllerOf(p) == nil, LocalData: local}
}
