package nodehealth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	// groupLabel isolates tests: each test's nodes carry its group, and its
	// in-process controllers and node recorder watch only that group.
	groupLabel = "it.nodehealth.io/group"
	// taintKey is the readiness taint every test's controller uses.
	taintKey = nodev1alpha1.DefaultReadinessTaintKey

	// leaseSeconds is the duration of test Leases; renewers renew every
	// renewPeriod and the controller's renewalGrace is renewalGrace, so an
	// extension that stops renewing expires leaseSeconds+renewalGrace after
	// its last renewal. The margin (3 s without a renewal before a live
	// extension could expire) absorbs a slow machine.
	leaseSeconds      = 4
	renewPeriod       = time.Second
	renewalGrace      = time.Second
	registrationGrace = 3 * time.Second
	expiry            = leaseSeconds*time.Second + renewalGrace

	// waitTimeout bounds every single wait: generous, because two shared
	// cores running a control plane and other builds can be slow.
	waitTimeout = 2 * time.Minute

	// stacksEnv names a directory where a timed-out node wait writes a
	// goroutine dump, to tell a stuck controller from one that decided wrong.
	stacksEnv = "NODEHEALTH_IT_STACKS"
)

// harness holds one test's isolated world: a Lease namespace, a group of
// nodes and a recorder of every version of those nodes.
type harness struct {
	t       *testing.T
	env     *framework.Environment
	group   string
	leaseNS string
	nodes   *nodeRecorder
}

// groupsInUse are the groups of the tests of this run: two tests sharing a
// group would run two controllers with different rules on the same nodes,
// which fight over them (CI met it: a start-up timeline seconds late, behind
// a string of conflicts).
var groupsInUse sync.Map

func newHarness(t *testing.T, group string) *harness {
	t.Helper()
	// The same test again (go test -count) may have it back.
	if other, taken := groupsInUse.LoadOrStore(group, t.Name()); taken && other != t.Name() {
		t.Fatalf("group %q is already %s's: give each test its own", group, other)
	}
	env := testenv.Env(t)
	h := &harness{t: t, env: env, group: group, leaseNS: testenv.NewNamespace(t, "nh-"+group)}
	h.nodes = newNodeRecorder(t, env.Client, h.selector())
	return h
}

func (h *harness) selector() string { return groupLabel + "=" + h.group }

// options are the controller options of a test: short durations, eviction
// off, blast radius off, the canary on.
func (h *harness) options(rules ...nodehealth.Rule) nodehealth.Options {
	return nodehealth.Options{
		LeaseNamespace:     h.leaseNS,
		TaintKey:           taintKey,
		TaintEffect:        v1.TaintEffectNoSchedule,
		Rules:              rules,
		RenewalGrace:       renewalGrace,
		RegistrationGrace:  registrationGrace,
		MaintenanceReasons: sets.New(nodev1alpha1.ReasonUpdating),
		Eviction:           nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeNone, Timeout: 3 * time.Second, NodesPerSecond: 10},
		CanaryInterval:     time.Second,
		Identity:           "it-" + h.group,
	}
}

// rule requires ext on every node of the group that also has extra labels.
func (h *harness) rule(ext string, extra map[string]string) nodehealth.Rule {
	set := labels.Set{groupLabel: h.group}
	maps.Copy(set, extra)
	return nodehealth.Rule{Name: ext, Extension: ext, Selector: labels.SelectorFromSet(set), AffectsReadiness: true,
		FailurePolicy: nodehealth.FailurePolicyKeepGated}
}

// startController runs the controller in process (inprocess.StartController)
// on this test's group of nodes.
func (h *harness) startController(t testing.TB, opts nodehealth.Options) *inprocess.Controller {
	t.Helper()
	return inprocess.StartController(t, h.env.Config, h.selector(), opts)
}

// ---------------------------------------------------------------------------
// Nodes

type nodeOption func(*v1.Node)

func withLabels(l map[string]string) nodeOption {
	return func(n *v1.Node) { maps.Copy(n.Labels, l) }
}

func withTaint(key string, effect v1.TaintEffect) nodeOption {
	return func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: effect}) }
}

// withBootID creates the node with a bootID, as a kubelet registers it.
func withBootID(id string) nodeOption {
	return func(n *v1.Node) { n.Status.NodeInfo.BootID = id }
}

func withAnnotation(key, value string) nodeOption {
	return func(n *v1.Node) { n.Annotations[key] = value }
}

// unmanaged marks a node to create without kwok: nothing but the test writes
// its status. Tests that reboot nodes use them, because kwok's
// initialization can write a node's status from an older read and so revert
// a bootID the test just set.
func unmanaged() nodeOption {
	return func(n *v1.Node) {
		delete(n.Annotations, framework.KwokNodeAnnotation)
		delete(n.Labels, "type")
	}
}

// createNode creates a kwok node of the test's group and deletes it at the end.
func (h *harness) createNode(t testing.TB, name string, opts ...nodeOption) string {
	t.Helper()
	n := framework.NewKwokNode(name, map[string]string{groupLabel: h.group})
	for _, o := range opts {
		o(n)
	}
	if _, err := h.env.Client.CoreV1().Nodes().Create(testenv.Context(t), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.env.DeleteNode(ctx, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// setBootID reboots a node: it sets its bootID. Use it on unmanaged nodes.
func (h *harness) setBootID(t testing.TB, node, id string) {
	t.Helper()
	if _, err := h.env.SetBootID(testenv.Context(t), node, id); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) labelNode(t testing.TB, node, key string, value *string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if _, err := h.env.Client.CoreV1().Nodes().Patch(testenv.Context(t), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) annotateNode(t testing.TB, node, key string, value *string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if _, err := h.env.Client.CoreV1().Nodes().Patch(testenv.Context(t), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Node predicates.

func gated(n *v1.Node) bool { return framework.ReadinessTaints(n, v1.TaintEffectNoSchedule) > 0 }

func ungated(n *v1.Node) bool { return framework.ReadinessTaints(n, "") == 0 }

// readyNode: ungated, condition True, and the boot record written.
func readyNode(n *v1.Node) bool {
	return ungated(n) && framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady")(n) && n.Annotations[nodev1alpha1.BootAnnotation] != ""
}

func bootRecorded(bootID string) func(*v1.Node) bool {
	return func(n *v1.Node) bool {
		return strings.Contains(n.Annotations[nodev1alpha1.BootAnnotation], fmt.Sprintf("%q", bootID))
	}
}

func extensionList(t testing.TB, n *v1.Node, namespace string) []nodev1alpha1.SystemExtension {
	t.Helper()
	list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], namespace)
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	return list
}

// listHas matches a node whose extension list has an entry name from source.
func listHas(name, source string) func(*v1.Node) bool {
	return func(n *v1.Node) bool {
		list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], "")
		if err != nil {
			return false
		}
		return slices.ContainsFunc(list, func(e nodev1alpha1.SystemExtension) bool { return e.Name == name && e.Source == source })
	}
}

func describeNode(n *v1.Node) string {
	if n == nil {
		return "<none>"
	}
	s := fmt.Sprintf("%s rv=%s bootID=%q taints=%v annotations{list=%q boot=%q}", n.Name, n.ResourceVersion, n.Status.NodeInfo.BootID,
		n.Spec.Taints, n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], n.Annotations[nodev1alpha1.BootAnnotation])
	if c := framework.ExtensionsCondition(n); c != nil {
		s += fmt.Sprintf(" condition{%s %s heartbeat=%s %q}", c.Status, c.Reason, c.LastHeartbeatTime.Format("15:04:05"), c.Message)
	}
	return s
}

// nodeRecorder keeps every version of a group's nodes, in the order the watch
// delivered them, so tests can both wait for a state and assert on the whole
// history (a taint never removed, never duplicated, a node never written).
type nodeRecorder struct {
	mu      sync.Mutex
	history map[string][]snapshot
	changed chan struct{}
}

type snapshot struct {
	at   time.Time
	node *v1.Node // nil: deleted
}

func newNodeRecorder(t testing.TB, client kubernetes.Interface, selector string) *nodeRecorder {
	t.Helper()
	r := &nodeRecorder{history: map[string][]snapshot{}, changed: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Nodes().Informer()
	add := func(name string, n *v1.Node) {
		r.mu.Lock()
		r.history[name] = append(r.history[name], snapshot{at: time.Now(), node: n})
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n := obj.(*v1.Node); add(n.Name, n) },
		UpdateFunc: func(_, obj any) { n := obj.(*v1.Node); add(n.Name, n) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				add(n.Name, nil)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	ctx := testenv.Context(t)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("node recorder did not sync")
	}
	return r
}

// mark returns the position in a node's history from which to look later.
func (r *nodeRecorder) mark(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.history[name])
}

// since returns the node's versions from mark on, preceded by the version
// current at mark (if any), so the list covers the whole interval.
func (r *nodeRecorder) since(name string, mark int) []*v1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.history[name]
	start := max(mark-1, 0)
	var out []*v1.Node
	for _, s := range h[start:] {
		if s.node != nil {
			out = append(out, s.node)
		}
	}
	return out
}

func (r *nodeRecorder) snapshotsSince(name string, mark int) []snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.history[name][mark:])
}

func (r *nodeRecorder) latest(name string) *v1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.history[name]
	if len(h) == 0 {
		return nil
	}
	return h[len(h)-1].node
}

// wait waits until the node's current version satisfies cond and returns it.
func (r *nodeRecorder) wait(t testing.TB, name, what string, cond func(*v1.Node) bool) *v1.Node {
	t.Helper()
	n, _ := r.waitAt(t, name, what, cond)
	return n
}

// waitAt is wait that also returns when (by the recorder's clock) the
// matching version was observed.
func (r *nodeRecorder) waitAt(t testing.TB, name, what string, cond func(*v1.Node) bool) (*v1.Node, time.Time) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		h := r.history[name]
		var last snapshot
		if len(h) > 0 {
			last = h[len(h)-1]
		}
		ch := r.changed
		r.mu.Unlock()
		if last.node != nil && cond(last.node) {
			return last.node, last.at
		}
		select {
		case <-ch:
		case <-timeout.C:
			// A timed-out wait can dump every goroutine (the in-process
			// controllers' workers included) into $NODEHEALTH_IT_STACKS.
			if dir := os.Getenv(stacksEnv); dir != "" {
				buf := make([]byte, 16<<20)
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.stacks", name, time.Now().UnixNano())), buf[:goruntime.Stack(buf, true)], 0o644)
			}
			t.Fatalf("timed out after %s waiting for node %s: %s; last seen: %s\nhistory:\n%s", waitTimeout, name, what, describeNode(last.node), r.dump(name))
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for node %s: %s", name, what)
		}
	}
}

// dump describes every recorded version of a node, for failure messages.
func (r *nodeRecorder) dump(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.history[name] {
		fmt.Fprintf(&b, "  %s %s\n", s.at.Format("15:04:05.000"), describeNode(s.node))
	}
	return b.String()
}

// waitSeen waits until some version since mark satisfied cond (it may have
// changed again since) and returns that version.
func (r *nodeRecorder) waitSeen(t testing.TB, name string, mark int, what string, cond func(*v1.Node) bool) *v1.Node {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		h := slices.Clone(r.history[name][mark:])
		ch := r.changed
		r.mu.Unlock()
		for _, s := range h {
			if s.node != nil && cond(s.node) {
				return s.node
			}
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("timed out after %s waiting for node %s to have been %s; last seen: %s", waitTimeout, name, what, describeNode(r.latest(name)))
		}
	}
}

// checkHistory reports every version since mark that breaks invariant.
func (r *nodeRecorder) checkHistory(t testing.TB, name string, mark int, what string, invariant func(*v1.Node) bool) {
	t.Helper()
	for _, n := range r.since(name, mark) {
		if !invariant(n) {
			t.Errorf("node %s broke %q at resourceVersion %s: %s", name, what, n.ResourceVersion, describeNode(n))
		}
	}
}

// checkBetween reports every version from mark from to mark to (the version
// current at from included) that breaks invariant.
func (r *nodeRecorder) checkBetween(t testing.TB, name string, from, to int, what string, invariant func(*v1.Node) bool) {
	t.Helper()
	r.mu.Lock()
	h := slices.Clone(r.history[name][max(from-1, 0):to])
	r.mu.Unlock()
	for _, s := range h {
		if s.node != nil && !invariant(s.node) {
			t.Errorf("node %s broke %q at resourceVersion %s: %s", name, what, s.node.ResourceVersion, describeNode(s.node))
		}
	}
}

// checkOnceAlways: from the first version since mark that satisfies once,
// every later version satisfies always.
func (r *nodeRecorder) checkOnceAlways(t testing.TB, name string, mark int, what string, once, always func(*v1.Node) bool) {
	t.Helper()
	seen := false
	for _, n := range r.since(name, mark) {
		seen = seen || once(n)
		if seen && !always(n) {
			t.Errorf("node %s broke %q at resourceVersion %s: %s", name, what, n.ResourceVersion, describeNode(n))
		}
	}
	if !seen {
		t.Errorf("node %s: %q: the starting state was never seen", name, what)
	}
}

// noDuplicateTaint: at most one readiness taint per effect, ever.
func noDuplicateTaint(n *v1.Node) bool {
	return framework.TaintCount(n, taintKey, v1.TaintEffectNoSchedule) <= 1 && framework.TaintCount(n, taintKey, v1.TaintEffectNoExecute) <= 1
}

// ---------------------------------------------------------------------------
// Leases

// renewer keeps one extension's Lease renewed with nodehealth.io/heartbeat's
// Renewer, as the extension's heartbeat does (framework.ExtensionRenewer).
type renewer struct {
	*framework.ExtensionRenewer
	name string
}

type renewOption func(*framework.RenewerOptions)

// leaseDuration sets leaseDurationSeconds (default leaseSeconds).
func leaseDuration(seconds int32) renewOption {
	return func(o *framework.RenewerOptions) { o.Duration = time.Duration(seconds) * time.Second }
}

// skewed writes renewTime off by d, like a node whose clock is wrong.
func skewed(d time.Duration) renewOption { return func(o *framework.RenewerOptions) { o.Skew = d } }

// registered makes the Lease put its extension on the node's list itself;
// affectsReadiness false only tracks it.
func registered(affectsReadiness bool) renewOption {
	return func(o *framework.RenewerOptions) {
		o.Register = true
		if !affectsReadiness {
			o.AffectsReadiness = ptr.To(false)
		}
	}
}

// startRenewer renews the Lease of ext on node once (creating it if needed)
// before returning, then every renewPeriod until stopped.
func (h *harness) startRenewer(t testing.TB, ext, node string, opts ...renewOption) *renewer {
	t.Helper()
	o := framework.RenewerOptions{Namespace: h.leaseNS, Extension: ext, Node: node, Holder: node + "/" + ext,
		Duration: leaseSeconds * time.Second, Interval: renewPeriod}
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(testenv.Context(t), waitTimeout)
	defer cancel()
	r, err := framework.StartExtensionRenewer(ctx, h.env.Client, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return &renewer{ExtensionRenewer: r, name: r.Name()}
}

// stop ends the renewals; the Lease stays as it is and expires.
func (r *renewer) stop() { r.Stop() }

// lastRenewal is when the latest renewal was sent.
func (r *renewer) lastRenewal() time.Time { return r.LastRenewal() }

// release stops renewing and releases the Lease (empty holderIdentity) with
// a reason, which is how an extension asks for the taint.
func (r *renewer) release(t testing.TB, reason, message string) {
	t.Helper()
	if err := r.Release(testenv.Context(t), reason, message); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) deleteLease(t testing.TB, ext, node string) {
	t.Helper()
	name, _ := nodev1alpha1.LeaseName(ext, node)
	if err := h.env.Client.CoordinationV1().Leases(h.leaseNS).Delete(testenv.Context(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCounter polls a counter of the test (renewals, metrics) until it
// reaches want. Counters have no watch; polling them is the signal.
func waitCounter(t testing.TB, what string, want float64, get func() float64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		got := get()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s to reach %v (at %v)", what, want, got)
		}
		select {
		case <-ticker.C:
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		}
	}
}

// ---------------------------------------------------------------------------
// Pods and events

func newPod(name, node string, lbls map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// tolerateReadinessTaint tolerates the readiness taint with every effect,
// like an extension DaemonSet does.
func tolerateReadinessTaint(p *v1.Pod) *v1.Pod {
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: taintKey, Operator: v1.TolerationOpExists})
	return p
}

func (h *harness) createRunningPod(t testing.TB, ns string, pod *v1.Pod) *v1.Pod {
	t.Helper()
	p, err := h.env.Client.CoreV1().Pods(ns).Create(testenv.Context(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.WaitForPod(t, ns, p.Name, framework.PodRunning)
}

// waitPods waits until cond holds for the pods of ns matching selector.
func (h *harness) waitPods(t testing.TB, ns, selector, what string, cond func([]*v1.Pod) bool) []*v1.Pod {
	t.Helper()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return h.env.Client.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return h.env.Client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	var store cache.Store
	var found []*v1.Pod
	check := func() bool {
		var pods []*v1.Pod
		for _, obj := range store.List() {
			pods = append(pods, obj.(*v1.Pod))
		}
		if cond(pods) {
			found = pods
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(testenv.Context(t), lw, &v1.Pod{},
		func(s cache.Store) (bool, error) { store = s; return check(), nil },
		func(watch.Event) (bool, error) { return check(), nil })
	if err != nil {
		var names []string
		if store != nil {
			for _, obj := range store.List() {
				p := obj.(*v1.Pod)
				names = append(names, fmt.Sprintf("%s(node=%q phase=%s deleting=%v)", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil))
			}
		}
		t.Fatalf("waiting for pods in %s (%s) %s: %v; pods: %v", ns, selector, what, err, names)
	}
	return found
}

// nodeEvents lists the Events about a node.
func (h *harness) nodeEvents(t testing.TB, node string) []v1.Event {
	t.Helper()
	list, err := h.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(testenv.Context(t), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitEvent waits for an Event about node with reason whose message contains
// every substring.
func (h *harness) waitEvent(t testing.TB, node, reason string, contains ...string) *v1.Event {
	t.Helper()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", node),
		fields.OneTermEqualSelector("reason", reason)).String()
	lw := cache.NewListWatchFromClient(h.env.Client.CoreV1().RESTClient(), "events", metav1.NamespaceDefault, fields.ParseSelectorOrDie(sel))
	ev, err := framework.WaitFor(testenv.Context(t), lw, func(e *v1.Event) bool {
		for _, c := range contains {
			if !strings.Contains(e.Message, c) {
				return false
			}
		}
		return true
	})
	if err != nil {
		var have []string
		for _, e := range h.nodeEvents(t, node) {
			have = append(have, e.Reason+": "+e.Message)
		}
		t.Fatalf("no event %s %v on node %s: %v; events: %q", reason, contains, node, err, have)
	}
	return ev
}

// kubectl runs the control plane's kubectl as the admin user.
func (h *harness) kubectl(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(testenv.Context(t), h.env.Binary(framework.Kubectl), append([]string{"--kubeconfig", h.env.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func hasEvent(events []v1.Event, reason string) bool {
	return slices.ContainsFunc(events, func(e v1.Event) bool { return e.Reason == reason })
}
