package nodehealth_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// controllerWrites lists the managedFields entries of the in-process
// controllers on a node (their field manager is inprocess.UserAgent).
func controllerWrites(n *v1.Node) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, m := range n.ManagedFields {
		if m.Manager == inprocess.UserAgent {
			out = append(out, m)
		}
	}
	return out
}

// sameForController reports whether two versions of a node differ in nothing
// the controller writes: taints, its annotations, its condition.
func sameForController(a, b *v1.Node) bool {
	ca, cb := framework.ExtensionsCondition(a), framework.ExtensionsCondition(b)
	return reflect.DeepEqual(a.Spec.Taints, b.Spec.Taints) &&
		a.Annotations[nodev1alpha1.SystemExtensionsAnnotation] == b.Annotations[nodev1alpha1.SystemExtensionsAnnotation] &&
		a.Annotations[nodev1alpha1.BootAnnotation] == b.Annotations[nodev1alpha1.BootAnnotation] &&
		reflect.DeepEqual(ca, cb) &&
		reflect.DeepEqual(controllerWrites(a), controllerWrites(b))
}

// At steady state (every extension renewing) the controller writes no Node:
// over two lease durations of renewals, which it observes and evaluates,
// nodes see no write of the controller at all.
func TestSteadyStateNoNodeWrites(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "steady")
	run := h.startController(t, h.options(h.rule("cni", nil), h.rule("proxy", nil)))
	names := []string{"steady-n1", "steady-n2", "steady-n3"}
	var renewers []*renewer
	for _, n := range names {
		h.createNode(t, n)
		renewers = append(renewers, h.startRenewer(t, "cni", n), h.startRenewer(t, "proxy", n))
	}
	for _, n := range names {
		h.nodes.wait(t, n, "ready and schedulable (kwok and node-lifecycle-controller done)", framework.AllOf(readyNode, framework.NodeSchedulable))
	}

	marks := map[string]int{}
	base := map[string]*v1.Node{}
	for _, n := range names {
		marks[n] = h.nodes.mark(n)
		base[n] = h.nodes.latest(n)
	}
	writes := func() float64 {
		return run.Metric("nodehealth_taint_writes_total", nil) + run.Metric("nodehealth_condition_writes_total", nil) +
			run.Metric("nodehealth_extension_list_writes_total", nil)
	}
	// The watch can show a write before the controller has counted it (the
	// counter moves after the API call returns): start the window once the
	// gate and ungate of every node are counted and the counters have been
	// still for a second, so a write from before the window is not charged
	// to it. A write inside the window still shows as a node change below.
	waitCounter(t, "taint writes of the gate and ungate of every node", float64(2*len(names)), func() float64 {
		return run.Metric("nodehealth_taint_writes_total", nil)
	})
	writesBefore := settled(t, writes)
	// A steady node whose timer fires is looked at again either by a full
	// evaluation or, when every Lease was renewed since, by a timer recheck
	// that only moves the timer: both count as the controller having seen it.
	looks := func() float64 {
		return run.Metric("nodehealth_evaluations_total", nil) + run.Metric("nodehealth_timer_rechecks_total", nil)
	}
	looksBefore := looks()
	start := time.Now()

	// The window: two lease durations of renewals by every extension, and
	// every node looked at again meanwhile (by a renewal or its expiry timer).
	renewals := 2 * leaseSeconds * int64(time.Second/renewPeriod)
	want := map[*renewer]int64{}
	for _, r := range renewers {
		want[r] = r.Renewals() + renewals
	}
	for _, r := range renewers {
		waitCounter(t, "renewals of "+r.name, float64(want[r]), func() float64 { return float64(r.Renewals()) })
	}
	waitCounter(t, "evaluations and timer rechecks", looksBefore+float64(len(names)), looks)
	t.Logf("steady-state window: %s, %v evaluations and timer rechecks", time.Since(start).Round(time.Millisecond),
		looks()-looksBefore)

	if d := writes() - writesBefore; d != 0 {
		t.Errorf("the controller wrote %v times at steady state", d)
	}
	for _, n := range names {
		events := h.nodes.snapshotsSince(n, marks[n])
		for _, s := range events {
			if s.node == nil || !sameForController(base[n], s.node) {
				t.Errorf("node %s changed at steady state: %s", n, describeNode(s.node))
			}
		}
		t.Logf("node %s: %d watch events in the window (kwok/kubelet status only)", n, len(events))
	}
}

// settled returns get's value once it has not changed for a second.
func settled(t testing.TB, get func() float64) float64 {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	last, since := get(), time.Now()
	for time.Since(since) < time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("counter still moving after %s (at %v)", waitTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
		if v := get(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

// Restarting the controller does not flap any node: a ready node is not
// written, a gated node with a dead extension keeps its taint through the
// new controller's grace window (every Lease counts as renewed when it
// starts), a node without extensions stays untouched.
func TestRestartDoesNotFlap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "restart")
	opts := h.options(h.rule("agent", map[string]string{"it.nodehealth.io/needs": "agent"}))
	first := h.startController(t, opts)
	needs := withLabels(map[string]string{"it.nodehealth.io/needs": "agent"})
	ready := h.createNode(t, "restart-ready", needs)
	dead := h.createNode(t, "restart-dead", needs)
	probe := h.createNode(t, "restart-probe", needs)
	bare := h.createNode(t, "restart-bare")
	h.startRenewer(t, "agent", ready)
	rd := h.startRenewer(t, "agent", dead)
	rp := h.startRenewer(t, "agent", probe)
	for _, n := range []string{ready, dead, probe} {
		h.nodes.wait(t, n, "ready and schedulable", framework.AllOf(readyNode, framework.NodeSchedulable))
	}
	h.nodes.wait(t, bare, "schedulable, never written", framework.AllOf(framework.NodeSchedulable, func(n *v1.Node) bool {
		return ungated(n) && framework.ExtensionsCondition(n) == nil && len(controllerWrites(n)) == 0
	}))
	rd.stop()
	h.nodes.wait(t, dead, "tainted for the dead extension", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "ExtensionsNotReady", "agent (LeaseExpired")))

	marks := map[string]int{}
	base := map[string]*v1.Node{}
	for _, n := range []string{ready, dead, bare} {
		marks[n] = h.nodes.mark(n)
		base[n] = h.nodes.latest(n)
	}
	first.Stop()
	// The probe's extension dies with the restart: the new controller can
	// only taint it once the grace it gives every Lease at start is over,
	// so its taint shows that the window where a flap could happen passed.
	rp.stop()
	probeMark := h.nodes.mark(probe)
	restarted := time.Now()
	h.startController(t, opts)
	_, at := h.nodes.waitAt(t, probe, "tainted by the new controller", gated)
	if at.Sub(restarted) < expiry {
		t.Errorf("probe tainted %s after the restart, within the grace the new controller must give every Lease (%s)", at.Sub(restarted), expiry)
	}
	h.nodes.checkBetween(t, probe, probeMark, probeMark, "untainted before the restart", ungated)

	h.nodes.checkHistory(t, dead, marks[dead], "tainted throughout the restart", func(n *v1.Node) bool {
		return gated(n) && noDuplicateTaint(n)
	})
	h.nodes.checkHistory(t, ready, marks[ready], "not tainted", ungated)
	for _, n := range []string{ready, bare} {
		h.nodes.checkHistory(t, n, marks[n], "not written by the new controller", func(v *v1.Node) bool {
			return sameForController(base[n], v)
		})
	}
}

// A concurrent writer toggling its own taint while the controller gates and
// ungates the node never loses an update, and neither does the controller.
func TestAnotherWriterTogglingItsTaintLosesNoUpdateAndNeitherDoesTheController(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "writer")
	run := h.startController(t, h.options(h.rule("agent", nil)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller metrics: condition writes success=%v error=%v; taint writes success=%v conflict=%v error=%v",
				run.Metric("nodehealth_condition_writes_total", map[string]string{"result": "success"}),
				run.Metric("nodehealth_condition_writes_total", map[string]string{"result": "error"}),
				run.Metric("nodehealth_taint_writes_total", map[string]string{"result": "success"}),
				run.Metric("nodehealth_taint_writes_total", map[string]string{"result": "conflict"}),
				run.Metric("nodehealth_taint_writes_total", map[string]string{"result": "error"}))
		}
	})
	node := h.createNode(t, "writer-n1")
	r := h.startRenewer(t, "agent", node, leaseDuration(3600))
	h.nodes.wait(t, node, "ready", readyNode)
	mark := h.nodes.mark(node)

	const otherKey = "example.com/maintenance"
	type write struct {
		rv      string
		present bool
		value   string
	}
	var (
		mu     sync.Mutex
		writes []write
	)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	var stopOnce sync.Once
	stopWriter := func() { stopOnce.Do(func() { close(stop) }); <-stopped }
	t.Cleanup(stopWriter)
	nodes := h.env.Client.CoreV1().Nodes()
	// The writer does what kubectl taint does: read, change the list,
	// Update with the resourceVersion it read, retry on conflict.
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			for {
				n, err := nodes.Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					break
				}
				var taints []v1.Taint
				present := false
				for _, tn := range n.Spec.Taints {
					if tn.Key == otherKey {
						present = true
					} else {
						taints = append(taints, tn)
					}
				}
				value := strconv.Itoa(i)
				if !present {
					taints = append(taints, v1.Taint{Key: otherKey, Value: value, Effect: v1.TaintEffectPreferNoSchedule})
				}
				n.Spec.Taints = taints
				updated, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
				if apierrors.IsConflict(err) {
					continue
				}
				if err == nil {
					mu.Lock()
					writes = append(writes, write{rv: updated.ResourceVersion, present: !present, value: value})
					mu.Unlock()
				}
				break
			}
			cancel()
		}
	}()

	for i := range 4 {
		r.release(t, "Cycle", fmt.Sprint(i))
		h.nodes.wait(t, node, fmt.Sprintf("gated (cycle %d)", i), gated)
		r = h.startRenewer(t, "agent", node, leaseDuration(3600))
		h.nodes.wait(t, node, fmt.Sprintf("ungated (cycle %d)", i), framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady")))
	}
	stopWriter()

	// Leave the writer's taint on and gate/ungate once more.
	for {
		final, err := nodes.Get(testenv.Context(t), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if framework.TaintCount(final, otherKey, "") != 0 {
			break
		}
		final.Spec.Taints = append(final.Spec.Taints, v1.Taint{Key: otherKey, Value: "final", Effect: v1.TaintEffectPreferNoSchedule})
		updated, err := nodes.Update(testenv.Context(t), final, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, write{rv: updated.ResourceVersion, present: true, value: "final"})
		break
	}
	r.release(t, "Cycle", "last")
	h.nodes.wait(t, node, "gated with the other taint", framework.AllOf(gated, func(n *v1.Node) bool { return framework.TaintCount(n, otherKey, "") == 1 }))
	h.startRenewer(t, "agent", node, leaseDuration(3600))
	n := h.nodes.wait(t, node, "ungated with the other taint", framework.AllOf(ungated, framework.ExtensionsConditionIs(v1.ConditionTrue, "ExtensionsReady")))
	if framework.TaintCount(n, otherKey, "") != 1 {
		t.Errorf("the other writer's taint was lost: %s", describeNode(n))
	}
	if len(writes) < 2 {
		t.Errorf("the writer only wrote %d times", len(writes))
	}
	t.Logf("the writer wrote %d times during %d gate/ungate cycles", len(writes), 5)

	// Every version between two of the writer's writes shows what the
	// earlier one wrote: nobody overwrote it.
	versions := h.nodes.since(node, mark)
	w := -1
	for _, v := range versions {
		for w+1 < len(writes) && writes[w+1].rv == v.ResourceVersion {
			w++
		}
		if !noDuplicateTaint(v) || framework.TaintCount(v, otherKey, "") > 1 {
			t.Errorf("duplicate taint at resourceVersion %s: %v", v.ResourceVersion, v.Spec.Taints)
		}
		if w < 0 {
			continue
		}
		if got := framework.TaintCount(v, otherKey, "") == 1; got != writes[w].present {
			t.Errorf("resourceVersion %s: writer's taint present = %v, but its last write (rv %s) set %v: %v",
				v.ResourceVersion, got, writes[w].rv, writes[w].present, v.Spec.Taints)
		}
	}
	if w != len(writes)-1 {
		t.Errorf("only %d of the writer's %d writes were seen in the node's history", w+1, len(writes))
	}
}

// A writer adding manual entries to a node's extension list in a tight loop
// (what kubectl nodehealth register does: read, add, Update with the
// resourceVersion it read, retry on conflict) while the controller rewrites
// the same list for a rule that starts and stops matching and for a Lease
// that registers itself and goes away: no entry is ever lost, in any version
// of the node (docs/system-extensions.md).
func TestConcurrentListWritersLoseNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "listwriter")
	const needs = "it.nodehealth.io/needs"
	h.startController(t, h.options(h.rule("agent", map[string]string{needs: "agent"})))
	node := h.createNode(t, "listwriter-n1")
	mark := h.nodes.mark(node)
	nodes := h.env.Client.CoreV1().Nodes()

	// Paced so that the writer overlaps several rounds of the controller's
	// own list writes below.
	const entries = 50
	const pace = 100 * time.Millisecond
	writerDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		ticker := time.NewTicker(pace)
		defer ticker.Stop()
		for i := range entries {
			<-ticker.C
			for {
				n, err := nodes.Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					writerDone <- err
					return
				}
				list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], h.leaseNS)
				if err != nil {
					writerDone <- err
					return
				}
				list = append(list, nodev1alpha1.SystemExtension{Name: fmt.Sprintf("manual-%d", i), AffectsReadiness: ptr.To(false)})
				value, err := nodev1alpha1.EncodeSystemExtensions(list, node, h.leaseNS)
				if err != nil {
					writerDone <- err
					return
				}
				// The node has no annotations until the controller's first
				// write, which a slow machine may not have made yet (cold
				// CI, 2026-12-01: the writer panicked on the nil map).
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = value
				_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
				if apierrors.IsConflict(err) {
					continue
				}
				if err != nil {
					writerDone <- err
					return
				}
				break
			}
		}
		writerDone <- nil
	}()

	// Meanwhile the controller has list writes of its own to make.
	agent := "agent"
	var writerErr error
	done := false
	for round := 0; !done; round++ {
		h.labelNode(t, node, needs, &agent)
		h.nodes.wait(t, node, "rule entry added", listHas("agent", nodev1alpha1.RuleSource("agent")))
		r := h.startRenewer(t, "selfreg", node, registered(false))
		h.nodes.wait(t, node, "self-registered entry added", listHas("selfreg", nodev1alpha1.SourceLease))
		h.labelNode(t, node, needs, nil)
		r.stop()
		h.deleteLease(t, "selfreg", node)
		h.nodes.wait(t, node, "rule and self-registered entries removed", func(n *v1.Node) bool {
			return !listHas("agent", nodev1alpha1.RuleSource("agent"))(n) && !listHas("selfreg", nodev1alpha1.SourceLease)(n)
		})
		select {
		case writerErr = <-writerDone:
			done = true
		default:
		}
	}
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}

	// Every version of the node holds every manual entry an earlier one held.
	seen := map[string]bool{}
	for _, n := range h.nodes.since(node, mark) {
		list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], h.leaseNS)
		if err != nil {
			t.Fatalf("version %s: %v", n.ResourceVersion, err)
		}
		have := map[string]bool{}
		for _, e := range list {
			have[e.Name] = true
		}
		for name := range seen {
			if !have[name] {
				t.Fatalf("version %s lost manual entry %s: %s", n.ResourceVersion, name, describeNode(n))
			}
		}
		for name := range have {
			if strings.HasPrefix(name, "manual-") {
				seen[name] = true
			}
		}
	}
	final, err := nodes.Get(testenv.Context(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := extensionList(t, final, h.leaseNS)
	for i := range entries {
		if !slices.ContainsFunc(list, func(e nodev1alpha1.SystemExtension) bool { return e.Name == fmt.Sprintf("manual-%d", i) }) {
			t.Errorf("manual-%d is missing from the final list %s", i, final.Annotations[nodev1alpha1.SystemExtensionsAnnotation])
		}
	}
}
