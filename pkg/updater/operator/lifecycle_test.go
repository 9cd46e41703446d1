package operator

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned/fake"
	"nodehealth.io/client-go/informers/externalversions"
)

// nodeStatuses records the Node status patches: "NODE TYPE=STATUS/REASON,
// ..." in patch order, plus " resourceVersion=RV" when the patch carries one.
type nodeStatuses struct {
	mu      sync.Mutex
	patches []string
	err     error
	// lost patches are applied (recorded) and then answered with a
	// timeout, as when the API server's answer never reaches the operator.
	lost int
}

func (n *nodeStatuses) PatchStatus(_ context.Context, name string, data []byte) (*v1.Node, error) {
	var p struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Status   v1.NodeStatus     `json:"status"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	var parts []string
	for _, c := range p.Status.Conditions {
		parts = append(parts, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	s := name + " " + strings.Join(parts, ",")
	if p.Metadata.ResourceVersion != "" {
		s += " resourceVersion=" + p.Metadata.ResourceVersion
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return nil, n.err
	}
	n.patches = append(n.patches, s)
	if n.lost > 0 {
		n.lost--
		return nil, apierrors.NewTimeoutError("the answer was lost", 0)
	}
	return &v1.Node{}, nil
}

func (f *fixture) nodePatches() []string {
	n := f.c.opts.Nodes.(*nodeStatuses)
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.patches
	n.patches = nil
	return out
}

func (f *fixture) expectNodePatches(want ...string) {
	f.t.Helper()
	if got := f.nodePatches(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("node status patches:\n  got  %q\n  want %q", got, want)
	}
}

const (
	bru    = nodev1alpha1.LifecycleReasonBottlerocketUpdate
	failed = nodev1alpha1.LifecycleReasonUpdateFailed
	admin  = "AdminRequested"
	mp     = nodev1alpha1.LifecycleConditionMaintenancePlanned
	mip    = nodev1alpha1.LifecycleConditionMaintenanceInProgress
	dip    = nodev1alpha1.LifecycleConditionDrainInProgress
	dr     = nodev1alpha1.LifecycleConditionDrained
)

func cond(kind string, status v1.ConditionStatus, reason string) nodeMod {
	return func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeConditionType(kind), Status: status, Reason: reason})
	}
}
func boot(id string) nodeMod { return func(n *v1.Node) { n.Status.NodeInfo.BootID = id } }
func readinessTainted(n *v1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: v1.TaintEffectNoSchedule})
}

// TestEachStepOfAnUpdatePatchesTheNodesLifecycleConditions lists the status
// patch of each step of an update, from the node's conditions as the
// previous step left them.
func TestEachStepOfAnUpdatePatchesTheNodesLifecycleConditions(t *testing.T) {
	drainedIn := func(b string) shadowMod { return annotate(updatesv1alpha1.DrainedAnnotation, b) }
	cases := []struct {
		name   string
		node   *v1.Node
		shadow *updatesv1alpha1.BottlerocketShadow // nil: deleted
		dryRun bool
		want   []string
	}{
		{name: "an idle node without conditions: nothing", node: mkNode("n1"), shadow: mkShadow("n1", idle, idle)},
		{name: "chosen: MaintenancePlanned", node: mkNode("n1"), shadow: mkShadow("n1", staged, idle),
			want: []string{"n1 MaintenancePlanned=True/BottlerocketUpdate"}},
		{name: "chosen, already said: nothing", node: mkNode("n1", cond(mp, v1.ConditionTrue, bru)), shadow: mkShadow("n1", staged, staged)},
		{name: "planned release: planned over, in progress",
			node: mkNode("n1", boot("b1"), cond(mp, v1.ConditionTrue, bru)), shadow: mkShadow("n1", rebooted, staged),
			want: []string{"n1 MaintenancePlanned=False/BottlerocketUpdate,MaintenanceInProgress=True/BottlerocketUpdate"}},
		{name: "drain running",
			node:   mkNode("n1", boot("b1"), readinessTainted, cond(mp, v1.ConditionFalse, bru), cond(mip, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", rebooted, staged), want: []string{"n1 DrainInProgress=True/BottlerocketUpdate"}},
		{name: "drain done",
			node: mkNode("n1", boot("b1"), readinessTainted, cond(mp, v1.ConditionFalse, bru), cond(mip, v1.ConditionTrue, bru),
				cond(dip, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", rebooted, staged, drainedIn("b1")),
			want:   []string{"n1 DrainInProgress=False/BottlerocketUpdate,Drained=True/BottlerocketUpdate"}},
		{name: "waiting for the reboot: nothing",
			node: mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionFalse, bru),
				cond(dr, v1.ConditionTrue, bru)),
			shadow: func() *updatesv1alpha1.BottlerocketShadow {
				s := mkShadow("n1", rebooted, staged, drainedIn("b1"))
				s.Status.RebootFromBootID = "b1"
				return s
			}()},
		{name: "rebooted into the new boot: no longer drained",
			node: mkNode("n1", boot("b2"), readinessTainted, cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionFalse, bru),
				cond(dr, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", rebooted, rebooted, running(newV), drainedIn("b1")),
			want:   []string{"n1 Drained=False/BottlerocketUpdate"}},
		{name: "soaking: nothing",
			node:   mkNode("n1", boot("b2"), cond(mip, v1.ConditionTrue, bru), cond(dr, v1.ConditionFalse, bru)),
			shadow: mkShadow("n1", monitor, monitor, running(newV))},
		{name: "back in Idle: all ours False",
			node: mkNode("n1", boot("b2"), cond(mp, v1.ConditionFalse, bru), cond(mip, v1.ConditionTrue, bru),
				cond(dip, v1.ConditionFalse, bru), cond(dr, v1.ConditionFalse, bru)),
			shadow: mkShadow("n1", idle, idle, running(newV)),
			want:   []string{"n1 MaintenanceInProgress=False/BottlerocketUpdate"}},
		{name: "aborted before the reboot: all ours False",
			node:   mkNode("n1", cond(mp, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", idle, errReset, crashed(1, t0)),
			want:   []string{"n1 MaintenancePlanned=False/BottlerocketUpdate"}},
		{name: "aborted during the drain: all ours False",
			node:   mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", idle, errReset, crashed(1, t0)),
			want:   []string{"n1 MaintenanceInProgress=False/BottlerocketUpdate,DrainInProgress=False/BottlerocketUpdate"}},
		{name: "halted by a failure: in progress, UpdateFailed",
			node:   mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", idle, staged, failedAt(t0), func(s *updatesv1alpha1.BottlerocketShadow) { s.Spec.StateTransitionTimestamp = &metav1.Time{Time: t0} }),
			want:   []string{"n1 MaintenanceInProgress=True/UpdateFailed,DrainInProgress=False/BottlerocketUpdate"}},
		{name: "halted, already said: nothing",
			node:   mkNode("n1", cond(mip, v1.ConditionTrue, failed), cond(dip, v1.ConditionFalse, bru)),
			shadow: mkShadow("n1", idle, idle, failedAt(t0))},
		{name: "resumed: all ours False",
			node:   mkNode("n1", cond(mip, v1.ConditionTrue, failed), cond(dip, v1.ConditionFalse, bru)),
			shadow: mkShadow("n1", idle, idle, failedAt(t0), resumedAt(t0)),
			want:   []string{"n1 MaintenanceInProgress=False/BottlerocketUpdate"}},
		{name: "shadow deleted: all ours False",
			node: mkNode("n1", boot("b1"), cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionTrue, bru), cond(dr, v1.ConditionFalse, bru),
				cond(mp, v1.ConditionTrue, admin)),
			want: []string{"n1 MaintenanceInProgress=False/BottlerocketUpdate,DrainInProgress=False/BottlerocketUpdate"}},
		{name: "another writer's True conditions are never touched",
			node: mkNode("n1", boot("b1"), readinessTainted, cond(mp, v1.ConditionTrue, admin), cond(dip, v1.ConditionTrue, admin),
				cond(dr, v1.ConditionTrue, nodev1alpha1.LifecycleReasonExtensionFailed)),
			shadow: mkShadow("n1", rebooted, staged),
			want:   []string{"n1 MaintenanceInProgress=True/BottlerocketUpdate"}},
		{name: "another writer's True conditions are not cleared in Idle either",
			node:   mkNode("n1", cond(mip, v1.ConditionTrue, admin), cond(dip, v1.ConditionTrue, nodev1alpha1.LifecycleReasonExtensionFailed)),
			shadow: mkShadow("n1", idle, idle)},
		{name: "another writer's False condition is not taken over, even to say True",
			node:   mkNode("n1", boot("b1"), readinessTainted, cond(mp, v1.ConditionFalse, admin), cond(dip, v1.ConditionFalse, admin), cond(mip, v1.ConditionTrue, bru)),
			shadow: mkShadow("n1", rebooted, staged)},
		{name: "the node-health controller's False condition is taken over to say True",
			node: mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru),
				cond(dip, v1.ConditionFalse, nodev1alpha1.LifecycleReasonExtensionFailed), cond(dr, v1.ConditionFalse, nodev1alpha1.LifecycleReasonExtensionFailed)),
			shadow: mkShadow("n1", rebooted, staged),
			want:   []string{"n1 DrainInProgress=True/BottlerocketUpdate"}},
		{name: "a node created again under the shadow's name: nothing",
			node:   mkNode("n1", cond(mip, v1.ConditionTrue, bru), func(n *v1.Node) { n.UID = "other" }),
			shadow: mkShadow("n1", idle, idle)},
		{name: "dry run writes nothing", dryRun: true, node: mkNode("n1"), shadow: mkShadow("n1", staged, idle)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions()
			opts.DryRun = tc.dryRun
			var shadows []*updatesv1alpha1.BottlerocketShadow
			if tc.shadow != nil {
				shadows = append(shadows, tc.shadow)
			}
			f := newFixture(t, opts, []*v1.Node{tc.node}, shadows)
			if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			f.expectNodePatches(tc.want...)
			f.expect(nil)
		})
	}
}

// TestTheOperatorWritesNoLifecycleConditionAtSteadyState syncs a node again
// and again, before and after its informer shows the operator's write.
func TestTheOperatorWritesNoLifecycleConditionAtSteadyState(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, idle)})
	for range 3 {
		if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	f.expectNodePatches("n1 MaintenancePlanned=True/BottlerocketUpdate")
	_ = f.nodes.Update(mkNode("n1", cond(mp, v1.ConditionTrue, bru)))
	if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectNodePatches()
	if got := distinct(f.events()); strings.Join(got, ",") != "Normal "+ReasonLifecycleConditions {
		t.Errorf("events = %v, want one %s", got, ReasonLifecycleConditions)
	}
}

// TestALaggingNodeCacheDoesNotHideTheOperatorsLastWrite: the drain's
// DrainInProgress=True is written, and the drain is done before the
// informer shows it; the next write still clears it.
func TestALaggingNodeCacheDoesNotHideTheOperatorsLastWrite(t *testing.T) {
	node := mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru))
	f := newFixture(t, defaultOptions(), []*v1.Node{node}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", rebooted, staged)})
	if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectNodePatches("n1 DrainInProgress=True/BottlerocketUpdate")
	_ = f.shadows.Update(mkShadow("n1", rebooted, staged, annotate(updatesv1alpha1.DrainedAnnotation, "b1")))
	if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectNodePatches("n1 DrainInProgress=False/BottlerocketUpdate,Drained=True/BottlerocketUpdate")
}

// TestAHaltHoldsMaintenanceInProgressUntilResumed walks a failure after the
// reboot through its halt and resume.
func TestAHaltHoldsMaintenanceInProgressUntilResumed(t *testing.T) {
	node := mkNode("n1", boot("b2"), cond(mip, v1.ConditionTrue, bru), cond(dr, v1.ConditionFalse, bru))
	s := mkShadow("n1", monitor, monitor, running(newV), since(monitorDL))
	f := newFixture(t, defaultOptions(), []*v1.Node{node}, []*updatesv1alpha1.BottlerocketShadow{s})
	step := func(want ...string) {
		t.Helper()
		if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		f.expectNodePatches(want...)
	}
	step()
	// The monitoring deadline passed: the operator fails the update.
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	halted := f.client.Actions()[0].(clienttesting.UpdateAction).GetObject().(*updatesv1alpha1.BottlerocketShadow)
	f.client.ClearActions()
	_ = f.shadows.Update(halted)
	step("n1 MaintenanceInProgress=True/UpdateFailed")
	step()
	resumed := halted.DeepCopy()
	resumed.Annotations[updatesv1alpha1.ResumeAnnotation] = resumed.Annotations[updatesv1alpha1.FailedAnnotation]
	_ = f.shadows.Update(resumed)
	step("n1 MaintenanceInProgress=False/BottlerocketUpdate")
}

// TestAFailedLifecycleWriteDoesNotHoldTheUpdateUp: the shadow moves on when
// the Node's status patch is refused (an installation without the
// nodes/status grant), and the key is retried.
func TestAFailedLifecycleWriteDoesNotHoldTheUpdateUp(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, staged, since(time.Minute))})
	f.c.opts.Nodes.(*nodeStatuses).err = errors.New("forbidden")
	f.c.queue.Add("n1")
	f.c.processNext(f.ctx)
	f.expect([]string{"update n1 RebootedIntoUpdate 1.20.0"})
	if n := f.c.queue.NumRequeues("n1"); n != 1 {
		t.Errorf("requeues = %d, want 1", n)
	}
}

func TestTheOperatorRequiresANodeStatusClient(t *testing.T) {
	opts := defaultOptions()
	opts.Nodes = nil
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	client := fake.NewSimpleClientset()
	sf := externalversions.NewSharedInformerFactory(client, 0)
	_, err := NewController(Config{Client: client, Nodes: kf.Core().V1().Nodes(), Shadows: sf.Updates().V1alpha1().BottlerocketShadows(),
		Policies: sf.Updates().V1alpha1().UpdatePolicies(), Clock: testingclock.NewFakeClock(t0), Options: opts})
	if err == nil || !strings.Contains(err.Error(), "Node status client") {
		t.Fatalf("NewController without a Node status client: %v", err)
	}
}

// TestAConditionTheOperatorLeftToAnotherWriterIsNotTakenForItsOwn: an admin's
// DrainInProgress=True holds the condition through the operator's drain, and
// is removed before the drain is done. The operator never wrote it, so it
// does not clear it either.
func TestAConditionTheOperatorLeftToAnotherWriterIsNotTakenForItsOwn(t *testing.T) {
	node := mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru), cond(dip, v1.ConditionTrue, admin))
	f := newFixture(t, defaultOptions(), []*v1.Node{node}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", rebooted, staged)})
	if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectNodePatches()
	_ = f.nodes.Update(mkNode("n1", boot("b1"), readinessTainted, cond(mip, v1.ConditionTrue, bru)))
	_ = f.shadows.Update(mkShadow("n1", rebooted, staged, annotate(updatesv1alpha1.DrainedAnnotation, "b1")))
	if err := f.c.syncLifecycle(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expectNodePatches("n1 Drained=True/BottlerocketUpdate")
}

// TestALifecycleWriteWhoseAnswerWasLostIsNotTakenAsUnwritten: the abort's
// MaintenancePlanned=False is applied and its answer lost; the node is then
// chosen again while the informer still shows the first write (True). The
// node may hold either, and neither the record of the first write nor the
// informer can tell: the operator says True again at once. Waiting for the
// informer to show the lost write would wait for nothing, since an update
// of the operator's own conditions does not bring a node's sync back
// (nodeUpdateMatters): MaintenancePlanned stayed False on a chosen node (the
// controller's seed 7076218198261422834 is the same defect).
func TestALifecycleWriteWhoseAnswerWasLostIsNotTakenAsUnwritten(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1")}, []*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", staged, idle)})
	sync := func(wantErr bool, want ...string) {
		t.Helper()
		if err := f.c.syncLifecycle(f.ctx, "n1"); (err != nil) != wantErr {
			t.Fatalf("syncLifecycle: %v, want an error: %v", err, wantErr)
		}
		f.expectNodePatches(want...)
	}
	sync(false, "n1 MaintenancePlanned=True/BottlerocketUpdate")
	_ = f.nodes.Update(mkNode("n1", cond(mp, v1.ConditionTrue, bru)))

	f.c.opts.Nodes.(*nodeStatuses).lost = 1
	_ = f.shadows.Update(mkShadow("n1", idle, errReset, crashed(1, t0)))
	sync(true, "n1 MaintenancePlanned=False/BottlerocketUpdate")

	// Chosen again while the informer still shows the first write.
	_ = f.shadows.Update(mkShadow("n1", staged, idle))
	sync(false, "n1 MaintenancePlanned=True/BottlerocketUpdate")
	// The informer shows the write whose answer was lost: the last write
	// counts over it.
	_ = f.nodes.Update(mkNode("n1", cond(mp, v1.ConditionFalse, bru)))
	sync(false)
}

// secondReadTainted is a Node lister whose first Get of each name returns the
// node without the readiness taint and every later one with it: the taint
// reaches the cache between two reads of one sync.
type secondReadTainted struct {
	corelisters.NodeLister
	read map[string]int
}

func (l *secondReadTainted) Get(name string) (*v1.Node, error) {
	n, err := l.NodeLister.Get(name)
	if err != nil {
		return n, err
	}
	l.read[name]++
	n = n.DeepCopy()
	if l.read[name] > 1 {
		readinessTainted(n)
	}
	return n, nil
}

// A sync announces the drain (DrainInProgress) and drains on one read of
// the node: the readiness taint the drain waits for reaching the cache
// between the lifecycle's read and the drain's let a drain done in its first
// pass go unannounced (the rolling update's integration test, 2026-11-30:
// roll-2 went from MaintenanceInProgress straight to Drained).
func TestADrainIsAnnouncedOnTheReadOfTheNodeItRunsOn(t *testing.T) {
	f := newFixture(t, defaultOptions(), []*v1.Node{mkNode("n1", boot("b1"), cond(mip, v1.ConditionTrue, bru))},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("n1", rebooted, staged)})
	f.c.nodeLister = &secondReadTainted{NodeLister: f.c.nodeLister, read: map[string]int{}}
	if err := f.c.sync(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	announced := slices.ContainsFunc(f.nodePatches(), func(p string) bool { return strings.Contains(p, "DrainInProgress=True") })
	if drained := f.stored("n1").Annotations[updatesv1alpha1.DrainedAnnotation] != ""; drained && !announced {
		t.Errorf("the node was drained without DrainInProgress said: node status patches %q", f.nodePatches())
	}
}
