package operator

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

const (
	hookNS = "storage-hooks"
	hookSA = "ceph-hooks"
)

// hookEnv is the hooks' side of the API server: the Jobs the operator
// creates (kube) and its Job informer's cache (jobs).
type hookEnv struct {
	kube *kubefake.Clientset
	jobs cache.Indexer
}

// withHooks configures hooks the way the operator's configuration does:
// a namespace and a service account, a Job client and an informer of that
// namespace.
func withHooks(opts Options) (Options, *hookEnv) {
	kube := kubefake.NewClientset()
	inf := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(hookNS)).Batch().V1().Jobs()
	opts.Hooks = HookOptions{Namespace: hookNS, ServiceAccountName: hookSA, Jobs: kube.BatchV1(), Informer: inf}
	return opts, &hookEnv{kube: kube, jobs: inf.Informer().GetIndexer()}
}

// actions renders the Job client's calls as "create jobs NAMESPACE/NAME".
func (h *hookEnv) actions() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok {
			j := c.GetObject().(*batchv1.Job)
			out = append(out, "create jobs "+j.Namespace+"/"+j.Name)
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	h.kube.ClearActions()
	return out
}

// created is the one Job the operator created.
func (h *hookEnv) created(t *testing.T) *batchv1.Job {
	t.Helper()
	list, err := h.kube.BatchV1().Jobs(hookNS).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("Jobs in %s: %v (%v), want exactly one", hookNS, list, err)
	}
	return &list.Items[0]
}

// finished is the Job with its final condition as the Job controller
// writes it: "" while it runs, Complete, BackoffLimitExceeded or
// DeadlineExceeded.
func finished(j *batchv1.Job, how string) *batchv1.Job {
	j = j.DeepCopy()
	switch how {
	case batchv1.JobReasonBackoffLimitExceeded, batchv1.JobReasonDeadlineExceeded:
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: v1.ConditionTrue, Reason: how, Message: "Job has reached the specified backoff limit"}}
	case string(batchv1.JobComplete):
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	}
	return j
}

// hooked gives the policy both hooks.
func hooked(p *updatesv1alpha1.UpdatePolicy) {
	p.Spec.Hooks = &updatesv1alpha1.PolicyHooks{
		BeforeDrain: &updatesv1alpha1.Hook{Image: "quay.io/ceph/ceph:v19", Command: []string{"ceph"}, Args: []string{"osd", "set", "noout"},
			Env: []updatesv1alpha1.HookEnvVar{{Name: "CEPH_ARGS", Value: "--id update-hooks"}}},
		AfterReboot: &updatesv1alpha1.Hook{Image: "quay.io/ceph/ceph:v19", Command: []string{"ceph"}, Args: []string{"osd", "unset", "noout"},
			Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
	}
}

// hookDrainFixture is n1 waiting for its drain (tainted, boot-0) under a
// policy with hooks, one pod to evict; configured: the configuration
// names where hooks run.
func hookDrainFixture(t *testing.T, configured bool) (*fixture, *hookEnv, *fakePods) {
	t.Helper()
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1")}}
	opts := defaultOptions()
	h := &hookEnv{kube: kubefake.NewClientset()}
	if configured {
		opts, h = withHooks(opts)
	}
	opts.Drain.Client = pods
	f := newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{fleet(hooked)}, []*v1.Node{mkNode("n1", tainted)},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", rebooted, staged, since(time.Minute), startedBy("fleet"))})
	return f, h, pods
}

// TestTheDrainWaitsForTheBeforeDrainHookWhoseFailureHaltsTheUpdate: the
// hook's Job is created once; the drain begins only after it succeeded; a
// Job that failed or timed out fails the update, naming the Job and how
// to read its logs; without the configuration's namespace and service
// account the hook cannot run and the update fails too.
func TestTheDrainWaitsForTheBeforeDrainHookWhoseFailureHaltsTheUpdate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured bool
		// job is the Job as the operator finds it: "none", "running", or
		// finished() with the condition.
		job         string
		wantJobs    []string
		wantShadow  []string
		wantEvicted []string
		wantFailure []string
		wantEvent   string
		wantMetric  string
	}{
		{name: "no Job yet: it is created and nothing is evicted", configured: true, job: "none",
			wantJobs: []string{"create jobs storage-hooks/JOB"}, wantEvent: ReasonHookStarted},
		{name: "the Job runs: nothing created, nothing evicted", configured: true, job: "running"},
		{name: "the Job succeeded: the drain begins", configured: true, job: string(batchv1.JobComplete),
			wantEvicted: []string{"web-1"}, wantEvent: ReasonHookSucceeded, wantMetric: HookResultSucceeded},
		{name: "the Job failed: the update fails naming it", configured: true, job: batchv1.JobReasonBackoffLimitExceeded,
			wantShadow:  []string{"update n1 Idle 1.20.0 failed=HookFailed:"},
			wantFailure: []string{"hook beforeDrain of UpdatePolicy fleet failed: Job storage-hooks/JOB failed (BackoffLimitExceeded", "kubectl logs -n storage-hooks job/JOB"},
			wantEvent:   ReasonHookFailed, wantMetric: HookResultFailed},
		{name: "the Job timed out: the update fails naming it", configured: true, job: batchv1.JobReasonDeadlineExceeded,
			wantShadow:  []string{"update n1 Idle 1.20.0 failed=HookFailed:"},
			wantFailure: []string{"Job storage-hooks/JOB did not finish within its timeout (activeDeadlineSeconds 600)", "kubectl logs -n storage-hooks job/JOB"},
			wantEvent:   ReasonHookFailed, wantMetric: HookResultTimedOut},
		{name: "no hook configuration: the update fails", configured: false, job: "none",
			wantShadow:  []string{"update n1 Idle 1.20.0 failed=HookFailed:"},
			wantFailure: []string{"hook beforeDrain of UpdatePolicy fleet cannot run", "hooks.namespace, hooks.serviceAccountName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, h, pods := hookDrainFixture(t, tc.configured)
			name := hookJobName("fleet", f.shadowOf(t, "n1"), mkNode("n1", tainted), updatesv1alpha1.HookBeforeDrain)
			if tc.job != "none" {
				// As the last leader created it.
				j := f.c.hookJob(mkShadow("n1", rebooted, staged), "fleet", updatesv1alpha1.HookBeforeDrain, &updatesv1alpha1.Hook{Image: "x"}, name)
				_ = h.jobs.Add(finished(j, tc.job))
			}
			f.sync("n1")
			sub := func(list []string) []string {
				var out []string
				for _, s := range list {
					out = append(out, strings.ReplaceAll(s, "JOB", name))
				}
				return out
			}
			if got := h.actions(); !slices.Equal(got, sub(tc.wantJobs)) {
				t.Errorf("Job actions %q, want %q", got, sub(tc.wantJobs))
			}
			var shadowWrites []string
			for _, a := range f.actions() {
				if strings.HasPrefix(a, "update ") {
					shadowWrites = append(shadowWrites, a)
				}
			}
			if !slices.Equal(shadowWrites, tc.wantShadow) {
				t.Errorf("shadow writes %q, want %q", shadowWrites, tc.wantShadow)
			}
			if got := pods.evictions(); !slices.Equal(got, tc.wantEvicted) {
				t.Errorf("evicted %v, want %v", got, tc.wantEvicted)
			}
			if len(tc.wantFailure) > 0 {
				msg := f.stored("n1").Annotations[updatesv1alpha1.FailureReasonAnnotation]
				for _, want := range sub(tc.wantFailure) {
					if !strings.Contains(msg, want) {
						t.Errorf("failure reason %q does not say %q", msg, want)
					}
				}
			}
			events := f.events()
			if tc.wantEvent != "" && len(eventsWith(events, tc.wantEvent)) == 0 {
				t.Errorf("events %q, want %s", events, tc.wantEvent)
			}
			if tc.wantMetric != "" {
				if got := testutilCounter(f.c.metrics.Hooks.WithLabelValues(updatesv1alpha1.HookBeforeDrain, tc.wantMetric)); got != 1 {
					t.Errorf("update_operator_hooks_total{hook=beforeDrain,result=%s} = %v, want 1", tc.wantMetric, got)
				}
			}
		})
	}
}

func (f *fixture) shadowOf(t *testing.T, name string) *updatesv1alpha1.BottlerocketShadow {
	t.Helper()
	s, err := f.c.shadowLister.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestARestartedOperatorFindsTheHookJobTheLastOneCreatedAndDoesNotRunItAgain:
// the Job's name comes from the update step, so a new leader (a fresh
// controller, its cache showing what the API server holds) finds the Job
// and creates none; once it completed, the drain begins.
func TestARestartedOperatorFindsTheHookJobTheLastOneCreatedAndDoesNotRunItAgain(t *testing.T) {
	old, oldHooks, _ := hookDrainFixture(t, true)
	old.sync("n1")
	if got := oldHooks.actions(); len(got) != 1 || !strings.HasPrefix(got[0], "create jobs ") {
		t.Fatalf("the first operator's Job actions %q, want one create", got)
	}
	job := oldHooks.created(t)

	// The next leader, ten minutes of the operator's clock later: the
	// name does not depend on when it is computed.
	leader, hooks, pods := hookDrainFixture(t, true)
	leader.clock.Step(10 * time.Minute)
	_ = hooks.jobs.Add(job)
	leader.sync("n1")
	if got := hooks.actions(); len(got) != 0 {
		t.Fatalf("the new leader's Job actions %q, want none: it must find the running Job", got)
	}
	if got := pods.evictions(); len(got) != 0 {
		t.Fatalf("evicted %v while the hook ran", got)
	}
	_ = hooks.jobs.Update(finished(job, string(batchv1.JobComplete)))
	leader.sync("n1")
	if got := hooks.actions(); len(got) != 0 {
		t.Errorf("Job actions %q after the Job completed, want none", got)
	}
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1"}) {
		t.Errorf("evicted %v, want web-1: the drain begins once the hook succeeded", got)
	}
}

// TestAHookJobRunsInTheConfiguredNamespaceUnderTheConfiguredServiceAccountWithNodeName:
// where and as whom the hook runs is the configuration's, never the
// policy's; the container gets NODE_NAME; one pod, no retry, bounded by
// the timeout, deleted after the steps it belongs to, owned by the shadow.
func TestAHookJobRunsInTheConfiguredNamespaceUnderTheConfiguredServiceAccountWithNodeName(t *testing.T) {
	f, h, _ := hookDrainFixture(t, true)
	f.sync("n1")
	j := h.created(t)
	pod := j.Spec.Template.Spec
	if j.Namespace != hookNS || pod.ServiceAccountName != hookSA {
		t.Errorf("Job in %q as %q, want %q as %q", j.Namespace, pod.ServiceAccountName, hookNS, hookSA)
	}
	if len(j.Name) > 63 || !strings.HasPrefix(j.Name, "before-drain-n1-") {
		t.Errorf("Job name %q: want before-drain-n1-<hash>, at most 63 characters", j.Name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %v", pod.Containers)
	}
	c := pod.Containers[0]
	wantEnv := []v1.EnvVar{{Name: "NODE_NAME", Value: "n1"}, {Name: "CEPH_ARGS", Value: "--id update-hooks"}}
	if c.Image != "quay.io/ceph/ceph:v19" || !slices.Equal(c.Command, []string{"ceph"}) || !slices.Equal(c.Args, []string{"osd", "set", "noout"}) ||
		!slices.Equal(c.Env, wantEnv) {
		t.Errorf("container %+v, want the policy's image, command and args with env %v", c, wantEnv)
	}
	if pod.RestartPolicy != v1.RestartPolicyNever || ptr.Deref(j.Spec.BackoffLimit, -1) != 0 ||
		ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) != 600 {
		t.Errorf("restartPolicy %s, backoffLimit %v, activeDeadlineSeconds %v; want Never, 0 and the default timeout's 600",
			pod.RestartPolicy, ptr.Deref(j.Spec.BackoffLimit, -1), ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0))
	}
	if ttl := time.Duration(ptr.Deref(j.Spec.TTLSecondsAfterFinished, 0)) * time.Second; ttl <= rebootDL || ttl <= monitorDL {
		t.Errorf("ttlSecondsAfterFinished %s: a finished Job must outlive the steps it belongs to", ttl)
	}
	want := map[string]string{HookLabel: updatesv1alpha1.HookBeforeDrain, HookPolicyLabel: "fleet", HookNodeLabel: "n1", HookTargetVersionLabel: newV}
	for k, v := range want {
		if j.Labels[k] != v || j.Spec.Template.Labels[k] != v {
			t.Errorf("label %s = %q (pod %q), want %q", k, j.Labels[k], j.Spec.Template.Labels[k], v)
		}
	}
	if refs := j.OwnerReferences; len(refs) != 1 || refs[0].Kind != "BottlerocketShadow" || refs[0].Name != "n1" {
		t.Errorf("ownerReferences %+v, want the shadow n1", refs)
	}
}

// TestTheUpdatePassesItsHealthGateOnlyOnceTheAfterRebootHookSucceeded: the
// soak has passed; the hook's Job is created, the update waits for it, and
// passes once it completed; a failed Job fails the update instead.
func TestTheUpdatePassesItsHealthGateOnlyOnceTheAfterRebootHookSucceeded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		job        string
		wantJobs   []string
		wantShadow []string
	}{
		{name: "no Job yet", job: "none", wantJobs: []string{"create jobs"}},
		{name: "the Job runs", job: "running"},
		{name: "the Job succeeded", job: string(batchv1.JobComplete), wantShadow: []string{"record-success fleet " + t0.Format(time.RFC3339), "update n1 Idle"}},
		{name: "the Job failed", job: batchv1.JobReasonBackoffLimitExceeded, wantShadow: []string{"update n1 Idle 1.20.0 failed=HookFailed:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, h := withHooks(defaultOptions())
			s := mkShadow("n1", monitor, monitor, running(newV), since(soak+time.Minute), startedBy("fleet"),
				annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-soak).Format(time.RFC3339)))
			node := mkNode("n1", booted("boot-1"))
			f := newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{fleet(hooked)}, []*v1.Node{node}, []*updatesv1alpha1.BottlerocketShadow{s})
			name := hookJobName("fleet", s, node, updatesv1alpha1.HookAfterReboot)
			if tc.job != "none" {
				j := f.c.hookJob(s, "fleet", updatesv1alpha1.HookAfterReboot, &updatesv1alpha1.Hook{Image: "x"}, name)
				_ = h.jobs.Add(finished(j, tc.job))
			}
			f.sync("n1")
			var jobs []string
			for _, a := range h.actions() {
				jobs = append(jobs, strings.TrimSuffix(a, " "+hookNS+"/"+name))
			}
			if !slices.Equal(jobs, tc.wantJobs) {
				t.Errorf("Job actions %q, want %q (named %s)", jobs, tc.wantJobs, name)
			}
			if got := f.actions(); !slices.Equal(got, tc.wantShadow) {
				t.Errorf("actions %q, want %q", got, tc.wantShadow)
			}
		})
	}
}

// TestAPolicyWithHooksStartsNothingWhileTheConfigurationNamesNoHookNamespace:
// the update could not run its hooks, so it does not start; the policy
// says why, and a policy without hooks goes on.
func TestAPolicyWithHooksStartsNothingWhileTheConfigurationNamesNoHookNamespace(t *testing.T) {
	pools := func(p string) map[string]string { return map[string]string{"pool": p} }
	f := newPolicyFixture(t, defaultOptions(),
		[]*updatesv1alpha1.UpdatePolicy{mkPolicy("fleet", pools("a"), hooked), mkPolicy("other", pools("b"))},
		[]*v1.Node{mkNode("a", label("pool", "a")), mkNode("b", label("pool", "b"))},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"status fleet", "status other", "list", "list policies", "update b StagedAndPerformedUpdate 1.20.0"})
	want := "True/HooksNotConfigured: No node starts: spec.hooks is set, but the operator's configuration names no namespace and service account to run hooks with (hooks.namespace, hooks.serviceAccountName)"
	if got := f.blockedOf("fleet"); got != want {
		t.Errorf("Blocked:\n  got  %s\n  want %s", got, want)
	}
}

// TestAHookTheOperatorsDeadlineCannotHoldMakesThePolicyInvalid: a timeout
// at least the step's deadline, or a NODE_NAME of the user's (an older CRD
// lets it through), is refused.
func TestAHookTheOperatorsDeadlineCannotHoldMakesThePolicyInvalid(t *testing.T) {
	d := Deadlines{StagedAndPerformedUpdate: stagedDL, RebootedIntoUpdate: rebootDL, MonitoringUpdate: monitorDL, ReturnToIdle: returnDL}
	for _, tc := range []struct {
		name  string
		hooks updatesv1alpha1.PolicyHooks
		want  string
	}{
		{"valid", updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "x"}}, ""},
		{"afterReboot past MonitoringUpdate", updatesv1alpha1.PolicyHooks{AfterReboot: &updatesv1alpha1.Hook{Image: "x", Timeout: &metav1.Duration{Duration: monitorDL}}},
			"spec.hooks.afterReboot.timeout (20m0s) must be shorter than the operator's MonitoringUpdate deadline (20m0s), which includes it"},
		{"beforeDrain past RebootedIntoUpdate", updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "x", Timeout: &metav1.Duration{Duration: time.Hour}}},
			"spec.hooks.beforeDrain.timeout (1h0m0s) must be shorter than the operator's RebootedIntoUpdate deadline (30m0s), which includes it"},
		{"NODE_NAME of the user's", updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "x", Env: []updatesv1alpha1.HookEnvVar{{Name: "NODE_NAME", Value: "other"}}}},
			"spec.hooks.beforeDrain.env: NODE_NAME is set by the operator to the node's name"},
		{"timeout below a minute", updatesv1alpha1.PolicyHooks{BeforeDrain: &updatesv1alpha1.Hook{Image: "x", Timeout: &metav1.Duration{Duration: time.Second}}},
			"spec.hooks.beforeDrain.timeout (1s) must be between 1m0s and 2h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooks := tc.hooks
			p := parsePolicy(fleet(func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.Hooks = &hooks }), d)
			if p.invalid != tc.want {
				t.Errorf("invalid = %q, want %q", p.invalid, tc.want)
			}
		})
	}
}

// TestThePolicyOfANodeInFlightKeepsItsHooksWhenAnotherFieldMakesItInvalid:
// an edit that makes the policy invalid stops its starts, never the hooks
// of the updates it already started.
func TestThePolicyOfANodeInFlightKeepsItsHooksWhenAnotherFieldMakesItInvalid(t *testing.T) {
	d := Deadlines{StagedAndPerformedUpdate: stagedDL, RebootedIntoUpdate: rebootDL, MonitoringUpdate: monitorDL, ReturnToIdle: returnDL}
	p := parsePolicy(fleet(hooked, func(p *updatesv1alpha1.UpdatePolicy) {
		p.Spec.Windows = []updatesv1alpha1.UpdateWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus_Mons"}}
	}), d)
	if p.invalid == "" {
		t.Fatal("a window in an unknown time zone was accepted")
	}
	if p.hooks.beforeDrain == nil || p.hooks.afterReboot == nil {
		t.Errorf("the invalid policy lost its hooks: %+v", p.hooks)
	}
}
