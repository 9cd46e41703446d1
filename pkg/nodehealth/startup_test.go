package nodehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	testingclock "k8s.io/utils/clock/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// The timeline keeps the record small whatever the node's list holds: the
// slowest extensions, a count of the others, durations to 100 ms, the start
// to the second.
func TestTheTimelineInTheBootRecordIsBounded(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	var list []string
	for i := range nodev1alpha1.MaxSystemExtensions {
		list = append(list, fmt.Sprintf(`{"name":"%s%02d"}`, strings.Repeat("x", 61), i))
	}
	f := newFixture(t, opts, newNode("n1", func(n *v1.Node) {
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: "[" + strings.Join(list, ",") + "]"}
	}))
	f.live("n1")
	f.clock.Step(123456 * time.Microsecond)
	f.sync("n1")
	for i := range nodev1alpha1.MaxSystemExtensions {
		f.clock.Step(456 * time.Millisecond)
		f.renew(fmt.Sprintf("%s%02d", strings.Repeat("x", 61), i), "n1")
		f.sync("n1")
	}
	if f.tainted("n1") {
		t.Fatalf("node not ungated: %s", f.condition("n1").Message)
	}
	value := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]
	t.Logf("boot record of %d bytes", len(value))
	if len(value) > 1024 {
		t.Errorf("boot record of %d bytes, want at most 1 KiB: %s", len(value), value)
	}
	rec, ok := parseBootRecord(value)
	if !ok || rec.Startup == nil {
		t.Fatalf("no timeline: %s", value)
	}
	tl := rec.Startup
	if len(tl.Extensions) != nodev1alpha1.MaxStartupExtensions || int(tl.Omitted) != nodev1alpha1.MaxSystemExtensions-nodev1alpha1.MaxStartupExtensions {
		t.Errorf("%d extensions and %d omitted, want %d and the rest", len(tl.Extensions), tl.Omitted, nodev1alpha1.MaxStartupExtensions)
	}
	if last := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), nodev1alpha1.MaxSystemExtensions-1); tl.Extensions[0].Name != last {
		t.Errorf("slowest is %s, want %s", tl.Extensions[0].Name, last)
	}
	for _, e := range tl.Extensions {
		if e.Ready == nil || e.Ready.Duration%nodev1alpha1.StartupResolution != 0 {
			t.Errorf("%s: ready %v, not rounded to %s", e.Name, e.Ready, nodev1alpha1.StartupResolution)
		}
	}
	if !strings.Contains(value, `"start":"2026-11-21T10:00:00Z"`) {
		t.Errorf("start not to the second: %s", value)
	}
}

// The start-up of a new node: the time from the gate's start (the
// controller observing the node) to each extension's first ready renewal and
// to the ungate, written in the ungate patch; the creation delay on the API
// server's clock; the histograms; and the NodeUngated Event in one line.
func TestANewNodeRecordsItsStartupTimelineInTheUngatePatch(t *testing.T) {
	opts := testOptions()
	opts.Rules = append(opts.Rules, Rule{Name: "cni", Extension: "cni", Selector: labels.Everything(), AffectsReadiness: true, FailurePolicy: FailurePolicyKeepGated},
		Rule{Name: "csi", Extension: "csi", Selector: labels.Everything(), AffectsReadiness: true, FailurePolicy: FailurePolicyKeepGated})
	f := newFixture(t, opts, newNode("n1", func(n *v1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Second)) }))
	f.live("n1")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")

	f.clock.Step(12 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(3 * time.Second) // csi at 15s
	f.renew("csi", "n1")
	f.sync("n1")
	f.clock.Step(time.Second) // a second renewal is not the first
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(22 * time.Second) // cni at 38s, the last
	f.writes()
	f.renew("cni", "n1")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	if f.tainted("n1") {
		t.Fatal("not ungated")
	}

	rec, ok := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	if !ok || rec.Startup == nil {
		t.Fatalf("no timeline in the boot record: %q", f.node("n1").Annotations[nodev1alpha1.BootAnnotation])
	}
	want := nodev1alpha1.StartupTimeline{Cause: nodev1alpha1.ReasonNodeRegistered, Start: metav1.NewTime(t0), Ready: metav1.Duration{Duration: 38 * time.Second},
		SinceCreation: dur(40 * time.Second),
		Extensions: []nodev1alpha1.StartupExtension{
			{Name: "cni", Ready: dur(38 * time.Second)}, {Name: "csi", Ready: dur(15 * time.Second)}, {Name: "kube-proxy", Ready: dur(12 * time.Second)}}}
	if got := *rec.Startup; got.Summary() != want.Summary() || !got.Start.Equal(&want.Start) || got.Cause != want.Cause {
		t.Errorf("timeline\n got %+v\nwant %+v", got, want)
	}
	if got, want := rec.Startup.Summary(), "ready 38s after registration (40s after creation); slowest cni 38s, then csi 15s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	f.expectEvent("ready 38s after registration (40s after creation); slowest cni 38s, then csi 15s")

	if count, sum := observed(t, f.c.metrics.NodeStartup, "bootstrap"); count != 1 || sum != 38 {
		t.Errorf("node_startup_seconds{cause=bootstrap}: %d observations summing %vs, want 1 of 38s", count, sum)
	}
	for ext, secs := range map[string]float64{"cni": 38, "csi": 15, "kube-proxy": 12} {
		if count, sum := observed(t, f.c.metrics.ExtensionStartup, ext); count != 1 || sum != secs {
			t.Errorf("extension_startup_seconds{extension=%s}: %d observations summing %vs, want 1 of %vs", ext, count, sum, secs)
		}
	}

	// Steady state: renewals write nothing, and nothing more is observed.
	for range 3 {
		f.clock.Step(10 * time.Second)
		for _, ext := range []string{"kube-proxy", "cni", "csi"} {
			f.renew(ext, "n1")
		}
		f.sync("n1")
	}
	f.expectWrites()
	if count, _ := observed(t, f.c.metrics.NodeStartup, "bootstrap"); count != 1 {
		t.Errorf("%d start-ups observed, want 1", count)
	}
}

// observed returns the observation count and sum of one series of a
// histogram vector.
func observed(t *testing.T, vec *prometheus.HistogramVec, label string) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := vec.WithLabelValues(label).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestEvaluateStartupTimeline is the decision table of the start-up
// timeline: which gates are start-ups, what their timeline says when they
// end, and what is left out. Each case evaluates the node at t0 (the gate's
// start) and again at each renewal of its extensions a and b, as the
// controller does.
func TestEvaluateStartupTimeline(t *testing.T) {
	type renewal struct {
		ext string
		at  time.Duration
	}
	cases := []struct {
		name     string
		live     bool
		tainted  bool
		state    func() *nodeState // nil: first sight
		bootID   string            // default boot-1
		record   *bootRecord       // default: of boot-1, ready
		renewals []renewal
		// failOpenB: b's rule has a startup timeout of 20s with
		// failurePolicy Ungate.
		failOpenB bool

		want        string // the summary; "" for no timeline
		wantFound   bool
		wantObserve map[string]time.Duration
	}{
		{name: "a new node: from its first sight to each first ready renewal and to the ungate",
			live: true, renewals: []renewal{{"a", 12 * time.Second}, {"a", 13 * time.Second}, {"b", 30 * time.Second}},
			want: "ready 30s after registration; slowest b 30s, then a 12s", wantObserve: map[string]time.Duration{"a": 12 * time.Second, "b": 30 * time.Second}},
		{name: "a reboot of a node in service",
			state: inServiceState, bootID: "boot-2", renewals: []renewal{{"b", 4 * time.Second}, {"a", 9 * time.Second}},
			want: "ready 9s after reboot; slowest a 9s, then b 4s", wantObserve: map[string]time.Duration{"a": 9 * time.Second, "b": 4 * time.Second}},
		{name: "a reboot found in the record at the controller's start: the start is the controller's",
			bootID: "boot-2", renewals: []renewal{{"a", 2 * time.Second}, {"b", 3 * time.Second}},
			want: "ready 3s after reboot (found at the controller's start: the start-up began earlier); slowest b 3s, then a 2s", wantFound: true,
			wantObserve: map[string]time.Duration{"a": 2 * time.Second, "b": 3 * time.Second}},
		{name: "found gated before the node was ever ready in its boot",
			tainted: true, record: &bootRecord{BootID: "boot-1", UID: "uid-n1", Pending: true}, renewals: []renewal{{"a", time.Second}, {"b", 2 * time.Second}},
			want: "ready 2s after the controller started (found at the controller's start: the start-up began earlier); slowest b 2s, then a 1s", wantFound: true,
			wantObserve: map[string]time.Duration{"a": time.Second, "b": 2 * time.Second}},
		{name: "found gated after the node was ready in its boot: a failure, not a start-up",
			tainted: true, renewals: []renewal{{"a", time.Second}, {"b", 2 * time.Second}}},
		{name: "a failure gate of a node in service is not a start-up",
			state: func() *nodeState {
				st := inServiceState()
				st.gate(causeNotReady, t0)
				st.scope.Insert("a")
				return st
			}, tainted: true, renewals: []renewal{{"b", time.Second}, {"a", 5 * time.Second}}},
		{name: "an extension that failed open is the slowest, never ready",
			live: true, failOpenB: true, renewals: []renewal{{"a", 5 * time.Second}, {"a", 25 * time.Second}},
			want: "ready 25s after registration; slowest b never (failed open), then a 5s", wantObserve: map[string]time.Duration{"a": 5 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			tracker := newLeaseTracker(clk, 0)
			opts := testOptions()
			var exts []requiredExtension
			for _, name := range []string{"a", "b"} {
				ext := requiredExtension{name: name, lease: nodev1alpha1.LeaseReference{Namespace: testNS, Name: name + ".n1"}, affects: true}
				if name == "b" && tc.failOpenB {
					ext.rule = &Rule{Name: "b", Extension: "b", StartupTimeout: 20 * time.Second, FailurePolicy: FailurePolicyUngate, AffectsReadiness: true}
				}
				exts = append(exts, ext)
			}
			bootID := tc.bootID
			if bootID == "" {
				bootID = "boot-1"
			}
			record := bootRecord{BootID: "boot-1", UID: "uid-n1"}
			if tc.record != nil {
				record = *tc.record
			}
			st := newNodeState(t0)
			if tc.state != nil {
				st = tc.state()
			}
			tainted := tc.tainted
			var last decision
			step := func(at time.Duration) {
				clk.SetTime(t0.Add(at))
				f := nodeFacts{name: "n1", uid: "uid-n1", bootID: bootID, tainted: tainted, record: record, hasRecord: !tc.live}
				env := evalEnv{now: t0.Add(at), opts: &opts, tracker: tracker, live: tc.live,
					suspended: func(string) bool { return false }, updateFailing: func(bool, bool) {}}
				d := evaluate(env, f, st, exts)
				tainted = d.taint
				if d.startup != nil {
					if last.startup != nil {
						t.Fatalf("a second timeline at %s: %s", at, d.startup.Summary())
					}
					last = d
				}
			}
			step(0)
			for _, r := range tc.renewals {
				clk.SetTime(t0.Add(r.at))
				tracker.observe(lease(r.ext, "n1", "holder", t0.Add(r.at)))
				step(r.at)
			}
			if tainted {
				t.Fatalf("still gated after the renewals: %+v", st)
			}
			if got := last.startup.Summary(); got != tc.want {
				t.Errorf("timeline %q, want %q", got, tc.want)
			}
			if last.startup != nil && last.startup.FoundAtStart != tc.wantFound {
				t.Errorf("foundAtStart %v, want %v", last.startup.FoundAtStart, tc.wantFound)
			}
			if tc.want != "" && fmt.Sprint(last.startupExtensions) != fmt.Sprint(tc.wantObserve) {
				t.Errorf("observed %v, want %v", last.startupExtensions, tc.wantObserve)
			}
			if st.firstReady != nil {
				t.Errorf("first renewals kept after the ungate: %v", st.firstReady)
			}
		})
	}
}

func inServiceState() *nodeState {
	st := newNodeState(t0)
	st.uid, st.bootID, st.readyInBoot, st.hadGating = "uid-n1", "boot-1", true, true
	st.extReady = map[string]bool{"a": true, "b": true}
	return st
}

// The extension label of the start-up histogram is capped like
// extension_not_ready_nodes: past the cap, extensions share "_other", and an
// extension that has a series keeps it.
func TestTheExtensionStartupLabelIsCapped(t *testing.T) {
	m := NewMetrics(nil)
	m.startupSeries.limit = 2
	c := &Controller{metrics: m}
	start := func(exts ...string) {
		d := decision{startup: &nodev1alpha1.StartupTimeline{Cause: string(causeRebooted)}, startupExtensions: map[string]time.Duration{}}
		for _, e := range exts {
			d.startupExtensions[e] = time.Second
		}
		c.observeStartup(d)
	}
	start("a")
	start("b", "c", "d")
	start("a", "e")
	if n := testutil.CollectAndCount(m.ExtensionStartup); n != 3 {
		t.Errorf("%d series, want 3 (two extensions and %s)", n, otherExtensionsLabel)
	}
	if count, _ := observed(t, m.ExtensionStartup, "a"); count != 2 {
		t.Errorf("a observed %d times, want 2", count)
	}
	if count, _ := observed(t, m.ExtensionStartup, otherExtensionsLabel); count != 3 {
		t.Errorf("%s observed %d times, want 3", otherExtensionsLabel, count)
	}
	// A start-up found at a controller start began earlier: not counted.
	c.observeStartup(decision{startup: &nodev1alpha1.StartupTimeline{Cause: string(causeRebooted), FoundAtStart: true}, startupExtensions: map[string]time.Duration{"a": time.Second}})
	if count, _ := observed(t, m.NodeStartup, startupReboot); count != 3 {
		t.Errorf("%d reboots observed, want 3", count)
	}
}

// A restarted controller finds the timeline on a ready node and writes
// nothing; a later failure gate of the node is no start-up, and its ungate
// keeps the boot's timeline as it is.
func TestARestartedControllerKeepsTheTimelineWithoutWriting(t *testing.T) {
	tl := `{"cause":"NodeRebooted","start":"2026-11-21T09:00:00Z","ready":"41.2s","extensions":[{"name":"kube-proxy","ready":"38.1s"}]}`
	n := readyNode("n1", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.BootAnnotation] = `{"bootID":"boot-1","uid":"uid-n1","startup":` + tl + `}`
	})
	f := newFixture(t, testOptions(), n)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectWrites()

	f.release("kube-proxy", "n1", "Crashed")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated for the failure")
	}
	f.clock.Step(5 * time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated")
	}
	if got := f.node("n1").Annotations[nodev1alpha1.BootAnnotation]; !strings.Contains(got, `"startup":`+tl) {
		t.Errorf("boot record %s, want the boot's timeline kept as it was", got)
	}
	for _, e := range f.events() {
		if strings.Contains(e, "Start-up:") {
			t.Errorf("a failure gate's ungate reported a start-up: %s", e)
		}
	}
}
