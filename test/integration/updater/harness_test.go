package updater_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/client-go/informers/externalversions"
	operatorsetup "nodehealth.io/nodehealth/internal/setup/operator"
	updater "nodehealth.io/nodehealth/pkg/updater/operator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	oldVersion = "1.19.0"
	newVersion = "1.20.0"
)

func shadows(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(testenv.Env(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testLabel selects one test's nodes. Its value is the test's name, so a
// test's name must fit in a label value (63 characters).
func testLabel(t *testing.T) (string, string) { return "updater-it/test", t.Name() }

func baseOptions(t *testing.T) updater.Options {
	k, v := testLabel(t)
	return updater.Options{
		Selector: labels.SelectorFromSet(labels.Set{k: v}),
		Deadlines: updater.Deadlines{StagedAndPerformedUpdate: 20 * time.Second, RebootedIntoUpdate: 20 * time.Second,
			MonitoringUpdate: 20 * time.Second, ReturnToIdle: 20 * time.Second},
		// The configuration's defaults.
		LeavingNodeTaints:        sets.New(nodev1alpha1.DefaultLeavingNodeTaints()...),
		LifecycleConditionMaxAge: nodev1alpha1.DefaultLifecycleConditionMaxAge,
		// A start held by a gate is looked at again within a second of
		// what held it going, not ten: the gates' tests wait for it.
		GateRecheck: time.Second,
	}
}

// policyName is the name of the test's UpdatePolicy (cluster-scoped, so one
// per test, deleted after it).
func policyName(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
}

// createPolicy creates the test's UpdatePolicy: its nodes (testLabel), one
// at a time, a soak of one second; mods change the spec.
func createPolicy(t *testing.T, mods ...func(*updatesv1alpha1.UpdatePolicySpec)) *updatesv1alpha1.UpdatePolicy {
	t.Helper()
	k, v := testLabel(t)
	p := &updatesv1alpha1.UpdatePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName(t)},
		Spec: updatesv1alpha1.UpdatePolicySpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}},
			MaxConcurrentUpdates: intstr.FromInt32(1), PostRebootSoak: &metav1.Duration{Duration: time.Second}},
	}
	for _, m := range mods {
		m(&p.Spec)
	}
	return createPolicyObject(t, p)
}

func createPolicyObject(t *testing.T, p *updatesv1alpha1.UpdatePolicy) *updatesv1alpha1.UpdatePolicy {
	t.Helper()
	c := shadows(t).UpdatesV1alpha1().UpdatePolicies()
	out, err := c.Create(testenv.Context(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Delete(ctx, p.Name, metav1.DeleteOptions{})
	})
	return out
}

// editPolicy changes the spec of a policy and returns its new generation.
func editPolicy(t *testing.T, ctx context.Context, name string, mod func(*updatesv1alpha1.UpdatePolicySpec)) *updatesv1alpha1.UpdatePolicy {
	t.Helper()
	c := shadows(t).UpdatesV1alpha1().UpdatePolicies()
	var out *updatesv1alpha1.UpdatePolicy
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mod(&p.Spec)
		out, err = c.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitPolicy waits until the policy satisfies ok.
func waitPolicy(t *testing.T, ctx context.Context, name, what string, ok func(*updatesv1alpha1.UpdatePolicy) bool) *updatesv1alpha1.UpdatePolicy {
	t.Helper()
	c := shadows(t).UpdatesV1alpha1().UpdatePolicies()
	var last *updatesv1alpha1.UpdatePolicy
	for {
		p, err := c.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("UpdatePolicy %s never %s; last: %+v", name, what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createNodes creates nodes nothing simulates (their status is what the test
// writes), labelled for this test, listing the updater extension and fully
// ready, as the node-health controller would leave them.
func createNodes(t *testing.T, names ...string) { createNodesReady(t, true, names...) }

// createNodesReady is createNodes with the nodes' readiness chosen: a node
// that is not ready is never started, which lets a test decide which node
// goes first.
func createNodesReady(t *testing.T, ready bool, names ...string) {
	t.Helper()
	env := testenv.Env(t)
	ctx := testenv.Context(t)
	k, v := testLabel(t)
	for _, name := range names {
		n := framework.NewUnmanagedNode(name, map[string]string{k: v})
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"bottlerocket-updater","source":"lease"}]`}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Tests run one after the other against one API server, and the
			// operator counts and halts on every shadow: leave none behind.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = env.DeleteNode(ctx, name)
			if err := framework.RemoveShadow(ctx, shadows(t), name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			if err := framework.WaitForDeletion[*updatesv1alpha1.BottlerocketShadow](ctx, shadowLW(t, name), "", name); err != nil {
				t.Errorf("cleanup of shadow %s: %v", name, err)
			}
		})
		setReady(t, ctx, name, ready)
	}
}

// setReady writes the node's SystemExtensionsReady condition as the
// node-health controller does, and its Ready condition True as a kubelet
// would (these nodes have none; the health gate needs both).
func setReady(t *testing.T, ctx context.Context, node string, ready bool) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	cond := map[string]any{"type": nodev1alpha1.SystemExtensionsReadyCondition, "status": "True", "reason": nodev1alpha1.ReasonExtensionsReady,
		"lastTransitionTime": now}
	if !ready {
		cond["status"], cond["reason"] = "False", nodev1alpha1.ReasonNodeRebooted
	}
	kubelet := map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": now}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond, kubelet}}})
	if _, err := testenv.Env(t).Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("setting %s ready=%v: %v", node, ready, err)
	}
}

// operator is the update operator running in-process
// (inprocess.StartOperator, wired as cmd/update-operator is).
type operator struct{ *inprocess.Operator }

func startOperator(t *testing.T, opts updater.Options) *operator {
	t.Helper()
	clients := operatorsetup.Clients{Kube: testenv.Env(t).Client, Updates: shadows(t)}
	return &operator{inprocess.StartOperator(t, clients, opts, 2)}
}

// stop kills the operator and waits until none of its goroutines can write.
func (o *operator) stop() { o.Stop() }

// agent plays the update agents of a set of nodes: it reports the state the
// operator asks for, "reboots" into spec.version (the node-health side then
// reports the node not ready until it is Monitoring), and returns to Idle.
type agent struct {
	t      *testing.T
	client versioned.Interface
	mu     sync.Mutex
	// stuckIn makes a node's agent stop once it reported this state, as an
	// agent hanging in a drain would.
	stuckIn map[string]updatesv1alpha1.ShadowState
	// unhealthy nodes never become fully ready after their reboot.
	unhealthy map[string]bool
}

// events are the Events recorded so far.
func (o *operator) events() []string { return o.Events() }

func startAgent(t *testing.T, ctx context.Context, nodes ...string) *agent {
	a := &agent{t: t, client: shadows(t), stuckIn: map[string]updatesv1alpha1.ShadowState{}, unhealthy: map[string]bool{}}
	ours := map[string]bool{}
	for _, n := range nodes {
		ours[n] = true
	}
	factory := externalversions.NewSharedInformerFactory(a.client, 0)
	inf := factory.Updates().V1alpha1().BottlerocketShadows().Informer()
	queue := make(chan string, 1000)
	enqueue := func(obj any) {
		if s, ok := obj.(*updatesv1alpha1.BottlerocketShadow); ok && ours[s.Name] {
			queue <- s.Name
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }})
	factory.Start(ctx.Done())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case name := <-queue:
				a.act(ctx, name)
			}
		}
	}()
	t.Cleanup(factory.Shutdown)
	return a
}

func (a *agent) act(ctx context.Context, name string) {
	var becameState updatesv1alpha1.ShadowState
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := a.client.UpdatesV1alpha1().BottlerocketShadows().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := s.Spec.State
		st := &s.Status
		a.mu.Lock()
		stuck := a.stuckIn[name]
		a.mu.Unlock()
		switch {
		case st.CurrentState == "":
			st.CurrentState, st.CurrentVersion, st.TargetVersion = updatesv1alpha1.StateIdle, oldVersion, newVersion
		case want == st.CurrentState || (stuck != "" && st.CurrentState == stuck):
			return nil
		case want == updatesv1alpha1.StateRebootedIntoUpdate:
			st.CurrentState, st.CurrentVersion, st.RebootFromBootID = want, s.Spec.Version, "boot-1"
		case want == updatesv1alpha1.StateIdle:
			st.CurrentState = want
			if st.CurrentVersion == st.TargetVersion {
				st.CrashCount, st.StateTransitionFailureTimestamp = 0, nil
			}
		default:
			st.CurrentState = want
		}
		becameState = st.CurrentState
		_, err = a.client.UpdatesV1alpha1().BottlerocketShadows().UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			a.t.Errorf("agent of %s: %v", name, err)
		}
		return
	}
	// The node-health side: a reboot gates the node; it is fully ready again
	// once its extensions renewed (here: when Monitoring begins).
	a.mu.Lock()
	unhealthy := a.unhealthy[name]
	a.mu.Unlock()
	switch becameState {
	case updatesv1alpha1.StateRebootedIntoUpdate:
		setReady(a.t, ctx, name, false)
	case updatesv1alpha1.StateMonitoringUpdate:
		if !unhealthy {
			setReady(a.t, ctx, name, true)
		}
	}
}

// recorder watches every shadow of a test for the whole run: the most that
// ever counted as updating (docs/updater.md's definition) and the starts per node.
type history struct {
	mu       sync.Mutex
	current  map[string]bool
	max      int
	starts   map[string]int
	lastSpec map[string]updatesv1alpha1.ShadowState
	// startRVs are the resourceVersions of the writes that started a
	// node, by node.
	startRVs map[string][]string
}

func watchHistory(t *testing.T, ctx context.Context, nodes ...string) *history {
	t.Helper()
	h := &history{current: map[string]bool{}, starts: map[string]int{}, lastSpec: map[string]updatesv1alpha1.ShadowState{},
		startRVs: map[string][]string{}}
	ours := map[string]bool{}
	for _, n := range nodes {
		ours[n] = true
	}
	c := shadows(t).UpdatesV1alpha1().BottlerocketShadows()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		h.observe(&list.Items[i], ours)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*updatesv1alpha1.BottlerocketShadow)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				h.mu.Lock()
				delete(h.current, s.Name)
				h.mu.Unlock()
				continue
			}
			h.observe(s, ours)
		}
	}()
	t.Cleanup(w.Stop)
	return h
}

func (h *history) observe(s *updatesv1alpha1.BottlerocketShadow, ours map[string]bool) {
	if !ours[s.Name] {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current[s.Name] = counts(s)
	n := 0
	for _, c := range h.current {
		if c {
			n++
		}
	}
	h.max = max(h.max, n)
	if h.lastSpec[s.Name] == updatesv1alpha1.StateIdle && s.Spec.State == updatesv1alpha1.StateStagedAndPerformedUpdate {
		h.starts[s.Name]++
		h.startRVs[s.Name] = append(h.startRVs[s.Name], s.ResourceVersion)
	}
	h.lastSpec[s.Name] = s.Spec.State
}

// counts is docs/updater.md's definition, written out independently of pkg/updater/operator.
func counts(s *updatesv1alpha1.BottlerocketShadow) bool {
	if s.Spec.State != updatesv1alpha1.StateIdle {
		return true
	}
	switch s.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate:
	default:
		return false
	}
	failed, err := time.Parse(time.RFC3339, s.Annotations[updatesv1alpha1.FailedAnnotation])
	return err != nil || s.Spec.StateTransitionTimestamp == nil || failed.Before(s.Spec.StateTransitionTimestamp.Time)
}

func (h *history) snapshot() (int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	starts := map[string]int{}
	for k, v := range h.starts {
		starts[k] = v
	}
	return h.max, starts
}

func shadowLW(t *testing.T, name string) cache.ListerWatcher {
	return framework.NamedListWatch(shadows(t).UpdatesV1alpha1().RESTClient(), "bottlerocketshadows", "", name)
}

// waitShadow waits until the node's shadow satisfies cond.
func waitShadow(t *testing.T, ctx context.Context, name string, what string, cond func(*updatesv1alpha1.BottlerocketShadow) bool) *updatesv1alpha1.BottlerocketShadow {
	t.Helper()
	s, err := framework.WaitFor(ctx, shadowLW(t, name), cond)
	if err != nil {
		t.Fatalf("shadow %s: %s: %v", name, what, err)
	}
	return s
}

func updated(s *updatesv1alpha1.BottlerocketShadow) bool {
	return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle &&
		s.Status.CurrentVersion == newVersion
}

func failed(s *updatesv1alpha1.BottlerocketShadow) bool {
	_, ok := s.Annotations[updatesv1alpha1.FailedAnnotation]
	return ok && s.Spec.State == updatesv1alpha1.StateIdle
}

// resume writes the resume annotation as `kubectl nodehealth update resume`
// does: a copy of the failed value.
func resume(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	s, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, updatesv1alpha1.ResumeAnnotation, s.Annotations[updatesv1alpha1.FailedAnnotation])
	if _, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// never asserts that for d no shadow of names leaves Idle in spec: a
// negative observed over a watch, for as long as the test can afford. Each
// shadow must exist and be Idle when the window opens (a name that matches
// nothing proves nothing), and the window is also watched by watchHistory,
// which counts an update that starts and ends inside it.
func never(t *testing.T, ctx context.Context, d time.Duration, why string, names ...string) {
	t.Helper()
	ours := map[string]bool{}
	for _, n := range names {
		ours[n] = true
		s, err := shadows(t).UpdatesV1alpha1().BottlerocketShadows().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: shadow %s: %v", why, n, err)
		}
		if s.Spec.State != updatesv1alpha1.StateIdle {
			t.Fatalf("%s: %s is not Idle when the window opens: spec %s", why, n, s.Spec.State)
		}
	}
	h := watchHistory(t, ctx, names...)
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lw := cache.NewListWatchFromClient(shadows(t).UpdatesV1alpha1().RESTClient(), "bottlerocketshadows", "", fields.Everything())
	s, err := framework.WaitFor(wctx, lw, func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return ours[s.Name] && s.Spec.State != updatesv1alpha1.StateIdle
	})
	if err == nil {
		t.Fatalf("%s: %s left Idle: spec %s", why, s.Name, s.Spec.State)
	}
	if ctx.Err() != nil {
		t.Fatal(ctx.Err())
	}
	if inFlight, starts := h.snapshot(); inFlight > 0 || len(starts) > 0 {
		t.Fatalf("%s: an update started within the window: %d in flight at most, starts %v", why, inFlight, starts)
	}
}

// startOperatorReplicas runs the update-operator binary as two replicas
// (names) electing a leader on the Lease default/leaseName, managing the
// test's nodes. The first is started alone and returned with its identity
// once it leads; the second then follows.
func startOperatorReplicas(t *testing.T, ctx context.Context, leaseName string, names ...string) (*framework.Component, string) {
	t.Helper()
	k, v := testLabel(t)
	config := fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: UpdateOperatorConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: default
  resourceName: %s
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
managedNodeSelector:
  matchLabels:
    %q: %q
stateDeadlines:
  stagedAndPerformedUpdate: 1m
  rebootedIntoUpdate: 1m
  monitoringUpdate: 1m
drain:
  timeout: 30s
`, leaseName, k, v)
	start := func(name string) *framework.Component {
		return testenv.StartComponent(t, testenv.Component{Binary: "update-operator", Name: name, Config: config})
	}
	first := start(names[0])
	lease, err := testenv.Env(t).WaitForLease(ctx, "default", leaseName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names[1:] {
		start(name)
	}
	return first, *lease.Spec.HolderIdentity
}
