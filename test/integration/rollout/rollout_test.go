package rollout_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// updating is docs/updater.md's count: a node counts toward maxConcurrentUpdates
// while its spec is out of Idle, or while its agent still reports an update
// state (ErrorReset included) and the operator has not marked it failed.
func updating(s *updatesv1alpha1.BottlerocketShadow) bool {
	if s.Spec.State != updatesv1alpha1.StateIdle {
		return true
	}
	switch s.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate,
		updatesv1alpha1.StateErrorReset:
		_, failed := s.Annotations[updatesv1alpha1.FailedAnnotation]
		return !failed
	}
	return false
}

// shadowLog records every shadow change, from one watch over the whole run:
// the most nodes updating at once, and which nodes ever left Idle.
type shadowLog struct {
	mu       sync.Mutex
	current  map[string]bool
	max      int
	maxAt    []string
	started  map[string]bool
	events   int
	watchErr error
}

func watchShadows(t *testing.T) *shadowLog {
	t.Helper()
	ctx, cancel := context.WithCancel(testenv.Context(t))
	c := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &shadowLog{current: map[string]bool{}, started: map[string]bool{}}
	for i := range list.Items {
		l.observe(watch.Added, &list.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			switch s := ev.Object.(type) {
			case *updatesv1alpha1.BottlerocketShadow:
				l.observe(ev.Type, s)
			case *metav1.Status:
				l.mu.Lock()
				l.watchErr = fmt.Errorf("watch error: %s", s.Message)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return l
}

func (l *shadowLog) observe(typ watch.EventType, s *updatesv1alpha1.BottlerocketShadow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events++
	if typ == watch.Deleted {
		delete(l.current, s.Name)
		return
	}
	l.current[s.Name] = updating(s)
	if s.Spec.State != updatesv1alpha1.StateIdle {
		l.started[s.Name] = true
	}
	n := 0
	var who []string
	for name, u := range l.current {
		if u {
			n++
			who = append(who, name)
		}
	}
	if n > l.max {
		sort.Strings(who)
		l.max, l.maxAt = n, who
	}
}

func (l *shadowLog) result() (max int, maxAt []string, started map[string]bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := map[string]bool{}
	for k, v := range l.started {
		s[k] = v
	}
	return l.max, l.maxAt, s, l.watchErr
}

// nodeObservation is one state of a Node as the node watch saw it.
type nodeObservation struct {
	bootID    string
	tainted   bool
	noExecute bool
	status    corev1.ConditionStatus
	reason    string
}

// nodeLog records, from one watch over the whole run, every change of the
// nodes' bootID, readiness taint and SystemExtensionsReady condition.
type nodeLog struct {
	mu    sync.Mutex
	nodes map[string][]nodeObservation
	// lifecycle is each node's KEP-5683 lifecycle conditions of nodehealth's
	// reasons (lifecycleState), every change in order; foreign the
	// conditions of any other reason, every change in order.
	lifecycle map[string][]string
	foreign   map[string][]string
}

// lifecycleTypes are the four KEP-5683 conditions, in lifecycleState's
// order.
var lifecycleTypes = []string{nodev1alpha1.LifecycleConditionMaintenancePlanned, nodev1alpha1.LifecycleConditionMaintenanceInProgress,
	nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleConditionDrained}

// lifecycleState renders the node's lifecycle conditions whose reason is
// nodehealth's as four characters, MaintenancePlanned, MaintenanceInProgress,
// DrainInProgress, Drained: T or F, or - when absent or another writer's;
// ":REASON" follows for a reason other than BottlerocketUpdate. foreign
// renders the others' as TYPE=STATUS/REASON@lastTransitionTime.
func lifecycleState(n *corev1.Node) (own string, foreign []string) {
	var b strings.Builder
	for _, kind := range lifecycleTypes {
		c := nodeutil.Condition(n, corev1.NodeConditionType(kind))
		switch {
		case c == nil:
			b.WriteByte('-')
		case !nodev1alpha1.OwnLifecycleReason(c.Reason):
			b.WriteByte('-')
			foreign = append(foreign, fmt.Sprintf("%s=%s/%s@%s", c.Type, c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339)))
		default:
			b.WriteString(string(c.Status)[:1])
			if c.Reason != nodev1alpha1.LifecycleReasonBottlerocketUpdate {
				b.WriteString(":" + c.Reason)
			}
		}
	}
	return b.String(), foreign
}

// checkLifecycle checks the node's lifecycle conditions went through want
// in order (docs/updater.md's table). optional states may be skipped: two
// steps the operator can see in one sync are written in one patch.
func (l *nodeLog) checkLifecycle(t *testing.T, node string, want []string, optional map[string]bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.lifecycle[node]
	i := -1 // the last state matched
	for _, g := range got {
		j := i + 1
		for j < len(want) && want[j] != g {
			if !optional[want[j]] {
				t.Errorf("node %s: lifecycle conditions %q skipped %s (MaintenancePlanned, MaintenanceInProgress, DrainInProgress, Drained), want %q",
					node, got, want[j], want)
				return
			}
			j++
		}
		if j == len(want) {
			t.Errorf("node %s: lifecycle conditions %q: %s is out of order, want %q", node, got, g, want)
			return
		}
		i = j
	}
	if i != len(want)-1 {
		t.Errorf("node %s: lifecycle conditions %q end early, want %q", node, got, want)
	}
}

// lifecycleDone reports whether every node's lifecycle conditions reached
// want.
func (l *nodeLog) lifecycleDone(want string, names ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		h := l.lifecycle[n]
		if len(h) == 0 || h[len(h)-1] != want {
			return false
		}
	}
	return true
}

func watchNodes(t *testing.T, names ...string) *nodeLog {
	t.Helper()
	ctx, cancel := context.WithCancel(testenv.Context(t))
	c := testenv.Env(t).Client.CoreV1().Nodes()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &nodeLog{nodes: map[string][]nodeObservation{}, lifecycle: map[string][]string{}, foreign: map[string][]string{}}
	for _, n := range names {
		l.nodes[n] = nil
	}
	for i := range list.Items {
		l.observe(&list.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				l.observe(n)
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return l
}

func (l *nodeLog) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	obs, ours := l.nodes[n.Name]
	if !ours {
		return
	}
	o := nodeObservation{bootID: n.Status.NodeInfo.BootID, tainted: framework.HasReadinessTaint(n), noExecute: framework.ReadinessTaints(n, corev1.TaintEffectNoExecute) > 0}
	if c := framework.ExtensionsCondition(n); c != nil {
		o.status, o.reason = c.Status, c.Reason
	}
	own, foreign := lifecycleState(n)
	if h := l.lifecycle[n.Name]; len(h) == 0 || h[len(h)-1] != own {
		l.lifecycle[n.Name] = append(h, own)
	}
	if f, h := strings.Join(foreign, ","), l.foreign[n.Name]; len(h) == 0 || h[len(h)-1] != f {
		l.foreign[n.Name] = append(h, f)
	}
	if len(obs) > 0 && obs[len(obs)-1] == o {
		return
	}
	l.nodes[n.Name] = append(obs, o)
}

// checkRebootGate checks the node's history: planned maintenance gated it
// before the reboot, the reboot (the new bootID) gated it again, and it was
// ungated in the new boot with every extension ready; nothing was ever
// treated as an unplanned failure (no ExtensionsNotReady, no NoExecute
// escalation).
func (l *nodeLog) checkRebootGate(t *testing.T, node string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	obs := l.nodes[node]
	newBoot := framework.BootID(node, 1)
	var planned, regated, ungated bool
	for _, o := range obs {
		if o.noExecute {
			t.Errorf("node %s escalated to the NoExecute taint during a planned update", node)
		}
		if o.reason == nodev1alpha1.ReasonExtensionsNotReady {
			t.Errorf("node %s reported an unplanned failure (ExtensionsNotReady) during its update", node)
		}
		switch {
		case o.bootID != newBoot && o.tainted && o.reason == nodev1alpha1.ReasonPlannedMaintenance:
			planned = true
		case o.bootID == newBoot && o.tainted && o.reason == nodev1alpha1.ReasonNodeRebooted:
			regated = true
		case o.bootID == newBoot && regated && !o.tainted && o.status == corev1.ConditionTrue && o.reason == nodev1alpha1.ReasonExtensionsReady:
			ungated = true
		}
	}
	if !planned || !regated || !ungated {
		t.Errorf("node %s: gated for planned maintenance %v, re-gated after the reboot %v, ungated in the new boot %v; history:\n%s",
			node, planned, regated, ungated, formatObservations(obs))
	}
}

func formatObservations(obs []nodeObservation) string {
	var b strings.Builder
	for _, o := range obs {
		fmt.Fprintf(&b, "  boot=%s tainted=%v noExecute=%v ready=%s/%s\n", o.bootID, o.tainted, o.noExecute, o.status, o.reason)
	}
	return b.String()
}

func nodeNames(prefix string, n int) []string {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	return names
}

// offer makes every node's update repository offer newVersion; the agents
// see it at their next refresh.
func offer(t *testing.T, nodes map[string]*framework.SimNode, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := nodes[n].Emulator.Offer(newVersion); err != nil {
			t.Fatal(err)
		}
	}
}

// A rolling update of 5 nodes with maxConcurrentUpdates 2: every node ends on
// the new version after exactly one reboot, never more than 2 nodes update at
// once, each node is gated for the planned update, re-gated by its reboot and
// ungated only once its extensions renewed in the new boot, and the planned
// releases neither start an eviction clock nor count toward the blast radius.
func TestARollingUpdateRebootsEachNodeOnceWithinTheLimitAndGatesItUntilItsExtensionsRenew(t *testing.T) {
	install(t)
	controller := startController(t)
	names := nodeNames("roll", 5)
	nodes := startNodes(t, nil, names...)
	operator := startOperator(t, 2)
	waitShadows(t, "every agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, names...)

	// Another writer's lifecycle condition, False so that it does not
	// make the node leaving: the operator never touches it.
	admin := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"False","reason":"AdminRequested","message":"drained by hand last week","lastTransitionTime":%q}]}}`,
		nodev1alpha1.LifecycleConditionDrainInProgress, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if _, err := testenv.Env(t).Client.CoreV1().Nodes().PatchStatus(testenv.Context(t), names[0], []byte(admin)); err != nil {
		t.Fatal(err)
	}

	shadowLog := watchShadows(t)
	nodeLog := watchNodes(t, names...)
	begin := time.Now()
	offer(t, nodes, names...)

	waitShadows(t, "every node updated and back to Idle", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle &&
			s.Status.CurrentVersion == newVersion
	}, names...)
	t.Logf("5 nodes updated in %s", time.Since(begin).Round(time.Second))
	for _, n := range names {
		waitServing(t, n)
	}
	// docs/updater.md's table: chosen; planned release; drain running; drain
	// done; rebooted into the new boot; back in Idle. The planned release
	// and the drain can be written in one patch when the readiness taint
	// is on before the operator saw spec move.
	want := []string{"----", "T---", "FT--", "FTT-", "FTFT", "FTFF", "FFFF"}
	// names[0]'s DrainInProgress is the admin's: the operator leaves it.
	wantAdmin := []string{"----", "T---", "FT--", "FT-T", "FT-F", "FF-F"}
	if err := wait.PollUntilContextTimeout(testenv.Context(t), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return nodeLog.lifecycleDone(want[len(want)-1], names[1:]...) && nodeLog.lifecycleDone(wantAdmin[len(wantAdmin)-1], names[0]), nil
	}); err != nil {
		t.Errorf("lifecycle conditions not cleared after the rollout: %v", err)
	}
	for _, n := range names[1:] {
		nodeLog.checkLifecycle(t, n, want, map[string]bool{"FT--": true})
	}
	nodeLog.checkLifecycle(t, names[0], wantAdmin, nil)
	nodeLog.mu.Lock()
	if f := nodeLog.foreign[names[0]]; len(f) != 1 || !strings.HasPrefix(f[0], "DrainInProgress=False/AdminRequested@") {
		t.Errorf("node %s: the admin's condition changed during the rollout: %q", names[0], f)
	}
	for _, n := range names[1:] {
		if f := nodeLog.foreign[n]; len(f) != 1 || f[0] != "" {
			t.Errorf("node %s: lifecycle conditions of another writer appeared: %q", n, f)
		}
	}
	nodeLog.mu.Unlock()

	max, maxAt, started, err := shadowLog.result()
	if err != nil {
		t.Error(err)
	}
	if max > 2 {
		t.Errorf("%d nodes updated at once (%v), maxConcurrentUpdates is 2", max, maxAt)
	}
	if max < 2 {
		t.Errorf("at most %d node updated at once: the rollout never used its 2 slots", max)
	}
	for _, n := range names {
		if !started[n] {
			t.Errorf("node %s was never seen out of Idle", n)
		}
		st := nodes[n].Emulator.State()
		if st.Running != newVersion || st.Reboots != 1 || st.RebootRequests != 1 {
			t.Errorf("node %s: running %s after %d reboots (%d requested), want %s after exactly one", n, st.Running, st.Reboots, st.RebootRequests, newVersion)
		}
		if err := nodes[n].RebootError(); err != nil {
			t.Errorf("node %s: simulated reboot: %v", n, err)
		}
		nodeLog.checkRebootGate(t, n)
		s, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(testenv.Context(t), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, failed := s.Annotations[updatesv1alpha1.FailedAnnotation]; failed {
			t.Errorf("node %s marked failed: %s", n, s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
		}
	}

	// Nothing escalated and nothing was suspended: planned releases start no
	// eviction clock and do not count toward the blast radius.
	// Suspensions of the blast radius's scopes only: an own-view suspension
	// (a slow API server on a loaded machine) says nothing about how
	// planned releases count.
	for _, m := range []struct {
		name   string
		labels map[string]string
	}{
		{"nodehealth_evictions_total", nil},
		{"nodehealth_suspensions_total", map[string]string{"scope": "cluster"}},
		{"nodehealth_suspensions_total", map[string]string{"scope": "zone"}},
		{"nodehealth_gating_suspended", nil},
	} {
		if v := testenv.Metric(t, controller.MetricsURL(), m.name, m.labels); v != 0 {
			t.Errorf("controller metric %s%v = %v, want 0", m.name, m.labels, v)
		}
	}
	if v := testenv.Metric(t, operator.MetricsURL(), "update_operator_rollout_halted", nil); v != 0 {
		t.Errorf("update_operator_rollout_halted = %v, want 0", v)
	}
	if v := testenv.Metric(t, operator.MetricsURL(), "update_operator_update_starts_total", nil); v != 5 {
		t.Errorf("update_operator_update_starts_total = %v, want 5 (one start per node)", v)
	}
	evs, err := testenv.Env(t).Client.CoreV1().Events(metav1.NamespaceAll).List(testenv.Context(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Node" && strings.HasPrefix(e.InvolvedObject.Name, "roll-") &&
			(e.Reason == nodehealth.EventEvictingPods || e.Reason == nodehealth.EventGatingSuspended) {
			t.Errorf("Event %s on %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}
}

// A node whose new version never comes up (Bottlerocket falls back to the
// old partition set) fails after its reboot: the operator marks it failed,
// the rollout halts, and no other node starts although each is offered the
// new version and ready.
func TestNewVersionNeverComesUpHaltsRollout(t *testing.T) {
	install(t)
	startController(t)
	names := nodeNames("halt", 3)
	bad := names[0]
	nodes := startNodes(t, map[string]emulator.Faults{bad: {NeverComesUp: true}}, names...)
	operator := startOperator(t, 1)
	waitShadows(t, "every agent reports Idle on the old version", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == oldVersion
	}, names...)
	shadowLog := watchShadows(t)

	// The bad node goes first: only it is offered the update until it took
	// the one slot.
	offer(t, nodes, bad)
	waitShadows(t, bad+" started", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Spec.State != updatesv1alpha1.StateIdle
	}, bad)
	offer(t, nodes, names[1:]...)
	waitShadows(t, "the others see the offer", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.TargetVersion == newVersion
	}, names[1:]...)

	waitShadows(t, bad+" marked failed and back to Idle", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		_, failed := s.Annotations[updatesv1alpha1.FailedAnnotation]
		return failed && s.Spec.State == updatesv1alpha1.StateIdle
	}, bad)
	s, err := shadowClient(t).UpdatesV1alpha1().BottlerocketShadows().Get(testenv.Context(t), bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s failed: %s", bad, s.Annotations[updatesv1alpha1.FailureReasonAnnotation])
	if st := nodes[bad].Emulator.State(); st.Running != oldVersion || st.Reboots != 1 {
		t.Errorf("bad node: running %s after %d reboots, want %s after one", st.Running, st.Reboots, oldVersion)
	}

	// The operator is event-driven: had the halt not held, the next node
	// would have left Idle within a second of the slot being freed. Give it
	// ample time to do the wrong thing.
	time.Sleep(10 * time.Second)
	_, _, started, err := shadowLog.result()
	if err != nil {
		t.Error(err)
	}
	if v := testenv.Metric(t, operator.MetricsURL(), "update_operator_rollout_halted", nil); v < 1 {
		t.Errorf("update_operator_rollout_halted = %v, want it to report the halt", v)
	}
	for _, n := range names[1:] {
		if started[n] {
			t.Errorf("node %s started while the rollout was halted", n)
		}
		if st := nodes[n].Emulator.State(); st.RebootRequests != 0 || st.Running != oldVersion {
			t.Errorf("node %s: %d reboot requests, running %s; want untouched", n, st.RebootRequests, st.Running)
		}
	}

	// The halt is on the node too (docs/updater.md, "Lifecycle
	// conditions"): MaintenanceInProgress stays True, reason UpdateFailed,
	// until the failure is resumed (TestAHaltHoldsMaintenanceInProgressUntilResumed:
	// a resume here would start the node's next attempt mid-cleanup).
	env, ctx := testenv.Env(t), testenv.Context(t)
	if _, err := env.WaitForNode(ctx, bad, func(n *corev1.Node) bool {
		return nodeutil.HasCondition(n, nodev1alpha1.LifecycleConditionMaintenanceInProgress, corev1.ConditionTrue, nodev1alpha1.LifecycleReasonUpdateFailed)
	}); err != nil {
		t.Errorf("%s: no MaintenanceInProgress=True/UpdateFailed while it halts the rollout: %v", bad, err)
	}
	for _, n := range names[1:] {
		node, err := env.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if own, _ := lifecycleState(node); own != "----" {
			t.Errorf("node %s, never started, has lifecycle conditions %s", n, own)
		}
	}
}
