package operator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/drain"
)

// fakePods is the operator's pod client: it lists by node (as the field
// selector does) and evicts, refusing pods a budget covers with 429. An
// evicted pod is gone from the next list.
type fakePods struct {
	mu      sync.Mutex
	pods    []v1.Pod
	budget  map[string]string // pod name → PodDisruptionBudget that refuses it
	evicted []string
	// graces are the grace periods the evictions passed, in order (-1:
	// none, the pod's own).
	graces []int64
	lists  []string // the nodes listed, in order
	// onEvict runs after an accepted eviction (a replacement arriving).
	onEvict func(name string)
}

func (f *fakePods) ListPods(_ context.Context, node string) ([]v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, node)
	var out []v1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, nil
}

func (f *fakePods) Evict(_ context.Context, pod *v1.Pod, grace *int64) error {
	f.mu.Lock()
	f.graces = append(f.graces, ptr.Deref(grace, -1))
	if b := f.budget[pod.Name]; b != "" {
		f.mu.Unlock()
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget " + b + " needs 1 healthy pods and has 1 currently"}}
		return err
	}
	i := slices.IndexFunc(f.pods, func(p v1.Pod) bool { return p.Namespace == pod.Namespace && p.Name == pod.Name })
	if i < 0 {
		f.mu.Unlock()
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
	}
	f.pods = slices.Delete(f.pods, i, i+1)
	f.evicted = append(f.evicted, pod.Name)
	hook := f.onEvict
	f.mu.Unlock()
	if hook != nil {
		hook(pod.Name)
	}
	return nil
}

func (f *fakePods) setBudget(pod, budget string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.budget == nil {
		f.budget = map[string]string{}
	}
	f.budget[pod] = budget
}

func (f *fakePods) evictions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evicted)
}

type podMod func(*v1.Pod)

// mkPod is a ReplicaSet's pod on node n1.
func mkPod(name string, mods ...podMod) v1.Pod {
	yes := true
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: &yes}}},
		Spec: v1.PodSpec{NodeName: "n1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func ofDaemonSet(p *v1.Pod) { p.OwnerReferences[0].Kind = "DaemonSet" }
func mirror(p *v1.Pod)      { p.Annotations = map[string]string{drain.MirrorPodAnnotation: "x"} }
func unowned(p *v1.Pod)     { p.OwnerReferences = nil }
func withEmptyDir(p *v1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
}
func toleratesReadiness(p *v1.Pod) {
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: nodev1alpha1.DefaultReadinessTaintKey, Operator: v1.TolerationOpExists})
}
func onNode(n string) podMod { return func(p *v1.Pod) { p.Spec.NodeName = n } }

// tainted gives the node the readiness taint and a bootID, as the
// node-health controller leaves a node whose agent released its Lease.
func tainted(n *v1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: v1.TaintEffectNoSchedule})
	booted("boot-0")(n)
}
func booted(id string) nodeMod { return func(n *v1.Node) { n.Status.NodeInfo.BootID = id } }

// drainFixture is a node n1 whose agent waits for the drain (spec
// RebootedIntoUpdate, status StagedAndPerformedUpdate) with pods.
func drainFixture(t *testing.T, pods *fakePods, opts Options, nodeMods ...nodeMod) *fixture {
	t.Helper()
	opts.Drain.Client = pods
	opts.Drain.Tuning = drain.Options{InitialBackoff: 5 * time.Second, MaxBackoff: time.Minute, PollInterval: 5 * time.Second}
	return newFixture(t, opts, []*v1.Node{mkNode("n1", nodeMods...)}, []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("n1", rebooted, staged, since(time.Minute))})
}

func (f *fixture) sync(name string) {
	f.t.Helper()
	if err := f.c.syncShadow(f.ctx, name); err != nil {
		f.t.Fatalf("syncShadow(%s): %v", name, err)
	}
}

// stored is the shadow as the fake API server holds it, put back into the
// cache, as the informer would.
func (f *fixture) stored(name string) *updatesv1alpha1.BottlerocketShadow {
	f.t.Helper()
	s, err := f.client.UpdatesV1alpha1().BottlerocketShadows().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	_ = f.shadows.Update(s)
	return s
}

func eventsWith(events []string, reason string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") || strings.HasSuffix(e, " "+reason) {
			out = append(out, e)
		}
	}
	return out
}

// fullEvents drains the recorder, keeping each Event's message.
func (f *fixture) fullEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestTheOperatorDrainsATaintedNodeAndMarksItDrainedForItsBoot(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1"), mkPod("web-2"), mkPod("agent", ofDaemonSet), mkPod("static", mirror, unowned),
		mkPod("controller", toleratesReadiness), mkPod("elsewhere", onNode("n2"))}}
	f := drainFixture(t, pods, defaultOptions(), tainted)

	f.sync("n1") // evicts; the pods terminate
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1", "web-2"}) {
		t.Fatalf("the drain evicted %v, want web-1 and web-2 (no DaemonSet, mirror or tolerating pod)", got)
	}
	if s := f.stored("n1"); s.Annotations[updatesv1alpha1.DrainedAnnotation] != "" {
		t.Fatalf("marked drained while evicted pods were still listed: %v", s.Annotations)
	}
	f.sync("n1") // gone: the last pass, then the mark
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1", "web-2", "controller"}) {
		t.Errorf("evicted %v, want the tolerating pod evicted by the last pass, after the drain", got)
	}
	if got := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Errorf("drained annotation = %q, want the node's bootID boot-0", got)
	}
	for _, node := range pods.lists {
		if node != "n1" {
			t.Errorf("listed the pods of %s", node)
		}
	}
	if got := eventsWith(f.events(), ReasonDrained); len(got) == 0 {
		t.Errorf("no %s Event", ReasonDrained)
	}
	// Marked: nothing more to do in this boot.
	f.client.ClearActions()
	f.sync("n1")
	f.expect(nil)
}

func TestTheOperatorEvictsNothingBeforeTheReadinessTaint(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1")}}
	f := drainFixture(t, pods, defaultOptions(), booted("boot-0"))
	f.sync("n1")
	if got := pods.evictions(); len(got) != 0 {
		t.Fatalf("evicted %v from a node without the readiness taint", got)
	}
	if len(pods.lists) != 0 {
		t.Errorf("listed the pods of an untainted node")
	}
	f.expect(nil)
}

func TestAPodDisruptionBudgetBlockingTheDrainIsNamedAndFailsTheUpdateAtTheTimeout(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1"), mkPod("web-2")}}
	pods.setBudget("web-2", "web-pdb")
	opts := defaultOptions()
	opts.Drain.Timeout = 10 * time.Minute
	f := drainFixture(t, pods, opts, tainted)

	f.sync("n1")
	ev := f.fullEvents()
	if got := eventsWith(ev, ReasonDrainBlocked); len(got) == 0 || !strings.Contains(got[0], "web-pdb") || !strings.Contains(got[0], "default/web-2") ||
		!strings.HasPrefix(got[0], "Warning") {
		t.Fatalf("events %q, want a Warning %s naming web-pdb and default/web-2", ev, ReasonDrainBlocked)
	}
	if d := f.timers["n1"]; len(d) == 0 || d[len(d)-1] > 5*time.Second {
		t.Errorf("timers %v: the drain must look again within its poll interval", d)
	}
	f.sync("n1") // the same block: not announced again
	if got := eventsWith(f.fullEvents(), ReasonDrainBlocked); len(got) != 0 {
		t.Errorf("the same block was announced again: %q", got)
	}
	f.client.ClearActions()
	f.clock.Step(10 * time.Minute)
	f.sync("n1")
	f.expect([]string{"update n1 Idle 1.20.0 failed=DrainBlocked:"})
	s := f.stored("n1")
	if msg := s.Annotations[updatesv1alpha1.FailureReasonAnnotation]; !strings.Contains(msg, "web-pdb") {
		t.Errorf("failure reason %q does not name the budget", msg)
	}
	if s.Annotations[updatesv1alpha1.DrainedAnnotation] != "" {
		t.Errorf("a failed drain marked the node drained")
	}
}

func TestAPodWithoutAControllerBlocksTheDrainAndIsNamedUnlessForced(t *testing.T) {
	for _, force := range []bool{false, true} {
		pods := &fakePods{pods: []v1.Pod{mkPod("bare", unowned), mkPod("cache", withEmptyDir)}}
		opts := defaultOptions()
		opts.Drain.Overrides = drain.Overrides{Force: force, DeleteEmptyDirData: true}
		f := drainFixture(t, pods, opts, tainted)
		f.sync("n1")
		f.sync("n1")
		drained := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation] == "boot-0"
		if force {
			if !drained || !slices.Contains(pods.evictions(), "bare") {
				t.Errorf("force: evicted %v, drained %v; want the bare pod evicted and the node drained", pods.evictions(), drained)
			}
			continue
		}
		if drained || slices.Contains(pods.evictions(), "bare") {
			t.Errorf("without force: evicted %v, drained %v; want the bare pod left and the drain blocked", pods.evictions(), drained)
		}
		if !slices.Contains(pods.evictions(), "cache") {
			t.Errorf("deleteEmptyDirData: the pod with emptyDir data was not evicted (%v)", pods.evictions())
		}
		if got := eventsWith(f.fullEvents(), ReasonDrainBlocked); len(got) == 0 || !strings.Contains(got[0], "default/bare") || !strings.Contains(got[0], "force") {
			t.Errorf("events %q, want %s naming default/bare and force", got, ReasonDrainBlocked)
		}
	}
}

func TestANewOperatorLeaderFinishesADrainTheOldOneBegan(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1"), mkPod("web-2")}}
	pods.setBudget("web-2", "web-pdb")
	old := drainFixture(t, pods, defaultOptions(), tainted)
	old.sync("n1") // web-1 evicted, web-2 refused; the old leader dies here
	pods.setBudget("web-2", "")

	leader := drainFixture(t, pods, defaultOptions(), tainted)
	leader.sync("n1")
	leader.sync("n1")
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1", "web-2"}) {
		t.Errorf("evicted %v, want web-1 once (by the old leader) and web-2", got)
	}
	if got := leader.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Errorf("drained = %q, want boot-0: the new leader must finish the drain", got)
	}
}

func TestADrainOfAnEarlierBootOrAttemptNeverCountsAsThisOnes(t *testing.T) {
	// A drained annotation of another boot: drain again.
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1")}}
	f := newFixture(t, withDrain(defaultOptions(), pods), []*v1.Node{mkNode("n1", tainted, booted("boot-1"))}, []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("n1", rebooted, staged, since(time.Minute), annotate(updatesv1alpha1.DrainedAnnotation, "boot-0"))})
	f.sync("n1")
	f.sync("n1")
	if got := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-1" || !slices.Equal(pods.evictions(), []string{"web-1"}) {
		t.Errorf("drained = %q, evicted %v; want a new drain for boot-1", got, pods.evictions())
	}
	// Every change of spec removes it: an attempt called off before its
	// reboot leaves nothing the next attempt in the same boot could take
	// for its own drain.
	f.client.ClearActions()
	s := f.stored("n1")
	if err := f.c.writeSpec(f.ctx, s, idle, s.Spec.Version, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; ok {
		t.Errorf("drained = %q after spec moved to Idle, want it removed", got)
	}
}

func withDrain(o Options, pods *fakePods) Options {
	o.Drain.Client = pods
	return o
}

// TestTheDrainLeavesPodsThatTolerateTheReadinessTaintToTheLastPass: the
// controller's and the operator's pods tolerate the readiness taint, and an
// evicted one comes straight back onto the uncordoned node while its
// PodDisruptionBudget refuses the next eviction: evicted during the drain,
// they kept it from ever finishing. The drain leaves them; the last pass,
// right before the node is marked drained, evicts them without waiting, and
// names a budget that refuses then (the pod stops with the reboot).
func TestTheDrainLeavesPodsThatTolerateTheReadinessTaintToTheLastPass(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1"), mkPod("operator", toleratesReadiness), mkPod("controller", toleratesReadiness)}}
	pods.setBudget("controller", "controller-pdb")
	f := drainFixture(t, pods, defaultOptions(), tainted)
	f.sync("n1")
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1"}) {
		t.Fatalf("the drain evicted %v, want only web-1", got)
	}
	f.sync("n1")
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1", "operator"}) {
		t.Errorf("evicted %v, want the tolerating operator pod evicted by the last pass", got)
	}
	if got := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Errorf("drained = %q: a budget refusing the last pass must not hold the drain", got)
	}
	ev := f.fullEvents()
	if got := eventsWith(ev, ReasonDrainBlocked); len(got) != 0 {
		t.Errorf("the drain was reported blocked: %q", got)
	}
	if got := eventsWith(ev, ReasonNotEvictedBeforeReboot); len(got) == 0 || !strings.Contains(got[0], "controller-pdb") || !strings.Contains(got[0], "default/controller") {
		t.Errorf("events %q, want a Warning %s naming default/controller and controller-pdb", ev, ReasonNotEvictedBeforeReboot)
	}
}

// TestAPodThatLandsWhileTheHostRefusesTheRebootIsEvictedByTheNextPass: the
// node is marked drained and its agent asked for the reboot, but the host
// refuses it (a shutdown inhibitor) and the agent asks again after a
// back-off. A pod that tolerates the taint may land meanwhile: the operator
// passes again every poll interval until the node reboots.
func TestAPodThatLandsWhileTheHostRefusesTheRebootIsEvictedByTheNextPass(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("late", toleratesReadiness), mkPod("agent", ofDaemonSet)}}
	opts := withDrain(defaultOptions(), pods)
	opts.Drain.Tuning.PollInterval = 5 * time.Second
	f := newFixture(t, opts, []*v1.Node{mkNode("n1", tainted)}, []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("n1", rebooted, staged, since(time.Minute), annotate(updatesv1alpha1.DrainedAnnotation, "boot-0"),
			func(s *updatesv1alpha1.BottlerocketShadow) { s.Status.RebootFromBootID = "boot-0" })})
	f.sync("n1")
	if got := pods.evictions(); !slices.Equal(got, []string{"late"}) {
		t.Errorf("evicted %v, want the pod that landed after the drain", got)
	}
	if d := f.timers["n1"]; !slices.Contains(d, 5*time.Second) {
		t.Errorf("timers %v, want the next pass in the poll interval (5s)", d)
	}
	f.expect(nil) // no shadow write
}

func withLabel(k, v string) podMod {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

func policyDrainOf(pd updatesv1alpha1.PolicyDrain) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.Drain = &pd }
}

// policyDrainFixture is drainFixture with the node's update started by
// fleet, a policy with the given spec.drain.
func policyDrainFixture(t *testing.T, pods *fakePods, pd *updatesv1alpha1.PolicyDrain) *fixture {
	t.Helper()
	opts := defaultOptions()
	opts.Drain.Client = pods
	opts.Drain.Overrides = drain.Overrides{DeleteEmptyDirData: true} // the configuration's defaults
	opts.Drain.Tuning = drain.Options{InitialBackoff: 5 * time.Second, MaxBackoff: time.Minute, PollInterval: 5 * time.Second}
	pol := fleet()
	pol.Spec.Drain = pd
	return newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{pol}, []*v1.Node{mkNode("n1", tainted)},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", rebooted, staged, since(time.Minute), startedBy("fleet"))})
}

// TestAPolicysDrainOptionsTakeOverTheConfigurations: the policy's force,
// deleteEmptyDirData, gracePeriodSeconds and timeout replace the
// configuration's, and the pods its skipPodSelector selects are neither
// evicted nor waited for nor named.
func TestAPolicysDrainOptionsTakeOverTheConfigurations(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1"), mkPod("keep", withLabel("example.com/drain", "skip")), mkPod("lonely", unowned),
		mkPod("scratch", withEmptyDir)}}
	f := policyDrainFixture(t, pods, &updatesv1alpha1.PolicyDrain{
		Timeout: &metav1.Duration{Duration: 2 * time.Minute}, GracePeriodSeconds: ptr.To[int64](30),
		Force: ptr.To(true), DeleteEmptyDirData: ptr.To(false),
		SkipPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/drain": "skip"}}})

	f.sync("n1")
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1", "lonely"}) {
		t.Fatalf("evicted %v, want web-1 and, forced, lonely (keep skipped, scratch left for its emptyDir)", got)
	}
	if !slices.Equal(pods.graces, []int64{30, 30}) {
		t.Errorf("grace periods %v, want the policy's 30 s on each eviction", pods.graces)
	}
	blocked := strings.Join(eventsWith(f.fullEvents(), ReasonDrainBlocked), "\n")
	if !strings.Contains(blocked, "scratch") || strings.Contains(blocked, "keep") {
		t.Errorf("DrainBlocked %q: want scratch named and keep not", blocked)
	}
	f.clock.Step(2 * time.Minute) // the policy's timeout, not the configuration's 10m
	f.sync("n1")
	reason := f.stored("n1").Annotations[updatesv1alpha1.FailureReasonAnnotation]
	if !strings.Contains(reason, "within 2m0s") || !strings.Contains(reason, "scratch") || strings.Contains(reason, "keep") {
		t.Errorf("failure %q: want the policy's 2m timeout naming scratch, not keep", reason)
	}
}

// TestAPodThePolicySkipsStaysThroughTheDrainAndTheLastPass: the drain ends
// with the skipped pod still running, the last pass leaves it too, and the
// policy's unset fields take the configuration's (emptyDir data evicted).
func TestAPodThePolicySkipsStaysThroughTheDrainAndTheLastPass(t *testing.T) {
	pods := &fakePods{pods: []v1.Pod{mkPod("web-1", withEmptyDir), mkPod("keep", withLabel("example.com/drain", "skip"), toleratesReadiness)}}
	f := policyDrainFixture(t, pods, &updatesv1alpha1.PolicyDrain{
		SkipPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/drain": "skip"}}})
	f.sync("n1")
	f.sync("n1")
	if got := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation]; got != "boot-0" {
		t.Fatalf("drained annotation %q, want boot-0", got)
	}
	if got := pods.evictions(); !slices.Equal(got, []string{"web-1"}) {
		t.Errorf("evicted %v, want only web-1: keep is skipped, by the last pass too", got)
	}
	if !slices.Equal(pods.graces, []int64{-1}) {
		t.Errorf("grace periods %v, want none set: the pod's own", pods.graces)
	}
}

// TestAPolicysDrainThatTheDeadlinesCannotHoldIsRefused: a timeout not
// shorter than the RebootedIntoUpdate deadline, a grace period out of
// range or a selector that does not parse make the policy invalid.
func TestAPolicysDrainThatTheDeadlinesCannotHoldIsRefused(t *testing.T) {
	for name, pd := range map[string]updatesv1alpha1.PolicyDrain{
		"timeout as long as the deadline": {Timeout: &metav1.Duration{Duration: rebootDL}},
		"zero timeout":                    {Timeout: &metav1.Duration{}},
		"negative grace":                  {GracePeriodSeconds: ptr.To[int64](-1)},
		"grace over a day":                {GracePeriodSeconds: ptr.To[int64](MaxGracePeriodSeconds + 1)},
		"bad selector": {SkipPodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "a", Operator: "Near"}}}},
	} {
		if pol := parsePolicy(fleet(policyDrainOf(pd)), defaultOptions().Deadlines); !strings.HasPrefix(pol.invalid, "spec.drain") {
			t.Errorf("%s: invalid = %q, want spec.drain refused", name, pol.invalid)
		}
	}
	if pol := parsePolicy(fleet(policyDrainOf(updatesv1alpha1.PolicyDrain{Timeout: &metav1.Duration{Duration: rebootDL - time.Second},
		GracePeriodSeconds: ptr.To[int64](0)})), defaultOptions().Deadlines); pol.invalid != "" {
		t.Errorf("a timeout just under the deadline and a grace period of 0 refused: %s", pol.invalid)
	}
}
