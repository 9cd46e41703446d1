package model

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Every story runs on the controller's clock, counted from t0.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	sec    = time.Second
	minute = time.Minute

	leaseDuration = 40 * time.Second // + 10 s grace: expires after 50 s of silence
)

func defaultConfig() Config {
	return Config{
		RenewalGrace:         10 * sec,
		RegistrationGrace:    30 * sec,
		MinimumLeaseDuration: 10 * sec,
		EvictionTimeout:      5 * minute,
		CanaryInterval:       5 * sec,
	}
}

// story drives one model through a short story of inputs.
type story struct {
	t    *testing.T
	m    *Model
	now  time.Duration   // the last input's instant
	kept map[string]bool // Leases renewed every 10 s by run
	// vouch: before every input the controller observes a renewal of its
	// canary written at that instant, so that its view vouches for every
	// Lease expiry up to it (the horizon); the own view changes only by
	// stale and recover. A story about the canary itself turns it off.
	vouch bool
}

func newStory(t *testing.T, cfg Config) *story {
	return &story{t: t, m: New(cfg), kept: map[string]bool{}, vouch: true}
}

// to records the instant of an input.
func (st *story) to(d time.Duration) time.Time {
	st.now = d
	at := t0.Add(d)
	if st.vouch {
		st.m.CanaryRenewed(at, at)
	}
	return at
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func gating(name string) Extension   { return Extension{Name: name, AffectsReadiness: true} }
func tracking(name string) Extension { return Extension{Name: name} }

// worker is a node in its first boot.
func worker(name string, exts ...Extension) Node {
	return Node{Name: name, UID: "uid-" + name, BootID: "boot1", Extensions: exts}
}

// Boot records of worker nodes; expect fills in the node's name.
const (
	boot1 = "boot1/uid-%s"
	boot2 = "boot2/uid-%s"
)

func (st *story) start(d time.Duration)                { st.m.Start(st.to(d)) }
func (st *story) stop(d time.Duration)                 { st.m.Stop(st.to(d)) }
func (st *story) add(d time.Duration, n Node)          { st.m.NodeAdded(st.to(d), n) }
func (st *story) update(d time.Duration, n Node)       { st.m.NodeUpdated(st.to(d), n) }
func (st *story) advance(d time.Duration)              { st.m.Advance(st.to(d)) }
func (st *story) stale(d time.Duration)                { st.m.OwnView(st.to(d), true) }
func (st *story) recover(d time.Duration)              { st.m.OwnView(st.to(d), false) }
func (st *story) writes(d time.Duration, refused bool) { st.m.Writes(st.to(d), refused) }

// renew observes a renewal of every "node/extension" Lease named, at d.
func (st *story) renew(d time.Duration, leases ...string) {
	for _, l := range leases {
		node, ext, _ := strings.Cut(l, "/")
		st.m.LeaseRenewed(st.to(d), node, ext, leaseDuration)
	}
}

// keep makes run renew the Leases named every 10 s; drop stops that.
func (st *story) keep(leases ...string) {
	for _, l := range leases {
		st.kept[l] = true
	}
}

func (st *story) drop(leases ...string) {
	for _, l := range leases {
		delete(st.kept, l)
	}
}

// run lets time pass until d: the kept Leases renew at every multiple of
// 10 s on the way, then the model is advanced to d.
func (st *story) run(d time.Duration) {
	const every = 10 * time.Second
	var kept []string
	for l := range st.kept {
		kept = append(kept, l)
	}
	sort.Strings(kept)
	for r := (st.now/every + 1) * every; r <= d; r += every {
		st.renew(r, kept...)
	}
	st.advance(d)
}

// renewEvery renews the Leases named every `every` from `from` to `to`
// (inclusive).
func (st *story) renewEvery(from, to, every time.Duration, leases ...string) {
	for d := from; d <= to; d += every {
		st.renew(d, leases...)
	}
}

func (st *story) release(d time.Duration, lease, reason string) {
	node, ext, _ := strings.Cut(lease, "/")
	st.m.LeaseReleased(st.to(d), node, ext, reason)
}

// names lists n1..nk.
func names(k int) []string {
	var out []string
	for i := 1; i <= k; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

func leasesOf(ext string, nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n+"/"+ext)
	}
	return out
}

// expect checks the observable state of nodes.
func (st *story) expect(when string, want NodeView, nodes ...string) {
	st.t.Helper()
	got := st.m.Nodes()
	for _, n := range nodes {
		w := want
		if strings.Contains(w.BootRecord, "%s") {
			w.BootRecord = fmt.Sprintf(w.BootRecord, n)
		}
		if got[n] != w {
			st.t.Errorf("%s: node %s is %+v, want %+v", when, n, got[n], w)
		}
	}
}

func (st *story) expectHeld(when string, want ...string) {
	st.t.Helper()
	if got := st.m.Held(); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		st.t.Errorf("%s: held %v, want %v", when, got, want)
	}
}

func (st *story) expectSuspended(when, zone string, want bool) {
	st.t.Helper()
	if got := st.m.Suspended(zone); got != want {
		st.t.Errorf("%s: Suspended(%q) = %v, want %v", when, zone, got, want)
	}
}

// Views.

func ready(rec string) NodeView {
	return NodeView{ConditionStatus: "True", ConditionReason: nodev1alpha1.ReasonExtensionsReady, BootRecord: rec}
}

// failedOpen: not gated, but a required extension failed open and is not
// ready yet.
func failedOpen(rec string) NodeView {
	return NodeView{ConditionStatus: "True", ConditionReason: nodev1alpha1.ReasonExtensionsFailedOpen, BootRecord: rec}
}

func nothingRequired(rec string) NodeView {
	return NodeView{ConditionStatus: "True", ConditionReason: nodev1alpha1.ReasonNoRequiredExtensions, BootRecord: rec}
}

func gated(reason, rec string) NodeView {
	return NodeView{Tainted: true, ConditionStatus: "False", ConditionReason: reason, BootRecord: rec}
}

func held(rec string) NodeView {
	return NodeView{ConditionStatus: "False", ConditionReason: nodev1alpha1.ReasonGatingSuspended, BootRecord: rec}
}

func evicted(v NodeView) NodeView { v.Evicted = true; return v }

// inService starts the controller at 0 with the nodes already there and
// every listed Lease held: every node is found in service and ready, and its
// Leases count as observed at 0 (they expire at 50 s unless renewed).
func (st *story) inService(nodes ...Node) {
	for _, n := range nodes {
		st.add(0, n)
		for _, e := range n.Extensions {
			st.renew(0, n.Name+"/"+e.Name)
		}
	}
	st.start(0)
}
