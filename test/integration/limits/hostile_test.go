package limits_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Hostile input through the API (issue 13, item 8). Everything a Lease or a
// Node writer can send at once: Leases with huge annotations and holder, a
// holder flipping every 100 ms, renewTimes far in the past and the future,
// Lease names that belong to no node, 10,000 self-registering Leases for one
// node, node annotations at the API's size limit. Meanwhile a witness node
// must be gated and ungated as always, and every bad input must be reported
// (Event, condition or log line) with what it cost bounded.
func TestHostileLeasesAndNodesDoNotKeepTheControllerFromServingTheRest(t *testing.T) {
	const registrations = 10_000
	w := newWorld(t, "abuse")
	const (
		witness = "abuse-witness"
		flip    = "abuse-flip"
		reg     = "abuse-reg"
		fat     = "abuse-fat"
		fatList = "abuse-fatlist"
		big     = "abuse-big"
		future  = "abuse-future"
		past    = "abuse-past"
	)
	names := []string{witness, flip, reg, fat, fatList, big, future, past}
	w.createNodes(t, names, func(string) map[string]string { return nil }, func(n *v1.Node) {
		switch n.Name {
		case fat:
			// The API allows 256 KiB of annotations in all.
			n.Annotations["junk.example.com/blob"] = strings.Repeat("j", 250_000)
		case fatList:
			n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"kube-proxy"}]` + strings.Repeat(" ", 250_000)
		}
	})
	// The witness's and the nodes' whose abuse is elsewhere: renewed as
	// kube-proxy's heartbeat would. The others' are written by hand below.
	w.renew(t, []string{witness, reg, fat, fatList})
	leases := []*coordinationv1.Lease{w.leaseFor(flip, 3600)}
	bigLease := w.leaseFor(big, 3600)
	bigLease.Spec.HolderIdentity = ptr.To(strings.Repeat("h", 64*1024))
	bigLease.Annotations = map[string]string{"junk.example.com/blob": strings.Repeat("j", 150_000)}
	// A renewTime far in the future or the past is the extension's claim,
	// not an observation: each counts as one renewal seen now, and expires
	// a lease duration (+ grace) later.
	farFuture := w.leaseFor(future, 5)
	farFuture.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	farPast := w.leaseFor(past, 5)
	farPast.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC)}
	leases = append(leases, bigLease, farFuture, farPast)
	// Names that belong to no node: no dot, an extension part too long for
	// a DNS label, a node that does not exist.
	noNode := []string{"no-dot", strings.Repeat("e", 70) + "." + witness, extension + ".abuse-ghost"}
	for _, name := range noNode {
		l := w.leaseFor("x", 3600)
		l.Name = name
		leases = append(leases, l)
	}
	w.createLeases(t, leases)

	// The API server refuses a zero or negative duration itself.
	for _, d := range []int32{0, -5} {
		l := w.leaseFor("abuse-duration", d)
		_, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Create(testenv.Context(t), l, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("creating a Lease with leaseDurationSeconds %d: %v, want Invalid", d, err)
		}
	}

	opts := w.options()
	// Three of these few nodes fail on purpose (far-future, far-past,
	// huge release): with the blast radius on, that share would suspend
	// gating and hide whether the witness is served.
	opts.BlastRadius = nodehealth.BlastRadiusOptions{}
	run := w.startController(t, opts)
	heapBefore := heapInUse()
	w.waitNodes(t, []string{witness, flip, reg, fat, big}, "ready", ready)

	// The oversized list is reported, and the node keeps its (untainted)
	// state.
	w.waitEvent(t, fatList, nodehealth.EventInvalidExtensionList, "is 250023 bytes, more than the limit of 32768")
	w.waitNode(t, fatList, "condition Unknown", framework.ExtensionsConditionIs(v1.ConditionUnknown, nodehealth.EventInvalidExtensionList, "more than the limit of 32768"))
	// Far-future and far-past renewTimes expire like any silent Lease.
	for _, n := range []string{future, past} {
		w.waitNode(t, n, "gated: its only renewal expired", func(n *v1.Node) bool {
			return tainted(n) && framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonExtensionsNotReady, extension+" (LeaseExpired")(n)
		})
	}
	// Lease names that belong to no node are said once in the log, not at
	// every renewal: each is renewed twice more, before the witness's
	// cycle below, which the same watch delivers after them.
	for range 2 {
		for _, name := range noNode {
			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{
				"renewTime": metav1.NewMicroTime(time.Now()).Format(metav1.RFC3339Micro)}})
			if _, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Patch(testenv.Context(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond) // a new renewTime each round
	}
	saidOnce := func() {
		t.Helper()
		for _, name := range noNode[:2] {
			if n := logLinesWith(run.Logs(), "Lease name is not <extension>.<node>", `"`+w.leaseNS+"/"+name+`"`); n != 1 {
				t.Errorf("Lease %s, whose name belongs to no node, is said %d times in the log, want once", name, n)
			}
		}
	}

	// The abuse, all at once.
	updatesBefore, _, _ := w.counts()
	ctx, stop := context.WithCancel(testenv.Context(t))
	var flips atomic.Int64
	var abuse sync.WaitGroup
	abuse.Go(func() {
		// Two holders fighting over one Lease, every 100 ms.
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"holderIdentity": fmt.Sprintf("holder-%d", i%2),
				"renewTime": metav1.NewMicroTime(time.Now()).Format(metav1.RFC3339Micro)}})
			if _, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Patch(ctx, extension+"."+flip, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				flips.Add(1)
			}
		}
	})
	registered := make(chan error, 1)
	abuse.Go(func() {
		// Its own deadline: 10,000 creates take 20 s on a quiet machine,
		// minutes on a loaded one.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		registered <- parallelErr(ctx, registrations, func(ctx context.Context, i int) error {
			l := w.leaseFor("x", 3600)
			l.Name = fmt.Sprintf("x%d.%s", i, reg)
			l.Labels = map[string]string{nodev1alpha1.RegisterLabel: "true"}
			_, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Create(ctx, l, metav1.CreateOptions{})
			return err
		})
	})
	// A release with a message of 50,000 bytes and a reason of 10,000.
	release, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{nodev1alpha1.ReasonAnnotation: strings.Repeat("R", 10_000),
			nodev1alpha1.MessageAnnotation: strings.Repeat("m", 50_000)}},
		"spec": map[string]any{"holderIdentity": ""},
	})
	if _, err := w.env.Client.CoordinationV1().Leases(w.leaseNS).Patch(testenv.Context(t), extension+"."+big, types.MergePatchType, release, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// witnessCycle: the witness is gated when its extension fails and
	// ungated when it returns, as on any day.
	witnessCycle := func(when string) {
		w.release(t, []string{witness})
		w.waitNode(t, witness, "witness gated "+when, func(n *v1.Node) bool {
			return tainted(n) && framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonExtensionsNotReady, extension+" (LeaseReleased")(n)
		})
		w.renew(t, []string{witness})
		w.waitNode(t, witness, "witness ungated "+when, ready)
	}
	witnessCycle("while the abuse starts")
	saidOnce()

	w.waitNode(t, big, "gated with a bounded message", func(n *v1.Node) bool {
		return tainted(n) && framework.ExtensionsConditionIs(v1.ConditionFalse, nodev1alpha1.ReasonExtensionsNotReady, "truncated, 50000 bytes")(n)
	})
	if c := framework.ExtensionsCondition(w.node(big)); len(c.Message) > 4096 {
		t.Errorf("condition message of %d bytes for a 50,000-byte Lease message", len(c.Message))
	}
	for _, m := range w.events(t, big, nodehealth.EventExtensionNotReady) {
		if len(m) > 2048 {
			t.Errorf("ExtensionNotReady Event of %d bytes", len(m))
		}
	}

	if err := <-registered; err != nil {
		t.Fatalf("creating %d self-registering Leases: %v", registrations, err)
	}
	witnessCycle(fmt.Sprintf("with %d self-registering Leases on one node", registrations))
	stop()
	abuse.Wait()

	// 10,000 registrations: reported once; the list holds the oldest up
	// to the limit and the node is still evaluated (its condition is
	// written, it is not frozen in an unknown state).
	w.waitEvent(t, reg, nodehealth.EventTooManyRegistrations, "Leases that self-register", "at most 64 entries")
	w.waitNode(t, reg, "a full list, evaluated, untainted", func(n *v1.Node) bool {
		list, err := nodev1alpha1.DecodeSystemExtensions(n.Annotations[nodev1alpha1.SystemExtensionsAnnotation], w.leaseNS)
		return err == nil && len(list) == nodev1alpha1.MaxSystemExtensions && !tainted(n) && framework.ExtensionsCondition(n).Status != v1.ConditionUnknown
	})
	if ev := w.events(t, reg, nodehealth.EventTooManyRegistrations); len(ev) != 1 {
		t.Errorf("TooManyRegistrations reported %d times: %q", len(ev), ev)
	}

	// Two holders fighting cost no Node write and no gate.
	updatesAfter, adds, _ := w.counts()
	t.Logf("%d holder flips of %s", flips.Load(), flip)
	if flips.Load() < 20 {
		t.Errorf("only %d flips: the abuse did not run", flips.Load())
	}
	if d := updatesAfter[flip] - updatesBefore[flip]; d != 0 || adds[flip] != 0 {
		t.Errorf("node %s written %d times (%d taints) while its holder flipped", flip, d, adds[flip])
	}
	if d := updatesAfter[fat] - updatesBefore[fat]; d != 0 || !ready(w.node(fat)) {
		t.Errorf("node %s with 250 KB of other annotations written %d times; now %s", fat, d, describe(w.node(fat)))
	}

	// What the controller keeps is bounded: one invalid list (the node
	// with too many registrations is evaluated with a capped list), one
	// extension series.
	if got := run.Metric("nodehealth_invalid_extension_lists", nil); got != 1 {
		t.Errorf("invalid_extension_lists = %v, want 1 (%s)", got, fatList)
	}
	// Exactly one: a series per abusive Lease would be more, and a metric
	// that is not exported at all none.
	if got := run.Series("nodehealth_extension_not_ready_nodes"); got != 1 {
		t.Errorf("extension_not_ready_nodes has %d series, want 1 (%s)", got, extension)
	}
	heapAfter := heapInUse()
	t.Logf("test process (controller, informers, test clients) heap in use after GC: %.1f MiB before the abuse, %.1f MiB after; RSS %s; %d Leases in the namespace",
		float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), rss(), len(leases)+registrations)
	// The informers' copies of 10,000 small Leases are a few MiB; a
	// controller that kept what each abusive event carried (a 50 KB
	// message, a 64 KB holder, every flip) would grow far past this.
	if grown := int64(heapAfter) - int64(heapBefore); grown > maxHostileHeapGrowth {
		t.Errorf("the test process's heap grew by %.1f MiB during the abuse, more than %d MiB", float64(grown)/(1<<20), maxHostileHeapGrowth>>20)
	}
}

// maxHostileHeapGrowth bounds what the abuse may add to the heap of the
// process that runs the controller: about 15 MiB measured on 2026-11-28.
const maxHostileHeapGrowth = 64 << 20

// logLinesWith counts the log lines that contain every one of parts.
func logLinesWith(logs string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
