package nodehealth_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/kubectlplugin"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/inprocess"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// startupTolerance is how much later than the test's own watch saw an
// extension's first renewal a recorded start-up time may be: the difference
// between two watchers of one API server, a renewal the worker may have
// coalesced with the next one (renewPeriod), and a slow shared machine. It
// may be earlier than the renewal was sent only by as much as the controller
// took to see the node (the gate's start is somewhere between the creation
// and the test seeing the taint), plus the rounding. The bound is the
// watch's, not the renewal's answer: on a loaded machine the API server
// answers the write and then takes seconds more to deliver it to its
// watchers, the controller's and the test's alike (CI, 2026-12-01: proxy's
// Lease written 3.1 s after the node's creation and seen by the controller
// at 8 s).
const startupTolerance = 2 * time.Second

// sameInstant is how close two extensions' first renewals, as the test's
// watch saw them, may be for the controller to have seen them in either
// order.
const sameInstant = time.Second

// A new node whose three extensions come up at known offsets after its
// creation gets a start-up timeline in its boot record that matches them,
// histogram observations that match them, and a NodeUngated Event naming the
// slowest.
func TestStartupTimelineMatchesTheExtensionsOffsets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "startup")
	run := h.startController(t, h.options(h.rule("proxy", nil), h.rule("csi", nil), h.rule("cni", nil)))

	offsets := []struct {
		ext string
		at  time.Duration
	}{{"proxy", time.Second}, {"csi", 5 * time.Second}, {"cni", 10 * time.Second}}
	created := time.Now()
	seen := h.watchFirstRenewals(t)
	node := h.createNode(t, "startup-n1")
	_, gatedSeen := h.nodes.waitAt(t, node, "gated as new", framework.AllOf(gated, framework.ExtensionsConditionIs(v1.ConditionFalse, "NodeRegistered")))
	// The controller observed the node at most this long after the test
	// created it.
	seenWithin := gatedSeen.Sub(created)
	// An extension's first renewal is sent somewhere between the start of
	// startRenewer and its return (the create's answer): on a loaded
	// machine the API server alone can take seconds.
	sent := map[string]span{}
	leases := map[string]string{}
	for _, o := range offsets {
		time.Sleep(time.Until(created.Add(o.at)))
		from := time.Since(created)
		leases[o.ext] = h.startRenewer(t, o.ext, node).name
		sent[o.ext] = span{from, time.Since(created)}
	}
	n := h.nodes.wait(t, node, "ungated with a start-up timeline", framework.AllOf(readyNode, func(n *v1.Node) bool {
		return timelineOf(n) != nil
	}))
	// The latest a recorded start-up may be: when the test's watch saw the
	// first renewal, or the renewal's answer if the watch was quicker.
	for ext, lease := range leases {
		at := seen.at(t, lease).Sub(created)
		t.Logf("%s: first renewal sent %s to %s after the node's creation, seen by the test's watch at %s", ext, sent[ext].from, sent[ext].to, at)
		if sp := sent[ext]; at > sp.to {
			sent[ext] = span{sp.from, at}
		}
	}

	tl := timelineOf(n)
	t.Logf("timeline: %s", n.Annotations[nodev1alpha1.BootAnnotation])
	if tl.Cause != nodev1alpha1.ReasonNodeRegistered || tl.FoundAtStart {
		t.Errorf("cause %s, foundAtStart %v; want NodeRegistered, seen live", tl.Cause, tl.FoundAtStart)
	}
	within := func(what string, got time.Duration, want span) {
		t.Helper()
		if got < want.from-seenWithin-nodev1alpha1.StartupResolution || got > want.to+startupTolerance {
			t.Errorf("%s: %s, want %s to %s (-%s, +%s)", what, got, want.from, want.to, seenWithin, startupTolerance)
		}
	}
	if len(tl.Extensions) != 3 {
		t.Fatalf("timeline lists %d extensions, want 3: %+v", len(tl.Extensions), tl.Extensions)
	}
	// Slowest first, as the world saw them: an extension listed before
	// another was not seen ready clearly before it.
	for i, e := range tl.Extensions {
		if _, ok := sent[e.Name]; !ok || e.Ready == nil {
			t.Errorf("extension %d is %s (ready %v), want one of %v with its time", i, e.Name, e.Ready, leases)
			continue
		}
		within(e.Name+" ready", e.Ready.Duration, sent[e.Name])
		if i > 0 {
			if prev := tl.Extensions[i-1].Name; sent[prev].to+sameInstant < sent[e.Name].to {
				t.Errorf("%s is listed before %s, slowest first, but its first renewal was seen %s earlier", prev, e.Name, sent[e.Name].to-sent[prev].to)
			}
		}
	}
	names := sets.New[string]()
	for _, e := range tl.Extensions {
		names.Insert(e.Name)
	}
	if !names.Equal(sets.KeySet(leases)) {
		t.Errorf("timeline lists %v, want %v", sets.List(names), sets.List(sets.KeySet(leases)))
	}
	slowest, next := tl.Extensions[0].Name, tl.Extensions[1].Name
	within("ungated", tl.Ready.Duration, sent[slowest])
	if tl.Ready.Duration < tl.Extensions[0].Ready.Duration {
		t.Errorf("ungated at %s, before the slowest extension was ready (%s)", tl.Ready.Duration, tl.Extensions[0].Ready.Duration)
	}
	// creationTimestamp is whole seconds (the API server's clock): up to a
	// second earlier than the creation.
	if tl.SinceCreation == nil {
		t.Error("no time since creation for a new node")
	} else if d := tl.SinceCreation.Duration - tl.Ready.Duration; d < -100*time.Millisecond || d > startupTolerance+time.Second {
		t.Errorf("since creation %s, ungated %s after the gate's start: the controller saw the node %s after its creation", tl.SinceCreation.Duration, tl.Ready.Duration, d)
	}

	for ext, at := range sent {
		count, sum := histogram(t, run, "nodehealth_extension_startup_seconds", "extension", ext)
		if count != 1 {
			t.Errorf("extension_startup_seconds{extension=%q}: %d observations, want 1", ext, count)
			continue
		}
		within("extension_startup_seconds of "+ext, time.Duration(sum*float64(time.Second)), at)
	}
	if count, sum := histogram(t, run, "nodehealth_node_startup_seconds", "cause", "bootstrap"); count != 1 {
		t.Errorf("node_startup_seconds{cause=bootstrap}: %d observations, want 1", count)
	} else {
		within("node_startup_seconds", time.Duration(sum*float64(time.Second)), sent[slowest])
	}

	ev := h.waitEvent(t, node, nodehealth.EventNodeUngated, "after registration", "slowest "+slowest, "then "+next)
	t.Logf("event: %s", ev.Message)

	// kubectl nodehealth explain reads it from the Node alone.
	var out bytes.Buffer
	o := kubectlplugin.NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	o.NewClient = func() (kubernetes.Interface, error) { return h.env.Client, nil }
	o.LeaseNamespace = h.leaseNS
	cmd := kubectlplugin.NewCommandWithOptions(o)
	cmd.SetArgs([]string{"explain", node})
	if err := cmd.ExecuteContext(testenv.Context(t)); err != nil {
		t.Fatalf("explain: %v\n%s", err, out.String())
	}
	for _, want := range []string{"new node observed", slowest + ": first ready renewal (the last, ", "after " + next + ")", slowest + " was the last extension to become ready"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
}

// firstRenewals records when the test's own watch of the harness's Lease
// namespace first saw each Lease held.
type firstRenewals struct {
	mu      sync.Mutex
	first   map[string]time.Time
	changed chan struct{}
}

// watchFirstRenewals starts the watch, synced before it returns.
func (h *harness) watchFirstRenewals(t *testing.T) *firstRenewals {
	t.Helper()
	r := &firstRenewals{first: map[string]time.Time{}, changed: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(h.env.Client, 0, informers.WithNamespace(h.leaseNS))
	informer := factory.Coordination().V1().Leases().Informer()
	record := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, done := r.first[l.Name]; !done {
			r.first[l.Name] = time.Now()
			close(r.changed)
			r.changed = make(chan struct{})
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(testenv.Context(t).Done(), informer.HasSynced) {
		t.Fatal("the Lease watch did not sync")
	}
	return r
}

// at is when the watch first saw the Lease held, waiting for it if need be.
func (r *firstRenewals) at(t *testing.T, lease string) time.Time {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		r.mu.Lock()
		at, ok := r.first[lease]
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the test's watch never saw Lease %s held in %s", lease, waitTimeout)
		}
	}
}

// span is when, after the node's creation, something happened that the test
// started: from its call to its answer, or for a renewal, to when the test's
// own watch saw it if that was later.
type span struct{ from, to time.Duration }

// timelineOf returns the start-up timeline of a node's boot record.
func timelineOf(n *v1.Node) *nodev1alpha1.StartupTimeline {
	var rec struct {
		Startup *nodev1alpha1.StartupTimeline `json:"startup"`
	}
	if json.Unmarshal([]byte(n.Annotations[nodev1alpha1.BootAnnotation]), &rec) != nil {
		return nil
	}
	return rec.Startup
}

// histogram returns the observation count and sum of the histogram series
// with label=value.
func histogram(t *testing.T, run *inprocess.Controller, name, label, value string) (uint64, float64) {
	t.Helper()
	families, err := run.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, math.NaN()
}
