package limits_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	groupLabel = "it.nodehealth.io/group"
	taintKey   = nodev1alpha1.DefaultReadinessTaintKey
	extension  = "kube-proxy"
	// waitTimeout bounds every wait: generous, because the machine is shared.
	waitTimeout = 3 * time.Minute
	// parallelWrites is how many API writes the test issues at once when it
	// creates or changes many objects.
	parallelWrites = 16
)

// world is one test's isolated group of plain nodes and its Lease namespace,
// with a cache of the group's nodes that counts every version it sees.
type world struct {
	t       *testing.T
	env     *framework.Environment
	group   string
	leaseNS string
	// renewers renew kube-proxy's Leases as its heartbeat would, on the
	// nodes whose extension the test does not play a hostile writer for.
	renewers *framework.ExtensionRenewers

	nodes cache.Indexer
	mu    sync.Mutex
	// updates counts the Node updates seen per node; taintAdds the updates
	// that added the readiness taint.
	updates   map[string]int
	taintAdds map[string]int
	noExecute sets.Set[string]
}

func newWorld(t *testing.T, group string) *world {
	t.Helper()
	env := testenv.Env(t)
	w := &world{t: t, env: env, group: group, leaseNS: testenv.NewNamespace(t, "lim-"+group),
		updates: map[string]int{}, taintAdds: map[string]int{}, noExecute: sets.New[string]()}
	// An hour: only the test's releases fail them, and one write each
	// starts them.
	w.renewers = framework.NewExtensionRenewers(env.Client, framework.RenewerOptions{Namespace: w.leaseNS, Extension: extension,
		Duration: time.Hour, Interval: 15 * time.Minute})
	t.Cleanup(w.renewers.StopAll)
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = groupLabel + "=" + group }))
	inf := factory.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*v1.Node), newObj.(*v1.Node)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.updates[n.Name]++
			if !tainted(o) && tainted(n) {
				w.taintAdds[n.Name]++
			}
			if framework.ReadinessTaints(n, v1.TaintEffectNoExecute) > 0 {
				w.noExecute.Insert(n.Name)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	w.nodes = inf.GetIndexer()
	return w
}

// tainted: gated with the readiness taint's NoSchedule effect.
func tainted(n *v1.Node) bool { return framework.ReadinessTaints(n, v1.TaintEffectNoSchedule) > 0 }

// ready: untainted, condition True and the boot record written.
func ready(n *v1.Node) bool {
	return framework.ReadinessTaints(n, "") == 0 && framework.ExtensionsConditionIs(v1.ConditionTrue, nodev1alpha1.ReasonExtensionsReady)(n) &&
		n.Annotations[nodev1alpha1.BootAnnotation] != ""
}

func (w *world) node(name string) *v1.Node {
	obj, ok, _ := w.nodes.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*v1.Node)
}

// waitNodes polls the cache until every named node matches cond.
func (w *world) waitNodes(t testing.TB, names []string, what string, cond func(*v1.Node) bool) {
	t.Helper()
	var bad []string
	err := wait.PollUntilContextCancel(testenv.Context(t), 100*time.Millisecond, true, func(context.Context) (bool, error) {
		bad = bad[:0]
		for _, n := range names {
			if node := w.node(n); node == nil || !cond(node) {
				bad = append(bad, n)
			}
		}
		return len(bad) == 0, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %d of %d nodes do not match, e.g. %s", what, len(bad), len(names), describe(w.node(bad[0])))
	}
}

func (w *world) waitNode(t testing.TB, name, what string, cond func(*v1.Node) bool) {
	t.Helper()
	w.waitNodes(t, []string{name}, what, cond)
}

func describe(n *v1.Node) string {
	if n == nil {
		return "<absent>"
	}
	c := framework.ExtensionsCondition(n)
	cs := "<no condition>"
	if c != nil {
		cs = fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("%s taints=%v condition=%s", n.Name, n.Spec.Taints, cs)
}

func (w *world) counts() (updates, taintAdds map[string]int, noExecute []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u, a := map[string]int{}, map[string]int{}
	for k, v := range w.updates {
		u[k] = v
	}
	for k, v := range w.taintAdds {
		a[k] = v
	}
	return u, a, sets.List(w.noExecute)
}

// createNodes creates plain nodes of the world's group that list the
// extension by hand, each with the extra labels labelsOf gives, and deletes
// them when the test ends.
func (w *world) createNodes(t testing.TB, names []string, labelsOf func(string) map[string]string, annotate func(*v1.Node)) {
	t.Helper()
	parallel(t, len(names), func(ctx context.Context, i int) error {
		l := map[string]string{groupLabel: w.group}
		for k, v := range labelsOf(names[i]) {
			l[k] = v
		}
		n := framework.NewUnmanagedNode(names[i], l)
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"` + extension + `"}]`}
		n.Status.NodeInfo.BootID = "boot-1"
		if annotate != nil {
			annotate(n)
		}
		_, err := w.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		// The test's contexts are canceled by now.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := parallelErr(ctx, len(names), func(ctx context.Context, i int) error { return w.env.DeleteNode(ctx, names[i]) }); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// leaseFor is the extension's Lease of a node as a hostile or odd writer
// would write it by hand, held and renewed now, for the test to change; an
// ordinary extension's Lease is renewed by w.renewers.
func (w *world) leaseFor(node string, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: extension + "." + node, Namespace: w.leaseNS, Labels: nodev1alpha1.LeaseLabels(extension, node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(extension + "-" + node), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}

func (w *world) createLeases(t testing.TB, leases []*coordinationv1.Lease) {
	t.Helper()
	parallel(t, len(leases), func(ctx context.Context, i int) error {
		_, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Create(ctx, leases[i], metav1.CreateOptions{})
		return err
	})
}

// release stops the heartbeat of the extension on each node and releases its
// Lease with a reason and a message, as a heartbeat whose probe failed does.
func (w *world) release(t testing.TB, nodes []string) {
	t.Helper()
	if err := w.renewers.Release(testenv.Context(t), "ProbeFailed", "GET http://127.0.0.1:10256/healthz: connection refused", nodes...); err != nil {
		t.Fatal(err)
	}
}

// renew starts the heartbeat of the extension on each node, which acquires
// its Lease (again), and returns once each was written.
func (w *world) renew(t testing.TB, nodes []string) {
	t.Helper()
	if err := w.renewers.Start(klog.NewContext(testenv.Context(t), logr.Discard()), nodes...); err != nil {
		t.Fatal(err)
	}
}

// parallel runs do(i) for i in [0, n) with parallelWrites at once and fails
// the test on the first error.
func parallel(t testing.TB, n int, do func(ctx context.Context, i int) error) {
	t.Helper()
	if err := parallelErr(testenv.Context(t), n, do); err != nil {
		t.Fatal(err)
	}
}

// parallelErr runs do(i) for i in [0, n) with parallelWrites at once and
// returns the first error; it may run on any goroutine.
func parallelErr(ctx context.Context, n int, do func(ctx context.Context, i int) error) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range min(parallelWrites, n) {
		wg.Go(func() {
			for i := range work {
				if err := do(ctx, i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// events returns the messages of the Events with reason on node.
func (w *world) events(t testing.TB, node, reason string) []string {
	t.Helper()
	list, err := w.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(testenv.Context(t), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": node, "reason": reason}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// waitEvent waits for an Event with reason on node whose message contains
// every substring, and returns its message.
func (w *world) waitEvent(t testing.TB, node, reason string, message ...string) string {
	t.Helper()
	var found string
	err := wait.PollUntilContextCancel(testenv.Context(t), 250*time.Millisecond, true, func(context.Context) (bool, error) {
	events:
		for _, m := range w.events(t, node, reason) {
			for _, s := range message {
				if !strings.Contains(m, s) {
					continue events
				}
			}
			found = m
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on %s containing %q: %v; seen %q", reason, node, message, err, w.events(t, node, reason))
	}
	return found
}

func (w *world) options() nodehealth.Options {
	return nodehealth.Options{
		LeaseNamespace:     w.leaseNS,
		TaintKey:           taintKey,
		TaintEffect:        v1.TaintEffectNoSchedule,
		RenewalGrace:       time.Second,
		RegistrationGrace:  3 * time.Second,
		MaintenanceReasons: sets.New(nodev1alpha1.ReasonUpdating),
		Eviction:           nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeNone},
		// The shipped defaults (deploy/config): 20 % of the cluster, 55 %
		// of a zone.
		BlastRadius:    nodehealth.BlastRadiusOptions{ClusterThreshold: 0.20, ZoneThreshold: 0.55},
		CanaryInterval: 2 * time.Second,
		Identity:       "it-" + w.group,
	}
}

// startController runs the controller in process (inprocess.StartController)
// on the world's group of nodes.
func (w *world) startController(t testing.TB, opts nodehealth.Options) *inprocess.Controller {
	t.Helper()
	return inprocess.StartController(t, w.env.Config, groupLabel+"="+w.group, opts)
}
