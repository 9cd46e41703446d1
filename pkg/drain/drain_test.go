package drain

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/pkg/drain/clientset"
)

const (
	node = "n1"
	ns   = "apps"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

var readinessTaint = v1.Taint{Key: "nodehealth.io/not-ready", Effect: v1.TaintEffectNoSchedule}

func newPod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func daemonSetPod(p *v1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
}
func mirrorPod(p *v1.Pod) { p.Annotations = map[string]string{MirrorPodAnnotation: "x"} }
func tolerating(p *v1.Pod) {
	p.Spec.Tolerations = []v1.Toleration{{Key: readinessTaint.Key, Operator: v1.TolerationOpExists}}
}
func finished(p *v1.Pod)    { p.Status.Phase = v1.PodSucceeded }
func onOtherNode(p *v1.Pod) { p.Spec.NodeName = "n2" }
func terminating(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }

func budgetError(budget string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s needs 2 healthy pods and has 2 currently", budget)}}
	return err
}

// fakeAPI plays the Eviction API on a fake clientset: evictions listed in
// refuse fail with their errors in turn, the others mark the pod terminating
// (as the API server does); kubelet removes terminating pods.
type fakeAPI struct {
	t      *testing.T
	client *fake.Clientset
	refuse map[string][]error
}

func newFakeAPI(t *testing.T, pods ...*v1.Pod) *fakeAPI {
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	api := &fakeAPI{t: t, client: fake.NewClientset(objs...), refuse: map[string][]error{}}
	api.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		eviction := action.(core.CreateAction).GetObject().(*policyv1.Eviction)
		if errs := api.refuse[eviction.Name]; len(errs) > 0 {
			api.refuse[eviction.Name] = errs[1:]
			return true, nil, errs[0]
		}
		obj, err := api.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), eviction.Namespace, eviction.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod)
		if pre := eviction.DeleteOptions; pre == nil || pre.Preconditions == nil || pre.Preconditions.UID == nil || *pre.Preconditions.UID != pod.UID {
			t.Errorf("eviction of %s without the pod's UID as precondition: %+v", pod.Name, eviction.DeleteOptions)
		}
		pod.DeletionTimestamp = &metav1.Time{Time: t0}
		return true, nil, api.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace)
	})
	return api
}

// kubelet removes every terminating pod.
func (api *fakeAPI) kubelet() {
	list, err := api.client.Tracker().List(v1.SchemeGroupVersion.WithResource("pods"), v1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		api.t.Fatal(err)
	}
	for _, p := range list.(*v1.PodList).Items {
		if p.DeletionTimestamp != nil {
			if err := api.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name); err != nil {
				api.t.Fatal(err)
			}
		}
	}
}

// actions returns the API calls made since the last call, as "verb
// resource[/subresource] [name]".
func (api *fakeAPI) actions() []string {
	var out []string
	for _, a := range api.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		if c, ok := a.(core.CreateAction); ok {
			s += " " + c.GetObject().(metav1.Object).GetName()
		}
		if l, ok := a.(core.ListAction); ok {
			s += " " + l.GetListRestrictions().Fields.String()
		}
		out = append(out, s)
	}
	api.client.ClearActions()
	return out
}

func outcomes(results []Result) []string {
	var out []string
	for _, r := range results {
		s := r.Pod.Name + ":" + string(r.Outcome)
		if r.Budget != "" {
			s += ":" + r.Budget
		}
		out = append(out, s)
	}
	return out
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

const listNode = "list pods spec.nodeName=" + node

func TestAPassEvictsWhatItsFilterAdmitsAndNamesWhatBlocksOrFails(t *testing.T) {
	updateFilter := Filter(SkipDaemonSetAndMirrorPods)
	escalationFilter := All(SkipDaemonSetAndMirrorPods, SkipTolerating(readinessTaint))
	tests := []struct {
		name   string
		pods   []*v1.Pod
		filter Filter
		refuse map[string][]error

		wantActions     []string
		wantReports     []string
		wantPending     []string
		wantTerminating []string
		wantEvicted     int
		wantDone        bool
	}{
		{
			name: "update agent's filter evicts all but DaemonSet, mirror and finished pods",
			pods: []*v1.Pod{newPod("a"), newPod("ds", daemonSetPod), newPod("mirror", mirrorPod),
				newPod("tolerates", tolerating), newPod("done", finished), newPod("elsewhere", onOtherNode)},
			filter:          updateFilter,
			wantActions:     []string{listNode, "create pods/eviction a", "create pods/eviction tolerates"},
			wantReports:     []string{"a:Evicted", "tolerates:Evicted"},
			wantTerminating: []string{"a", "tolerates"},
			wantEvicted:     2,
		},
		{
			name: "escalation's filter also skips pods tolerating the readiness taint",
			pods: []*v1.Pod{newPod("a"), newPod("ds", daemonSetPod), newPod("mirror", mirrorPod),
				newPod("tolerates", tolerating), newPod("done", finished)},
			filter:          escalationFilter,
			wantActions:     []string{listNode, "create pods/eviction a"},
			wantReports:     []string{"a:Evicted"},
			wantTerminating: []string{"a"},
			wantEvicted:     1,
		},
		{
			name:            "terminating pods are waited for, not evicted again",
			pods:            []*v1.Pod{newPod("a", terminating), newPod("b")},
			filter:          updateFilter,
			wantActions:     []string{listNode, "create pods/eviction b"},
			wantReports:     []string{"b:Evicted"},
			wantTerminating: []string{"a", "b"},
			wantEvicted:     1,
		},
		{
			name:        "a pod already gone is skipped",
			pods:        []*v1.Pod{newPod("a"), newPod("b")},
			refuse:      map[string][]error{"a": {apierrors.NewNotFound(v1.Resource("pods"), "a")}},
			wantActions: []string{listNode, "create pods/eviction a", "create pods/eviction b"},
			wantReports: []string{"a:Gone", "b:Evicted"},
			// a is still listed here because the fake does not delete it.
			wantTerminating: []string{"b"},
			wantEvicted:     1,
		},
		{
			name:            "a PodDisruptionBudget blocks one pod; it is named and the others are evicted",
			pods:            []*v1.Pod{newPod("a"), newPod("b"), newPod("c")},
			refuse:          map[string][]error{"b": {budgetError("web-pdb")}},
			wantActions:     []string{listNode, "create pods/eviction a", "create pods/eviction b", "create pods/eviction c"},
			wantReports:     []string{"a:Evicted", "b:Blocked:web-pdb", "c:Evicted"},
			wantPending:     []string{"b:Blocked:web-pdb"},
			wantTerminating: []string{"a", "c"},
			wantEvicted:     2,
		},
		{
			name:            "any other error backs off that pod only",
			pods:            []*v1.Pod{newPod("a"), newPod("b"), newPod("c")},
			refuse:          map[string][]error{"a": {apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget"))}},
			wantActions:     []string{listNode, "create pods/eviction a", "create pods/eviction b", "create pods/eviction c"},
			wantReports:     []string{"a:Failed", "b:Evicted", "c:Evicted"},
			wantPending:     []string{"a:Failed"},
			wantTerminating: []string{"b", "c"},
			wantEvicted:     2,
		},
		{
			name:        "nothing admitted: done at once",
			pods:        []*v1.Pod{newPod("ds", daemonSetPod), newPod("elsewhere", onOtherNode)},
			filter:      updateFilter,
			wantActions: []string{listNode},
			wantDone:    true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := newFakeAPI(t, tc.pods...)
			for k, v := range tc.refuse {
				api.refuse[k] = v
			}
			var reports []Result
			d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, testingclock.NewFakeClock(t0),
				Options{Filter: tc.filter, Report: func(r Result) { reports = append(reports, r) }})
			st, err := d.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantActions, api.actions()); diff != "" {
				t.Errorf("API actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReports, outcomes(reports)); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPending, outcomes(st.Pending)); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTerminating, names(st.Terminating)); diff != "" {
				t.Errorf("terminating (-want +got):\n%s", diff)
			}
			if st.Evicted != tc.wantEvicted || st.Done() != tc.wantDone {
				t.Errorf("evicted %d, done %v; want %d, %v", st.Evicted, st.Done(), tc.wantEvicted, tc.wantDone)
			}
			if len(st.Pending) > 0 && st.NextAttempt != t0.Add(DefaultInitialBackoff) {
				t.Errorf("next attempt %v, want the initial back-off after now", st.NextAttempt)
			}
		})
	}
}

// A refused pod is not tried again before its back-off ends; the back-off
// doubles up to the maximum, and a server's Retry-After lengthens it.
func TestPassBacksOffRefusedPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	throttled := apierrors.NewTooManyRequests("slow down", 30)
	api := newFakeAPI(t, newPod("a"), newPod("b"))
	api.refuse["a"] = []error{budgetError("pdb"), budgetError("pdb"), budgetError("pdb"), throttled, budgetError("pdb")}
	clk := testingclock.NewFakeClock(t0)
	d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, clk,
		Options{InitialBackoff: time.Second, MaxBackoff: 4 * time.Second})

	steps := []struct {
		advance     time.Duration
		wantActions []string
		wantRetryIn time.Duration // from now; 0: nothing pending
		wantAttempt int
	}{
		{0, []string{listNode, "create pods/eviction a", "create pods/eviction b"}, time.Second, 1},
		{999 * time.Millisecond, []string{listNode}, time.Millisecond, 1},
		{time.Millisecond, []string{listNode, "create pods/eviction a"}, 2 * time.Second, 2},
		{2 * time.Second, []string{listNode, "create pods/eviction a"}, 4 * time.Second, 3},
		// Retry-After: 30 s is longer than the capped back-off of 4 s.
		{4 * time.Second, []string{listNode, "create pods/eviction a"}, 30 * time.Second, 4},
		{30 * time.Second, []string{listNode, "create pods/eviction a"}, 4 * time.Second, 5},
		{4 * time.Second, []string{listNode, "create pods/eviction a"}, 0, 0},
	}
	for i, step := range steps {
		clk.Step(step.advance)
		st, err := d.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.wantActions, api.actions()); diff != "" {
			t.Fatalf("step %d: API actions (-want +got):\n%s", i, diff)
		}
		if step.wantRetryIn == 0 {
			if len(st.Pending) != 0 || !st.NextAttempt.IsZero() {
				t.Fatalf("step %d: still pending %v", i, outcomes(st.Pending))
			}
			continue
		}
		if got := st.NextAttempt.Sub(clk.Now()); got != step.wantRetryIn || st.Pending[0].Attempts != step.wantAttempt {
			t.Fatalf("step %d: retry in %v after %d attempts, want %v after %d", i, got, st.Pending[0].Attempts, step.wantRetryIn, step.wantAttempt)
		}
	}
}

// A list failure is an error of the pass, not a per-pod outcome.
func TestPassListFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI(t, newPod("a"))
	api.client.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, testingclock.NewFakeClock(t0), Options{})
	if _, err := d.Pass(ctx); err == nil || !strings.Contains(err.Error(), "listing pods of node n1") || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("err = %v, want the list failure naming the node", err)
	}
	if diff := cmp.Diff([]string{listNode}, api.actions()); diff != "" {
		t.Errorf("API actions (-want +got):\n%s", diff)
	}
}

// timerClock is a fake clock that announces every timer Drain starts, so the
// test advances time exactly when Drain waits, without sleeping.
type timerClock struct {
	*testingclock.FakeClock
	timers chan time.Duration
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- d
	return t
}

func TestDrainWaitsForBackoffAndTermination(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI(t, newPod("a"), newPod("b"), newPod("ds", daemonSetPod))
	api.refuse["b"] = []error{budgetError("web-pdb"), budgetError("web-pdb")}
	clk := &timerClock{FakeClock: testingclock.NewFakeClock(t0), timers: make(chan time.Duration)}
	var reports []string
	d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, clk, Options{
		Filter: SkipDaemonSetAndMirrorPods, InitialBackoff: 5 * time.Second, PollInterval: 2 * time.Second,
		Report: func(r Result) { reports = append(reports, r.String()) },
	})
	type result struct {
		st  Status
		err error
	}
	done := make(chan result)
	go func() {
		st, err := d.Drain(ctx)
		done <- result{st, err}
	}()

	// Pass 1: a evicted (terminating), b blocked for 5 s; poll in 2 s.
	if got := <-clk.timers; got != 2*time.Second {
		t.Fatalf("waits %v, want the poll interval while a pod terminates", got)
	}
	api.kubelet() // a is gone
	clk.Step(2 * time.Second)
	// Pass 2: only b, backing off for 3 more seconds, nothing terminating.
	if got := <-clk.timers; got != 3*time.Second {
		t.Fatalf("waits %v, want the rest of b's back-off", got)
	}
	clk.Step(3 * time.Second)
	// Pass 3: b blocked again, 10 s.
	if got := <-clk.timers; got != 10*time.Second {
		t.Fatalf("waits %v, want b's doubled back-off", got)
	}
	clk.Step(10 * time.Second)
	// Pass 4: b evicted; poll while it terminates.
	if got := <-clk.timers; got != 2*time.Second {
		t.Fatalf("waits %v, want the poll interval", got)
	}
	api.kubelet()
	clk.Step(2 * time.Second)
	r := <-done
	if r.err != nil || !r.st.Done() {
		t.Fatalf("drain: %v, done %v", r.err, r.st.Done())
	}
	want := []string{
		"pod apps/a: evicted",
		"pod apps/b blocked by PodDisruptionBudget web-pdb: The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
		"pod apps/b blocked by PodDisruptionBudget web-pdb: The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
		"pod apps/b: evicted",
	}
	if diff := cmp.Diff(want, reports); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if _, err := api.client.CoreV1().Pods(ns).Get(ctx, "ds", metav1.GetOptions{}); err != nil {
		t.Errorf("the DaemonSet pod was evicted: %v", err)
	}
}

// The caller bounds the drain (the agent's drainTimeout): the error names the
// blocked pod and its budget and unwraps to the context's error.
func TestDrainEndsWithContextNamingWhatIsLeft(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI(t, newPod("a"), newPod("b"))
	api.refuse["b"] = []error{budgetError("web-pdb"), budgetError("web-pdb"), budgetError("web-pdb")}
	clk := &timerClock{FakeClock: testingclock.NewFakeClock(t0), timers: make(chan time.Duration)}
	d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, clk, Options{})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := d.Drain(ctx)
		done <- err
	}()
	<-clk.timers
	cancel()
	err := <-done
	var incomplete *IncompleteError
	if !errors.As(err, &incomplete) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an IncompleteError wrapping the context's", err)
	}
	for _, want := range []string{"drain of node n1 did not finish", "pod apps/b blocked by PodDisruptionBudget web-pdb", "1 pods still terminating"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A list that keeps failing is retried with back-off until the context ends.
func TestDrainRetriesFailedLists(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI(t, newPod("a"))
	failures := 2
	api.client.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	clk := &timerClock{FakeClock: testingclock.NewFakeClock(t0), timers: make(chan time.Duration)}
	d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, clk, Options{InitialBackoff: time.Second})
	done := make(chan error)
	go func() {
		_, err := d.Drain(ctx)
		done <- err
	}()
	for _, want := range []time.Duration{time.Second, 2 * time.Second, DefaultPollInterval} {
		if got := <-clk.timers; got != want {
			t.Fatalf("waits %v, want %v", got, want)
		}
		if want == DefaultPollInterval {
			api.kubelet()
		}
		clk.Step(want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBlockingBudgetNamesTheBudgetThatRefusedAnEvictionAndWhy(t *testing.T) {
	stale := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	stale.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: "The disruption budget db-pdb is still being processed by the server."}}
	tests := []struct {
		name       string
		err        error
		wantBudget string
		wantReason string
	}{
		{"budget with no disruptions allowed", budgetError("web-pdb"), "web-pdb", "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"},
		{"budget not yet observed by its controller", stale, "db-pdb", "The disruption budget db-pdb is still being processed by the server."},
		{"throttling names no budget", apierrors.NewTooManyRequests("too many requests, please try again later", 1), "", "too many requests, please try again later"},
		{"wrapped", fmt.Errorf("evicting: %w", budgetError("wrapped-pdb")), "wrapped-pdb", "The disruption budget wrapped-pdb needs 2 healthy pods and has 2 currently"},
		{"not an API status", errors.New("connection refused"), "", "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			budget, reason := BlockingBudget(tc.err)
			if budget != tc.wantBudget || reason != tc.wantReason {
				t.Errorf("BlockingBudget = %q, %q; want %q, %q", budget, reason, tc.wantBudget, tc.wantReason)
			}
		})
	}
}

func TestTheUpdateFilterSkipsDaemonSetAndMirrorPodsAndTheEscalationsAlsoPodsTolerantOfTheTaint(t *testing.T) {
	noExecute := v1.Taint{Key: readinessTaint.Key, Effect: v1.TaintEffectNoExecute}
	tests := []struct {
		name string
		pod  *v1.Pod
		// admitted by: the update agent's filter, the escalation's.
		update, escalation bool
	}{
		{"plain pod", newPod("p"), true, true},
		{"DaemonSet pod", newPod("p", daemonSetPod), false, false},
		{"owned but not controlled by a DaemonSet", newPod("p", func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
		}), true, true},
		{"ReplicaSet pod", newPod("p", func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
		}), true, true},
		{"mirror pod", newPod("p", mirrorPod), false, false},
		{"tolerates the readiness taint", newPod("p", tolerating), true, false},
		{"tolerates every taint", newPod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
		}), true, false},
		{"tolerates only the NoExecute variant", newPod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: readinessTaint.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
		}), true, true},
		{"tolerates another taint", newPod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "other", Operator: v1.TolerationOpExists}}
		}), true, true},
	}
	escalation := All(SkipDaemonSetAndMirrorPods, SkipTolerating(readinessTaint))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SkipDaemonSetAndMirrorPods(tc.pod); got != tc.update {
				t.Errorf("update filter admits: %v, want %v", got, tc.update)
			}
			if got := escalation(tc.pod); got != tc.escalation {
				t.Errorf("escalation filter admits: %v, want %v", got, tc.escalation)
			}
		})
	}
	// Several taints: tolerating any of them skips the pod.
	both := SkipTolerating(readinessTaint, noExecute)
	if both(newPod("p", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: readinessTaint.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	})) {
		t.Error("a pod tolerating the NoExecute taint of the list was admitted")
	}
}

// GracePeriodSeconds reaches every eviction's DeleteOptions beside the UID
// precondition; unset, the eviction carries none, so each pod keeps its own.
func TestTheGracePeriodReachesTheEvictionsDeleteOptions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, grace := range []*int64{nil, ptr.To[int64](0), ptr.To[int64](45)} {
		api := newFakeAPI(t, newPod("a"))
		var got []*int64
		api.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "eviction" {
				got = append(got, action.(core.CreateAction).GetObject().(*policyv1.Eviction).DeleteOptions.GracePeriodSeconds)
			}
			return false, nil, nil
		})
		d := New(clientset.New(api.client.CoreV1(), api.client.PolicyV1()), node, testingclock.NewFakeClock(t0), Options{GracePeriodSeconds: grace})
		if _, err := d.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], grace) {
			t.Errorf("grace period %v: the evictions carried %v", ptr.Deref(grace, -1), got)
		}
	}
}
