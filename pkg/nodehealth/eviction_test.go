package nodehealth

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"

	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// reachEvictionTime renews the node's kube-proxy Lease once, lets it expire
// (gated) and the default 5 m eviction timeout run out, syncing at each step.
func (f *fixture) reachEvictionTime(node string) {
	f.renew("kube-proxy", node)
	f.sync(node)
	f.clock.Step(51 * time.Second)
	f.sync(node)
	f.clock.Step(5 * time.Minute)
	f.sync(node)
}

// toASecondBeforeEviction gates the node by its kube-proxy Lease's expiry
// and brings it to a second before the default 5 m eviction timeout runs
// out, syncing at each step, and checks that nothing is escalated yet.
func (f *fixture) toASecondBeforeEviction(node string) {
	f.t.Helper()
	f.renew("kube-proxy", node)
	f.sync(node)
	f.clock.Step(51 * time.Second)
	f.sync(node)
	if !f.tainted(node) {
		f.t.Fatal("the expired Lease did not gate the node")
	}
	f.clock.Step(5*time.Minute - time.Second)
	f.sync(node)
	if n := f.c.evictions.Len(); n != 0 {
		f.t.Fatalf("%d escalations queued a second before the eviction timeout runs out", n)
	}
}

// escalateAndSync runs the node's escalation, then the sync it queues.
func (f *fixture) escalateAndSync(t *testing.T, node string) {
	t.Helper()
	if _, err := f.c.escalateNode(f.ctx, node); err != nil {
		t.Fatal(err)
	}
	f.sync(node)
}

// escalationDue brings node n1 (with the objects) to its eviction time.
func escalationDue(t *testing.T, objects ...runtime.Object) *fixture {
	f := newFixture(t, testOptions(), append([]runtime.Object{readyNode("n1")}, objects...)...)
	f.reachEvictionTime("n1")
	f.client.ClearActions()
	return f
}

// budgetRefusesEvictions makes the API server refuse every eviction as a
// PodDisruptionBudget that allows no disruption does.
func budgetRefusesEvictions(f *fixture) {
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}}
		return true, nil, err
	})
}

// evictionsOf returns the names of the pods evicted since the last call.
func evictionsOf(f *fixture) []string {
	var out []string
	for _, a := range f.writes() {
		if a.GetSubresource() == "eviction" {
			out = append(out, a.(core.CreateAction).GetObject().(*policyv1.Eviction).Name)
		}
	}
	return out
}

// Issue 9 defect 5: an eviction failing with an error other than 404/429
// must not block the node's other pods; the failing pod is backed off on its
// own and named in an Event.
func TestFailingEvictionDoesNotBlockTheOtherPods(t *testing.T) {
	f := escalationDue(t, pod("a-fails", "n1"), pod("b", "n1"), pod("c", "n1"))
	failures := 2
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || action.(core.CreateAction).GetObject().(*policyv1.Eviction).Name != "a-fails" || failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	})

	after, err := f.c.escalateNode(f.ctx, "n1")
	if err != nil {
		t.Fatalf("one failing pod failed the node's escalation: %v", err)
	}
	if diff := cmp.Diff([]string{"a-fails", "b", "c"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	if after != evictionInitialBackoff {
		t.Fatalf("retry in %v, want the failing pod's back-off %v", after, evictionInitialBackoff)
	}
	f.expectEvent(EventEvictionFailed + " Evicting pod default/a-fails failed")

	// Before its back-off ends the failing pod is not tried again, and the
	// evicted ones are not evicted twice.
	f.clock.Step(evictionInitialBackoff - time.Second)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != time.Second {
		t.Fatalf("retry in %v (err %v), want the rest of the back-off", after, err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Fatalf("evicted %v during the back-off", got)
	}
	// Second failure: the back-off doubles.
	f.clock.Step(time.Second)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 2*evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the doubled back-off", after, err)
	}
	if diff := cmp.Diff([]string{"a-fails"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	f.clock.Step(2 * evictionInitialBackoff)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v), want done", after, err)
	}
	if diff := cmp.Diff([]string{"a-fails"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	if got := testCounter(t, f, "error"); got != 2 {
		t.Errorf("evictions_total{result=error} = %v, want 2", got)
	}
	if got := testCounter(t, f, "evicted"); got != 3 {
		t.Errorf("evictions_total{result=evicted} = %v, want 3", got)
	}
}

// A node that recovers while a pod backs off is not evicted any further.
func TestRecoveredNodeStopsItsDrain(t *testing.T) {
	f := escalationDue(t, pod("blocked", "n1"))
	budgetRefusesEvictions(f)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the back-off", after, err)
	}
	f.expectEvent(EventEvictionBlocked + " Cannot evict pod default/blocked yet, retrying in 5s: The disruption budget web-pdb")
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(evictionInitialBackoff)
	f.client.ClearActions()
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) after recovery, want none", after, err)
	}
	if got := describe(f.client.Actions()); len(got) != 0 {
		t.Errorf("API actions after recovery: %q, want none", got)
	}
	if f.c.drains.m["n1"] != nil {
		t.Error("the recovered node's drain is still held")
	}
}

// The eviction queue retries a node when its earliest refused pod is due,
// not on the queue's own back-off.
func TestEvictionQueueRetriesAtTheDrainsBackoff(t *testing.T) {
	f := escalationDue(t, pod("a-fails", "n1"))
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	f.c.evictions.Add("n1")
	if !f.c.processNextEviction(f.ctx) {
		t.Fatal("queue shut down")
	}
	if n := f.c.evictions.Len(); n != 0 {
		t.Fatalf("node requeued at once (%d queued)", n)
	}
	if n := f.c.evictions.NumRequeues("n1"); n != 0 {
		t.Errorf("a pod's refusal counted as a node failure (%d requeues)", n)
	}
}

func testCounter(t *testing.T, f *fixture, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(f.c.metrics.Evictions.WithLabelValues(result))
}

// A drain retry still queued when the node recovered must not evict anything
// when it fires during a new failure of the node whose eviction clock has not
// run out (simulation seed 84: a refused pod's retry evicted the node's new
// pods 10 s into its next failure, with a 30 s eviction timeout).
func TestADrainRetryOfAnEarlierFailureDoesNotEvictInTheNextOne(t *testing.T) {
	f := escalationDue(t, pod("blocked", "n1"))
	refuse := true
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || !refuse {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}}
		return true, nil, err
	})
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != evictionInitialBackoff {
		t.Fatalf("retry in %v (err %v), want the back-off", after, err)
	}
	// Recovered, then failing again before the retry fires.
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated after the renewal")
	}
	f.clock.Step(51 * time.Second)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated after the second expiry")
	}
	refuse = false
	f.client.ClearActions()
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) in the new failure, want none", after, err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Errorf("evicted %q with the new failure's eviction clock at 0s of 5m", got)
	}
	// Once the new failure's clock runs out, the node is escalated again.
	f.clock.Step(5 * time.Minute)
	f.sync("n1")
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("retry in %v (err %v) once due, want none", after, err)
	}
	if got := evictionsOf(f); len(got) != 1 || got[0] != "blocked" {
		t.Errorf("evicted %q once the new failure was due, want [blocked]", got)
	}
}

// The eviction clock pauses at the instant a blast-radius suspension begins
// and resumes when it ends, whether or not the failing node is synced in
// between: a 10-minute suspension adds 10 minutes to the node's eviction
// time, and nodes that were failing do not all escalate at once on resume
// (docs/controller.md, issue 9 defect 4).
func TestSuspensionPausesTheEvictionClock(t *testing.T) {
	var objs []runtime.Object
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, objs...)
	for _, n := range names {
		f.sync(n)
	}
	escalated := func() bool { return f.c.evictions.Len() > 0 }

	// The healthy nodes renew (a node whose Lease is past its expiry
	// counts as failing as soon as a failure taint or an escalation is
	// decided, synced or not).
	renewHealthy := func(names ...string) {
		for _, n := range names {
			f.renew("kube-proxy", n)
		}
	}
	// a fails at t0+1m: its clock runs.
	f.clock.Step(time.Minute)
	renewHealthy("b", "c", "d", "e", "f")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	// b and c fail at t0+2m: 3 of 6 suspends escalation.
	f.clock.Step(time.Minute)
	renewHealthy("d", "e", "f")
	for _, n := range []string{"b", "c"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); !s {
		t.Fatal("3 of 6 failing at a 50 % threshold did not suspend")
	}
	// a's own timer fires at its original eviction time, during the
	// suspension.
	f.clock.Step(4 * time.Minute)
	f.sync("a")
	if escalated() {
		t.Fatal("escalated while suspended")
	}
	// b and c recover at t0+12m: 10 minutes of suspension.
	f.clock.Step(6 * time.Minute)
	renewHealthy("d", "e", "f")
	for _, n := range []string{"b", "c"} {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended(""); s {
		t.Fatal("still suspended with one failing node")
	}
	f.sync("a")
	if escalated() {
		t.Fatal("a escalated right at the resume: the suspension counted as failure time")
	}
	// a failed for 1 minute before the suspension, so 4 more minutes.
	f.clock.Step(4*time.Minute - time.Second)
	renewHealthy("b", "c", "d", "e", "f")
	f.sync("a")
	if escalated() {
		t.Fatalf("a escalated %s after the resume, before its remaining 4 minutes", 4*time.Minute-time.Second)
	}
	f.clock.Step(time.Second)
	f.sync("a")
	if !escalated() {
		t.Fatal("a did not escalate 5 minutes of failure after it failed, not counting the suspension")
	}
}

// A planned release pauses a failing node's eviction clock; it does not reset
// it: when the updater's Lease renews while the other failure remains, the
// clock goes on from the time it had counted. Nothing but an ungate or a
// recovery resets it (docs/controller.md, "Escalation"). The simulation found
// the reset (seed 133, where the gate's restart after an own-view stall left
// the node waiting for renewals, the same pause).
func TestAPlannedReleasePausesTheEvictionClockWithoutResettingIt(t *testing.T) {
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{}
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: true,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("a"), lease("kube-proxy", "a", "holder", t0), lease("updater", "a", "holder", t0))
	f.sync("a")
	escalated := func() bool { return f.c.evictions.Len() > 0 }
	step := func(d time.Duration, renewUpdater bool) {
		f.clock.Step(d)
		if renewUpdater {
			f.renew("updater", "a")
		}
		f.sync("a")
	}

	// kube-proxy fails at t0+1m and its clock counts 2 minutes.
	f.clock.Step(time.Minute)
	f.renew("updater", "a")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	step(2*time.Minute, true)
	// The updater releases for an update: the failures are planned for
	// 10 minutes, and nothing escalates.
	f.release("updater", "a", nodev1alpha1.ReasonUpdating)
	f.sync("a")
	step(10*time.Minute, false)
	if escalated() {
		t.Fatal("escalated while the node's failures were planned")
	}
	// The updater renews; kube-proxy still fails: 3 minutes are left.
	step(0, true)
	step(3*time.Minute-time.Second, true)
	if escalated() {
		t.Fatal("escalated before the failure had counted 5 minutes outside the planned release")
	}
	step(time.Second, true)
	if !escalated() {
		t.Fatal("the planned release reset the eviction clock: no escalation 5 minutes of unplanned failure after it began")
	}
}

// Found by the simulation (seed 6830237159890156263): an escalated node's
// failure pauses while the node stays gated (here a planned release; also a
// gate waiting for renewals after an own-view recovery), and the drain's
// retry comes due in the pause and finds the node not failing. When the
// failure goes on, so must the drain: the node stayed escalated, so nothing
// decided the escalation again, and its pods stayed on a failed node.
func TestADrainPausedWithItsFailureGoesOnWhenTheFailureDoes(t *testing.T) {
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{}
	opts.Rules = append(opts.Rules, Rule{Name: "updater", Extension: "updater", Selector: labels.Everything(), AffectsReadiness: true,
		FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, readyNode("a"), lease("kube-proxy", "a", "holder", t0), lease("updater", "a", "holder", t0), pod("p", "a"))
	blocked := true
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" || !blocked {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	})
	// runEvictions runs the escalations queued now, as the eviction worker
	// does when they come due.
	runEvictions := func() {
		t.Helper()
		for f.c.evictions.Len() > 0 {
			name, _ := f.c.evictions.Get()
			if _, err := f.c.escalateNode(f.ctx, name); err != nil {
				t.Fatal(err)
			}
			f.c.evictions.Forget(name)
			f.c.evictions.Done(name)
		}
	}
	f.sync("a")
	f.clock.Step(time.Minute)
	f.renew("updater", "a")
	f.release("kube-proxy", "a", "Crash")
	f.sync("a")
	f.clock.Step(5 * time.Minute)
	f.renew("updater", "a")
	f.sync("a")
	runEvictions()
	if got := evictionsOf(f); len(got) != 1 {
		t.Fatalf("escalation: eviction attempts %v, want one (refused by the budget)", got)
	}

	// The updater releases for an update: the failure is planned, and the
	// drain's retry finds the node not failing.
	f.release("updater", "a", nodev1alpha1.ReasonUpdating)
	f.sync("a")
	f.clock.Step(10 * time.Second)
	f.c.evictions.Add("a")
	runEvictions()
	if got := evictionsOf(f); len(got) != 0 {
		t.Fatalf("evicted %v while the node's failure was planned", got)
	}

	// The updater renews while kube-proxy still fails: the failure, and
	// its drain, go on.
	blocked = false
	f.clock.Step(time.Second)
	f.renew("updater", "a")
	f.sync("a")
	runEvictions()
	if got := evictionsOf(f); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("after the failure went on: eviction attempts %v, want [p]", got)
	}
}

// escalationDueWith is escalationDue with the given eviction overrides.
func escalationDueWith(t *testing.T, force, deleteEmptyDirData bool, objects ...runtime.Object) *fixture {
	opts := testOptions()
	opts.Eviction.Force, opts.Eviction.DeleteEmptyDirData = force, deleteEmptyDirData
	f := newFixture(t, opts, append([]runtime.Object{readyNode("n1")}, objects...)...)
	f.reachEvictionTime("n1")
	f.client.ClearActions()
	f.events()
	return f
}

func controlledBy(kind string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: p.Name + "-owner", Controller: ptr.To(true)}}
	}
}

func withEmptyDir(p *v1.Pod) {
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
}

// escalationPods are one of each kind of pod kubectl drain decides about,
// beside a pod that tolerates the readiness taint.
func escalationPods() []runtime.Object {
	return []runtime.Object{
		pod("web", "n1", controlledBy("ReplicaSet")),
		pod("bare", "n1"),
		pod("scratch", "n1", controlledBy("ReplicaSet"), withEmptyDir),
		pod("agent", "n1", controlledBy("DaemonSet")),
		pod("static", "n1", func(p *v1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "x"} }),
		pod("done", "n1", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
		pod("extension", "n1", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: testKey, Operator: v1.TolerationOpExists}}
		}),
	}
}

// Mode Evict leaves, as kubectl drain does, pods that declare no controller
// and pods with emptyDir data unless eviction.force and
// eviction.deleteEmptyDirData allow them; it names them in an Event and in
// the node's condition, and evicts the others. DaemonSet, mirror, finished
// and tolerating pods are left without being named.
func TestEvictLeavesAndNamesWhatKubectlDrainWouldNotRemove(t *testing.T) {
	f := escalationDueWith(t, false, false, escalationPods()...)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation: retry in %v, err %v", after, err)
	}
	if diff := cmp.Diff([]string{"web"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	const named = "default/bare (" + drain.ReasonUnmanaged + "), default/scratch (" + drain.ReasonLocalStorage + ")"
	f.expectEvent(EventEvictionSkipped + " Not evicting pods that kubectl drain would not remove without a flag (eviction.force, eviction.deleteEmptyDirData): " + named)
	// The node was queued for its condition.
	if n := f.c.queue.Len(); n == 0 {
		t.Error("the node was not queued to name the pods in its condition")
	}
	f.sync("n1")
	if c := f.condition("n1"); !strings.Contains(c.Message, " Pods left on the node by the eviction: "+named+".") {
		t.Errorf("condition message %q does not name the pods left", c.Message)
	}
	// Every eviction was issued: the drain ends, the record stays.
	if f.c.drains.m["n1"] != nil {
		t.Error("the drain is still held after every eviction was issued")
	}
	f.sync("n1")
	if c := f.condition("n1"); !strings.Contains(c.Message, "default/bare") {
		t.Errorf("a later sync dropped the pods left from the condition: %q", c.Message)
	}

	// The node recovers: the condition no longer names them.
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if c := f.condition("n1"); strings.Contains(c.Message, "Pods left") {
		t.Errorf("the recovered node's condition still names pods left: %q", c.Message)
	}
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation after recovery: retry in %v, err %v", after, err)
	}
	if left := f.c.drains.leftOn("n1"); left != "" {
		t.Errorf("the recovered node's record still names %s", left)
	}
}

// With eviction.force and eviction.deleteEmptyDirData, mode Evict evicts
// what kubectl drain --force --delete-emptydir-data --ignore-daemonsets
// deletes (less finished pods), and still leaves the tolerating pod.
func TestEvictWithForceAndDeleteEmptyDirData(t *testing.T) {
	f := escalationDueWith(t, true, true, escalationPods()...)
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation: retry in %v, err %v", after, err)
	}
	if diff := cmp.Diff([]string{"bare", "scratch", "web"}, evictionsOf(f)); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	for _, e := range f.events() {
		if strings.Contains(e, EventEvictionSkipped) {
			t.Errorf("unexpected event %q", e)
		}
	}
	f.sync("n1")
	if c := f.condition("n1"); strings.Contains(c.Message, "Pods left") {
		t.Errorf("condition names pods left: %q", c.Message)
	}
}

// A node whose only evictable pods are left still names them: the drain
// has nothing to evict, but the operator must learn what stays.
func TestEvictNamesPodsLeftWhenNothingIsEvicted(t *testing.T) {
	f := escalationDueWith(t, true, false, pod("scratch", "n1", withEmptyDir))
	if after, err := f.c.escalateNode(f.ctx, "n1"); err != nil || after != 0 {
		t.Fatalf("escalation: retry in %v, err %v", after, err)
	}
	if got := evictionsOf(f); len(got) != 0 {
		t.Fatalf("evicted %v", got)
	}
	f.expectEvent(EventEvictionSkipped + " Not evicting pods that kubectl drain would not remove without a flag (eviction.force, eviction.deleteEmptyDirData): default/scratch (" + drain.ReasonLocalStorage + ")")
	f.sync("n1")
	if c := f.condition("n1"); !strings.Contains(c.Message, "default/scratch") {
		t.Errorf("condition message %q does not name the pod left", c.Message)
	}
}

// A failing node whose failures become planned (a planned release among
// them) stays gated and pauses its eviction clock. Another node's failure
// decided first in that instant brings the blast-radius count up to date,
// which already counts the node as not failing; the node's own evaluation
// must pause its clock all the same, or the planned time is counted as
// failure time and the node is evicted early (simulation seeds
// 15839658414113777250 and 2573494415411049320, where the gate restarted at
// an own-view recovery and waited for renewals instead).
func TestAFailingNodeWhoseCountAnotherNodesRecountClearedStillPausesItsEvictionClock(t *testing.T) {
	opts := withCNI(testOptions(), 0, FailurePolicyKeepGated)
	opts.Eviction.Timeout = 30 * time.Second
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	f := newFixture(t, opts, readyNodes(names...)...)
	for _, n := range names {
		f.renew("cni", n)
	}
	f.syncAll(names...)
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n2", "Crash")
	f.sync("n2")
	if !f.tainted("n2") || !f.c.blast.isFailing("n2") {
		t.Fatalf("n2 not tainted for its failure (condition %s)", f.condition("n2").Reason)
	}

	// 10 s into n2's failure its cni releases for maintenance: the failure
	// is planned now. n3 fails in the same instant and is decided first.
	f.clock.Step(10 * time.Second)
	f.release("cni", "n2", nodev1alpha1.ReasonUpdating)
	f.release("kube-proxy", "n3", "Crash")
	f.sync("n3")
	f.sync("n2")
	if r := f.condition("n2").Reason; !f.tainted("n2") || r != nodev1alpha1.ReasonPlannedMaintenance {
		t.Fatalf("n2: tainted %v, condition %s, want tainted for %s", f.tainted("n2"), r, nodev1alpha1.ReasonPlannedMaintenance)
	}

	// 20 s later cni is back and kube-proxy still fails: n2 has failed for
	// 10 s of its 30 s.
	f.clock.Step(20 * time.Second)
	f.renew("cni", "n2")
	f.renew("cni", "n3")
	f.sync("n2")
	if !f.c.blast.isFailing("n2") {
		t.Fatalf("n2 does not fail again once its planned release ended (condition %s)", f.condition("n2").Reason)
	}
	if n := f.c.evictions.Len(); n != 0 {
		t.Errorf("n2 escalated after 10 s of unplanned failure: its eviction clock counted the planned maintenance")
	}
}

// Escalations that come due together take turns of the cluster-wide rate
// limit (eviction.nodesPerSecond, burst 1) on the controller's clock: the
// first node is escalated at once, each next one a turn later, and a node
// waiting for its turn is queued for that instant rather than holding the
// eviction worker.
func TestEscalationsDueTogetherTakeTurnsOfTheRateLimitOnTheControllersClock(t *testing.T) {
	opts := testOptions()
	opts.Eviction.NodesPerSecond = 0.1
	opts.BlastRadius = BlastRadiusOptions{} // three of three nodes fail at once
	nodes := []string{"n1", "n2", "n3"}
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, readyNode(n), pod("p-"+n, n))
	}
	f := newFixture(t, opts, objs...)
	for _, n := range nodes {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	f.clock.Step(51 * time.Second)
	for _, n := range nodes {
		f.sync(n)
	}
	f.clock.Step(5 * time.Minute)
	for _, n := range nodes {
		f.sync(n)
	}
	f.client.ClearActions()
	escalate := func(node string, wantWait time.Duration, wantEvicted ...string) {
		t.Helper()
		after, err := f.c.escalateNode(f.ctx, node)
		if err != nil || after != wantWait {
			t.Fatalf("%s: waits %v (err %v), want %v", node, after, err, wantWait)
		}
		if got := evictionsOf(f); !slices.Equal(got, wantEvicted) {
			t.Fatalf("%s: evicted %q, want %q", node, got, wantEvicted)
		}
	}
	escalate("n1", 0, "p-n1")
	escalate("n2", 10*time.Second)
	escalate("n3", 20*time.Second)
	// Queued again before its turn (another evaluation), a node keeps it.
	f.clock.Step(4 * time.Second)
	escalate("n3", 16*time.Second)
	f.clock.Step(6 * time.Second)
	escalate("n2", 0, "p-n2")
	escalate("n3", 10*time.Second)
	f.clock.Step(10 * time.Second)
	escalate("n3", 0, "p-n3")
}

// A node whose eviction waits for its turn of the cluster-wide rate is
// visible while it waits: nodehealth_eviction_turn_waiting_nodes counts it
// until its turn's instant comes (no event announces that), and one
// EvictionDeferred Event on the node says the rate and when its turn comes,
// once per wait, not on each of its retries.
func TestANodeWaitingForItsEvictionTurnIsCountedAndAnnouncedOnce(t *testing.T) {
	opts := testOptions()
	opts.Eviction.NodesPerSecond = 0.1
	opts.BlastRadius = BlastRadiusOptions{} // three of three nodes fail at once
	nodes := []string{"n1", "n2", "n3"}
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, readyNode(n), pod("p-"+n, n))
	}
	f := newFixture(t, opts, objs...)
	for _, n := range nodes {
		f.renew("kube-proxy", n)
		f.sync(n)
	}
	f.clock.Step(51 * time.Second)
	for _, n := range nodes {
		f.sync(n)
	}
	f.clock.Step(5 * time.Minute)
	for _, n := range nodes {
		f.sync(n)
	}
	f.events()
	// says: the Event the escalation must record, by what it says (none:
	// no EvictionDeferred Event).
	escalate := func(node string, wantWaiting float64, says ...string) {
		t.Helper()
		if _, err := f.c.escalateNode(f.ctx, node); err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		expectWaiting(t, f, wantWaiting)
		var deferred []string
		for _, e := range f.events() {
			if strings.Contains(e, EventEvictionDeferred) {
				deferred = append(deferred, e)
			}
		}
		if want := min(len(says), 1); len(deferred) != want {
			t.Fatalf("%s: EvictionDeferred Events %q, want %d", node, deferred, want)
		}
		for _, want := range says {
			if !strings.Contains(deferred[0], want) {
				t.Fatalf("%s: EvictionDeferred Event %q does not say %q", node, deferred[0], want)
			}
		}
	}
	expectWaiting(t, f, 0)
	escalate("n1", 0) // the token was there: no wait, nothing deferred
	escalate("n2", 1, "Warning EvictionDeferred", "eviction.nodesPerSecond 0.1: one node every 10s", "in 10s")
	escalate("n3", 2, "in 20s")
	// Retried before its turn (another evaluation queued it), a node
	// says nothing more.
	f.clock.Step(4 * time.Second)
	escalate("n3", 2)
	// n2's turn has come: it waits no more, processed or not.
	f.clock.Step(6 * time.Second)
	expectWaiting(t, f, 1)
	escalate("n2", 1)
	escalate("n3", 1)
	f.clock.Step(10 * time.Second)
	expectWaiting(t, f, 0)
	escalate("n3", 0)
}

func expectWaiting(t *testing.T, f *fixture, want float64) {
	t.Helper()
	if got := testutil.ToFloat64(f.c.metrics.EvictionTurnWaiting); got != want {
		t.Fatalf("nodehealth_eviction_turn_waiting_nodes = %v, want %v", got, want)
	}
}

// The NoExecute variant goes with the gate it escalated: when the ungate's
// removal is refused (an outage of the controller's writes) and a new gate
// begins on the node before it is written (the updater's planned release),
// the variant is removed, not kept for a gate that was never escalated
// (simulation seed 12 once modes were drawn).
func TestANoExecuteVariantWhoseUngateWasRefusedDoesNotOutliveItsGate(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Mode, opts.Eviction.Force = EvictionModeNoExecute, false
	f := newFixture(t, opts, readyNode("n1"))
	f.reachEvictionTime("n1")
	f.escalateAndSync(t, "n1")
	if !nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Fatalf("NoExecute variant not added: %s", fmtTaints(f.node("n1")))
	}
	refuse := true
	f.client.PrependReactor("patch", "nodes", func(core.Action) (bool, runtime.Object, error) {
		if !refuse {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(errors.New("etcd is gone"))
	})
	f.renew("kube-proxy", "n1")
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the ungate was written through the outage")
	}
	refuse = false
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	node := f.node("n1")
	if !nodeutil.HasTaint(node, testKey, v1.TaintEffectNoSchedule) || f.condition("n1").Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Fatalf("not gated for the planned release: %s, %+v", fmtTaints(node), f.condition("n1"))
	}
	if nodeutil.HasTaint(node, testKey, v1.TaintEffectNoExecute) {
		t.Errorf("the NoExecute variant of the ended gate is kept by the planned one: %s", fmtTaints(node))
	}
}

// Mode None (the default) never escalates: a node that keeps failing long
// past the eviction timeout stays tainted with its pods on it, and no
// escalation is queued or made.
func TestInModeNoneAFailingNodeIsNeverEscalated(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Mode, opts.Eviction.Force = EvictionModeNone, false
	f := newFixture(t, opts, readyNode("n1"), pod("p", "n1"))
	f.reachEvictionTime("n1")
	f.clock.Step(time.Hour)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("the failing node is not tainted")
	}
	if n := f.c.evictions.Len(); n != 0 {
		t.Errorf("%d escalations queued in mode None", n)
	}
	f.client.ClearActions()
	f.escalateAndSync(t, "n1")
	if got := evictionsOf(f); len(got) != 0 {
		t.Errorf("evicted %q in mode None", got)
	}
	if nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Errorf("NoExecute variant added in mode None: %s", fmtTaints(f.node("n1")))
	}
}

// The eviction worker marks a node escalated before it lists the node's pods,
// never after: a node worker (production runs several beside the eviction
// worker) may ungate the node while the list is under way, which ends its
// escalation, and a mark made after that would leave the recovered node
// escalated, so that its next failure would never be escalated again.
func TestANodeUngatedWhileItsEscalationListsItsPodsIsNotLeftEscalated(t *testing.T) {
	f := escalationDue(t, pod("a", "n1"))
	ungated := false
	f.client.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
		if ungated {
			return false, nil, nil
		}
		ungated = true
		// Another worker's sync while this request is in flight: the fake
		// holds its lock while its reactors run, and the sync writes
		// through it too.
		f.client.Unlock()
		defer f.client.Lock()
		f.renew("kube-proxy", "n1")
		f.sync("n1")
		return false, nil, nil
	})
	if _, err := f.c.escalateNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if !ungated || f.tainted("n1") {
		t.Fatalf("n1 was not ungated during the list of its pods (ungated %v, tainted %v)", ungated, f.tainted("n1"))
	}
	if st := f.state("n1"); st.escalation.marked {
		t.Errorf("n1, ungated while its escalation listed its pods, is still marked escalated: %+v", st.escalation)
	}
}

// shuffledNodeNames are more names than a small map keeps in one order, out
// of name order: the order they are queued in must not be the order they
// were added in, nor a map's.
var shuffledNodeNames = []string{"n7", "n13", "n2", "n19", "n0", "n11", "n5", "n16", "n9", "n3",
	"n14", "n18", "n1", "n10", "n6", "n17", "n4", "n12", "n8", "n15"}

// queuedInOrder takes every key of the controller's sync queue, in the order
// a worker would.
func queuedInOrder(f *fixture) []string {
	var got []string
	for f.c.queue.Len() > 0 {
		name, _ := f.c.queue.Get()
		got = append(got, name)
		f.c.queue.Done(name)
	}
	return got
}

// The nodes a blast-radius suspension held past their eviction timeout come
// due together when it ends, and take their turns of the eviction rate in the
// order they are evaluated: the end of the suspension queues them in name
// order, as the turns of nodes coming due in one instant go (seed
// 3951628173843678851: in map order, n9 took the turn the model gave n6).
func TestTheNodesASuspensionHeldAreQueuedInNameOrderWhenItEnds(t *testing.T) {
	f := newFixture(t, testOptions())
	for _, n := range shuffledNodeNames {
		f.c.blast.update(n, "", true, true)
	}
	queuedInOrder(f)
	f.c.handleSuspensionChanges(f.ctx, []suspensionChange{{scope: "cluster", suspended: false}}, f.clock.Now())
	want := slices.Sorted(slices.Values(shuffledNodeNames))
	if got := queuedInOrder(f); !slices.Equal(got, want) {
		t.Fatalf("queued when the suspension ended: %q, want name order %q", got, want)
	}
}

// Likewise, the nodes the own-view guard held past their eviction timeout
// come due together when the view recovers, and every node is queued then in
// name order, not in the order the Node cache lists them.
func TestEveryNodeIsQueuedInNameOrderWhenTheOwnViewRecovers(t *testing.T) {
	var objs []runtime.Object
	for _, n := range shuffledNodeNames {
		objs = append(objs, readyNode(n))
	}
	f := newFixture(t, testOptions(), objs...)
	queuedInOrder(f)
	f.c.ownViewChanged(f.ctx, false, f.clock.Now())
	want := slices.Sorted(slices.Values(shuffledNodeNames))
	if got := queuedInOrder(f); !slices.Equal(got, want) {
		t.Fatalf("queued when the own view recovered: %q, want name order %q", got, want)
	}
}

// A node whose eviction timeout runs out in a sync whose writes the API
// server refuses (an outage of the controller's writes) takes its turn of
// the eviction rate then, not when the writes come back: the escalation is
// queued whatever happens to the sync's other writes, and the retry of those
// writes takes no turn of its own. Queued only after a sync that wrote
// everything, the node took its turn at the first sync after the outage, and
// every node due after it moved back with it (simulation seed
// 14990059884068702542: a condition write refused at the instant the own
// view recovered inside an outage).
func TestANodeWhoseEvictionComesDueInASyncWithRefusedWritesTakesItsTurnThen(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), pod("p", "n1"))
	f.toASecondBeforeEviction("n1")
	// Someone else overwrites the condition: the due sync has it to put
	// back, and the API server refuses that write.
	f.updateNode("n1", func(n *v1.Node) {
		for i := range n.Status.Conditions {
			if c := &n.Status.Conditions[i]; c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
				c.Status, c.Reason = v1.ConditionTrue, "SomeoneElsesWrite"
			}
		}
	})
	f.client.PrependReactor("patch", "nodes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is gone"))
	})
	f.clock.Step(time.Second)
	if err := f.c.syncNode(f.ctx, "n1"); err == nil {
		t.Fatal("the condition was written through the outage")
	}
	if n := f.c.evictions.Len(); n != 1 {
		t.Fatalf("%d escalations queued by the sync in which the eviction timeout ran out, want n1's", n)
	}
	after, err := f.c.escalateNode(f.ctx, "n1")
	if err != nil || after != 0 {
		t.Fatalf("escalation waits %v (err %v), want it now: the node's turn came with its eviction timeout", after, err)
	}
	if got := evictionsOf(f); !slices.Equal(got, []string{"p"}) {
		t.Errorf("evicted %q at the node's turn, want p", got)
	}
}
