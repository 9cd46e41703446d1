package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater/brapi"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
)

const nodeName = "node-1"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeShadows is an API server for one shadow: resourceVersions, conflicts,
// spec writes by the test (the operator) and status writes by the agent.
type fakeShadows struct {
	mu     sync.Mutex
	shadow *updatesv1alpha1.BottlerocketShadow
	rv     int
	writes int
	// loseNext status writes are applied but their answer is lost, as when
	// the connection drops after the API server committed the write.
	loseNext int
	// conflictNext status writes are refused with 409 and not applied, as
	// when the operator wrote the shadow after the agent read it.
	conflictNext int
}

var errAnswerLost = errors.New("http2: client connection lost")

var shadowResource = schema.GroupResource{Group: "updates.nodehealth.io", Resource: "bottlerocketshadows"}

func (f *fakeShadows) GetShadow(_ context.Context, name string) (*updatesv1alpha1.BottlerocketShadow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shadow == nil || f.shadow.Name != name {
		return nil, apierrors.NewNotFound(shadowResource, name)
	}
	return f.shadow.DeepCopy(), nil
}

func (f *fakeShadows) UpdateShadowStatus(_ context.Context, s *updatesv1alpha1.BottlerocketShadow) (*updatesv1alpha1.BottlerocketShadow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shadow == nil || f.shadow.Name != s.Name {
		return nil, apierrors.NewNotFound(shadowResource, s.Name)
	}
	if s.ResourceVersion != f.shadow.ResourceVersion || f.conflictNext > 0 {
		if f.conflictNext > 0 {
			f.conflictNext--
		}
		return nil, apierrors.NewConflict(shadowResource, s.Name, errors.New("the object has been modified"))
	}
	f.rv++
	f.writes++
	f.shadow.Status = *s.Status.DeepCopy()
	f.shadow.ResourceVersion = strconv.Itoa(f.rv)
	if f.loseNext > 0 {
		f.loseNext--
		return nil, errAnswerLost
	}
	return f.shadow.DeepCopy(), nil
}

// create plays the operator creating the shadow with spec Idle.
func (f *fakeShadows) create() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	f.shadow = &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, ResourceVersion: strconv.Itoa(f.rv)},
		Spec:       updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle},
	}
}

// setSpec plays the operator writing spec, which removes the drained
// annotation as the operator's every spec write does.
func (f *fakeShadows) setSpec(state updatesv1alpha1.ShadowState, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	f.shadow.Spec.State, f.shadow.Spec.Version = state, version
	delete(f.shadow.Annotations, updatesv1alpha1.DrainedAnnotation)
	f.shadow.ResourceVersion = strconv.Itoa(f.rv)
}

// setDrained plays the operator recording its drain for bootID.
func (f *fakeShadows) setDrained(bootID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	if f.shadow.Annotations == nil {
		f.shadow.Annotations = map[string]string{}
	}
	f.shadow.Annotations[updatesv1alpha1.DrainedAnnotation] = bootID
	f.shadow.ResourceVersion = strconv.Itoa(f.rv)
}

// annotate plays the operator writing an annotation (value "": removed).
func (f *fakeShadows) annotate(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	if f.shadow.Annotations == nil {
		f.shadow.Annotations = map[string]string{}
	}
	if value == "" {
		delete(f.shadow.Annotations, key)
	} else {
		f.shadow.Annotations[key] = value
	}
	f.shadow.ResourceVersion = strconv.Itoa(f.rv)
}

// setIgnoreWaves sets spec.ignoreWaves, as the operator does from a pinned
// policy when it starts the node.
func (f *fakeShadows) setIgnoreWaves(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	f.shadow.Spec.IgnoreWaves = on
	f.shadow.ResourceVersion = strconv.Itoa(f.rv)
}

func (f *fakeShadows) get() *updatesv1alpha1.BottlerocketShadow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shadow.DeepCopy()
}

// fakeNode is the agent's Node; the emulator's reboot hook changes its bootID.
type fakeNode struct {
	mu   sync.Mutex
	node *v1.Node
}

func (f *fakeNode) GetNode(_ context.Context, name string) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return f.node.DeepCopy(), nil
}

func (f *fakeNode) bootID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node.Status.NodeInfo.BootID
}

func (f *fakeNode) setBootID(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node.Status.NodeInfo.BootID = id
}

func (f *fakeNode) setTaint(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var taints []v1.Taint
	for _, t := range f.node.Spec.Taints {
		if t.Key != "nodehealth.io/not-ready" {
			taints = append(taints, t)
		}
	}
	if on {
		taints = append(taints, v1.Taint{Key: "nodehealth.io/not-ready", Effect: v1.TaintEffectNoSchedule})
	}
	f.node.Spec.Taints = taints
}

func (f *fakeNode) tainted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nodeutil.HasTaint(f.node, "nodehealth.io/not-ready", "")
}

// leaseCall is one call of the Lease.
type leaseCall struct {
	release bool
	reason  string
	bootID  string // the Node's bootID at the call
}

type fakeLease struct {
	mu    sync.Mutex
	node  *fakeNode
	held  bool
	calls []leaseCall
}

func (f *fakeLease) Release(_ context.Context, reason, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = false
	f.calls = append(f.calls, leaseCall{release: true, reason: reason, bootID: f.node.bootID()})
	return nil
}

func (f *fakeLease) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = true
	f.calls = append(f.calls, leaseCall{bootID: f.node.bootID()})
}

func (f *fakeLease) isHeld() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *fakeLease) releases() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.release {
			out = append(out, c.reason)
		}
	}
	return out
}

// fakePods are the node's pods, which the fake operator drains (the agent
// holds no pod client): an evicted pod is gone at once; budget[pod] names a
// PodDisruptionBudget refusing its eviction.
type fakePods struct {
	mu      sync.Mutex
	pods    []v1.Pod
	budget  map[string]string
	evicted []string
	// taintAtEviction records, per eviction, whether the node was tainted.
	node            *fakeNode
	taintAtEviction []bool
	// onEvict runs at each accepted eviction, after the pod is gone.
	onEvict func(name string)
	// comeBack names pods re-created on the node under a new UID as soon
	// as they are evicted, as the scheduler puts a Deployment's pod that
	// tolerates the readiness taint straight back onto the uncordoned node.
	comeBack  map[string]bool
	recreated int
}

func (f *fakePods) ListPods(_ context.Context, node string) ([]v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []v1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, nil
}

func (f *fakePods) Evict(_ context.Context, pod *v1.Pod, _ *int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.budget[pod.Name]; b != "" {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs 1 healthy pods and has 1 currently", b)}}
		return err
	}
	for i, p := range f.pods {
		if p.Name == pod.Name && p.Namespace == pod.Namespace {
			f.pods = append(f.pods[:i], f.pods[i+1:]...)
			f.evicted = append(f.evicted, pod.Name)
			f.taintAtEviction = append(f.taintAtEviction, f.node.tainted())
			if f.comeBack[p.Name] {
				f.recreated++
				p.UID = types.UID(fmt.Sprintf("uid-%s-%d", p.Name, f.recreated))
				f.pods = append(f.pods, p)
			}
			if f.onEvict != nil {
				f.onEvict(pod.Name)
			}
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, pod.Name)
}

// drain plays the operator's drain: it evicts every pod but DaemonSet and
// mirror pods and reports whether none was refused.
func (f *fakePods) drain() bool {
	pods, _ := f.ListPods(context.Background(), nodeName)
	done := true
	for i := range pods {
		if !drain.SkipDaemonSetAndMirrorPods(&pods[i]) {
			continue
		}
		if err := f.Evict(context.Background(), &pods[i], nil); err != nil {
			done = false
		}
	}
	return done
}

func (f *fakePods) setBudget(pod, budget string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if budget == "" {
		delete(f.budget, pod)
		return
	}
	f.budget[pod] = budget
}

type event struct{ typ, reason, message string }

type fakeEvents struct {
	mu     sync.Mutex
	events []event
}

func (f *fakeEvents) Event(_ *updatesv1alpha1.BottlerocketShadow, typ, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{typ, reason, message})
}

func (f *fakeEvents) find(reason string) *event {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.events {
		if f.events[i].reason == reason {
			e := f.events[i]
			return &e
		}
	}
	return nil
}

func pod(name string, mutate ...func(*v1.Pod)) v1.Pod {
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: nodeName}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func daemonSetPod(p *v1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: ptr.To(true)}}
}

func mirrorPod(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.mirror": "x"} }

// harness is one node: an emulated Bottlerocket host, its Node, its shadow,
// its Lease and pods, and a fake node-health controller that taints the node
// while the Lease is released.
type harness struct {
	t       *testing.T
	clk     *testingclock.FakeClock
	em      *emulator.Emulator
	api     *brapi.Client
	shadows *fakeShadows
	node    *fakeNode
	lease   *fakeLease
	pods    *fakePods
	events  *fakeEvents
	// noController keeps the fake node-health controller from tainting.
	noController bool
	// noDrain keeps the fake operator from draining the tainted node.
	noDrain bool
	// staleBootID keeps the Node's bootID as it was across a reboot, as a
	// watch that has not seen the kubelet's update yet.
	staleBootID bool
	// hungRequests are accepted reboot requests the host never carried
	// out (Faults.RebootHangs): settle does not wait for them.
	hungRequests int
}

func newHarness(t *testing.T, cfg emulator.Config) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &harness{t: t, clk: testingclock.NewFakeClock(t0), shadows: &fakeShadows{}, events: &fakeEvents{}}
	h.node = &fakeNode{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{BootID: "boot-0"}}}}
	h.lease = &fakeLease{node: h.node}
	h.pods = &fakePods{node: h.node, budget: map[string]string{}, pods: []v1.Pod{
		pod("web-1"), pod("web-2"), pod("agent", daemonSetPod), pod("static", mirrorPod)}}
	cfg.SocketPath = filepath.Join(dir, "api.sock")
	if cfg.Version == "" {
		cfg.Version = "1.20.0"
	}
	if cfg.Clock == nil {
		// Command delays run on the test's clock: a test that sets one
		// decides when the command ends by stepping it.
		cfg.Clock = h.clk
	}
	cfg.RebootHook = func(ctx context.Context, ev emulator.RebootEvent) error {
		if !h.staleBootID {
			h.node.setBootID(fmt.Sprintf("boot-%d", ev.Reboot))
		}
		return nil
	}
	em, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := em.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Close)
	h.em = em
	// The client runs on the real clock with tiny waits: the emulator
	// without delays finishes every command at once, and with a delay it
	// answers 423 until the test steps its clock.
	h.api = brapi.New(brapi.Options{SocketPath: cfg.SocketPath, PollInterval: time.Millisecond, CommandTimeout: 5 * time.Second,
		Retry: brapi.Backoff{Initial: time.Millisecond, Factor: 2, Max: 5 * time.Millisecond, Attempts: 3}, Clock: clock.RealClock{}})
	return h
}

func (h *harness) clients() Clients {
	return Clients{Shadows: h.shadows, Nodes: h.node, API: h.api, Lease: h.lease, Events: h.events}
}

func (h *harness) options() Options {
	return Options{NodeName: nodeName, Clock: h.clk, UpdateCheckInterval: 2 * time.Minute,
		TaintTimeout: 2 * time.Minute, RetryInterval: 10 * time.Second, RebootGrace: 3 * time.Minute}
}

func (h *harness) newAgent() *Agent {
	h.t.Helper()
	a, err := New(h.clients(), h.options())
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// sync runs one Sync, then lets the world react: the emulated host finishes
// a requested reboot, the fake node-health controller taints the node
// while the Lease is released, and the fake operator drains a tainted node
// whose agent waits for it.
func (h *harness) sync(a *Agent) (time.Duration, error) {
	h.t.Helper()
	d, err := a.Sync(context.Background())
	h.settle()
	return d, err
}

func (h *harness) settle() {
	h.t.Helper()
	if st := h.em.State(); st.RebootRequests-h.hungRequests > st.Reboots && !st.Faults.RebootHangs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.em.WaitForReboots(ctx, st.RebootRequests-h.hungRequests); err != nil {
			h.t.Fatalf("the emulated host did not reboot: %v", err)
		}
	}
	if !h.noController {
		h.node.setTaint(!h.lease.isHeld())
	}
	h.operatorDrains()
}

// operatorDrains plays the operator's drain (pkg/updater, drain.go): once
// the agent waits in RebootedIntoUpdate and the node is tainted, it evicts
// the pods and records the drained annotation with the node's bootID.
func (h *harness) operatorDrains() {
	s := h.shadows.get()
	if h.noDrain || s == nil || s.Spec.State != updatesv1alpha1.StateRebootedIntoUpdate ||
		s.Status.CurrentState != updatesv1alpha1.StateStagedAndPerformedUpdate || s.Status.RebootFromBootID != "" || !h.node.tainted() {
		return
	}
	boot := h.node.bootID()
	if s.Annotations[updatesv1alpha1.DrainedAnnotation] == boot {
		return
	}
	if h.pods.drain() {
		h.shadows.setDrained(boot)
	}
}

// operator moves spec one step when status reached it, like the update
// operator; ErrorReset is answered with Idle.
func (h *harness) operator(version string) {
	s := h.shadows.get()
	switch {
	case s.Status.CurrentState == updatesv1alpha1.StateErrorReset && s.Spec.State != updatesv1alpha1.StateIdle:
		// The operator keeps spec.version when it calls an update off, so
		// the agent can tell its own pin of the version lock from a user's.
		h.shadows.setSpec(updatesv1alpha1.StateIdle, s.Spec.Version)
	case s.Status.CurrentState != s.Spec.State:
	case s.Spec.State == updatesv1alpha1.StateIdle:
		if s.Status.TargetVersion != "" && s.Status.TargetVersion != s.Status.CurrentVersion && version != "" {
			h.shadows.setSpec(updatesv1alpha1.StateStagedAndPerformedUpdate, version)
		}
	case s.Spec.State == updatesv1alpha1.StateStagedAndPerformedUpdate:
		h.shadows.setSpec(updatesv1alpha1.StateRebootedIntoUpdate, s.Spec.Version)
	case s.Spec.State == updatesv1alpha1.StateRebootedIntoUpdate:
		h.shadows.setSpec(updatesv1alpha1.StateMonitoringUpdate, s.Spec.Version)
	case s.Spec.State == updatesv1alpha1.StateMonitoringUpdate:
		h.shadows.setSpec(updatesv1alpha1.StateIdle, "")
	}
}

func (h *harness) status() updatesv1alpha1.BottlerocketShadowStatus { return h.shadows.get().Status }

func (h *harness) expectState(want updatesv1alpha1.ShadowState) {
	h.t.Helper()
	if got := h.status().CurrentState; got != want {
		h.t.Fatalf("status.currentState = %q, want %q (status %+v)", got, want, h.status())
	}
}
