package nodehealth_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/nodehealth/model"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// simPerEvent is on by default: the seeds that differed only at some event
// inside a second were the controller's (docs/reliability.md, "Per-event
// comparison"); off, only the second's comparison runs, to count what a
// mutant needs without it.
var simPerEvent = flag.Bool("sim.per-event", true, "also compare the controller with the model after every event the driver delivers, not only at the end of each simulated second (false: the second's comparison only)")

// compareEvent compares the controller's observable state with the model's
// at one settled point inside a second: after the timers that came due
// (step) and after each delivered watch event (deliver), once the
// controller's workers and the model have both handled everything up to it.
// A state that is wrong for one event and right again by the end of the
// second is visible only here. It adds nothing to the trace while the two
// agree, so a seed's trace (which the regression seeds and the determinism
// test hash) is the per-second one; the first difference is reported, added
// to the trace, and ends the seed at the end of its second.
//
// Compared: each node's readiness taint (and its NoExecute variant), its
// SystemExtensionsReady condition's status and reason, and its boot record
// (boot ID, UID, failed open, pending, and the dead marks that name their
// Lease's current renewal: liveMarks); checked: the
// lifecycle invariant and that a held node is not tainted. Not compared
// here, with the reasons:
//   - Evicted: the driver learns of evictions from the eviction queue's
//     attempts and settles each node's drain in compare, once a second
//     (checkDrain); the per-second comparison has it.
//   - Anything while the controller may lag behind the model after an
//     outage of its writes (lagUntil, retriesUntil): the per-second
//     comparison already tolerates the catching up.
//   - A node whose last sync or eviction failed and is owed a retry
//     (retryOwed): the model decides at once, the controller writes on the
//     retry (a write refused because its cache had not caught up with its
//     previous write, or with another writer's change made just before
//     it; seed 15660107569789160911 retried four times, then on the
//     nanosecond back-off, and wrote the taint two deliveries later).
//   - A node someone other than the controller wrote (the driver: a
//     creation, a reboot, labels, the autoscaler's taint; another writer)
//     until the controller's Node cache shows that write
//     (cacheCaughtUp): the API server holds it, but neither the
//     controller nor the model has observed it yet. The controller's own
//     writes are compared as soon as it made them, delivered or not.
//   - Anything with several node workers between two requests
//     (deliverBetween): those are not settled points.
func (s *simulation) compareEvent(where string) {
	s.t.Helper()
	now := s.clk.Now()
	if !s.perEvent || s.eventDiff || s.leaderless() || now.Before(s.lagUntil) || now.Before(s.retriesUntil) {
		return
	}
	s.eventChecks++
	s.settleTiedTurns(false, func(_ *simNode, obj *v1.Node) bool {
		return nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoExecute)
	})
	s.settleHolds()
	want := s.model.Nodes()
	held := sets.New(s.model.Held()...)
	var diffs []string
	for _, n := range s.nodes {
		if !s.cacheCaughtUp(n.name) || s.retryOwed(n.name) {
			continue
		}
		obj, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		got := eventView(obj)
		w := want[n.name]
		w.Evicted = false
		if got != w {
			diffs = append(diffs, fmt.Sprintf("%s: controller %s, model %s%s", n.name, viewString(got), viewString(w), s.dueNote(n.name)))
		} else if got, want := s.liveMarks(n.name, deadMarks(obj)), s.liveMarks(n.name, s.model.DeadMarks(n.name)); got != want && !s.syncDue(n.name) {
			// A write of dead marks alone is rate limited (a mass failure
			// under a suspension must not write every Node at once): a
			// node over the limit tries again later, with its sync due
			// (seed 12934933422176976143: after an outage of the writes,
			// n4's mark went 7 s after the model's).
			diffs = append(diffs, fmt.Sprintf("%s: the controller's boot record marks %q dead, the model's %q%s", n.name, got, want, s.dueNote(n.name)))
		}
		diffs = append(diffs, lifecycleInvariant(n.name, obj, got, w)...)
		if held.Has(n.name) && got.Tainted {
			diffs = append(diffs, fmt.Sprintf("%s: tainted while a guard holds it (invariant)", n.name))
		}
	}
	if len(diffs) == 0 {
		return
	}
	s.eventDiff = true
	s.trace.Add("t=%s %s: %s", s.at(), where, strings.Join(diffs, "; "))
	s.t.Errorf("t=%s %s the controller and the model differ (per-event comparison):\n  %s\nrecent trace:\n%s",
		s.at(), where, strings.Join(diffs, "\n  "), s.trace.Tail(40))
}

// eventView is the part of a node's observable state compareEvent compares.
func eventView(obj *v1.Node) model.NodeView {
	got := model.NodeView{Tainted: nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoSchedule),
		NoExecute: nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoExecute)}
	if c := nodeutil.Condition(obj, nodev1alpha1.SystemExtensionsReadyCondition); c != nil {
		got.ConditionStatus, got.ConditionReason = string(c.Status), c.Reason
	}
	if v, ok := obj.Annotations[nodev1alpha1.BootAnnotation]; ok {
		if rec, ok := decodeBootRecord(v); ok {
			got.BootRecord = rec.BootID + "/" + rec.UID
			if len(rec.FailedOpen) > 0 {
				got.BootRecord += ";" + strings.Join(rec.FailedOpen, ",")
			}
			if rec.Pending {
				got.BootRecord += " (pending)"
			}
		}
	}
	return got
}

// namedInMessage reads the two lists of the node's SystemExtensionsReady
// message: the gating extensions named after "Not ready: ", and those named
// after "Not ready but not affecting readiness: ", each with the reason it
// gives.
func namedInMessage(obj *v1.Node) (gating, info map[string]string) {
	c := nodeutil.Condition(obj, nodev1alpha1.SystemExtensionsReadyCondition)
	if c == nil {
		return nil, nil
	}
	message, infoList, _ := strings.Cut(c.Message, " Not ready but not affecting readiness: ")
	if _, list, ok := strings.Cut(message, "Not ready: "); ok {
		gating = messageEntries(list)
	}
	return gating, messageEntries(infoList)
}

// messageEntries reads "name (reason...), name (reason...)." into names and
// reasons.
func messageEntries(list string) map[string]string {
	if list == "" {
		return nil
	}
	named := map[string]string{}
	for _, entry := range strings.Split(list, ", ") {
		name, rest, ok := strings.Cut(entry, " (")
		if !ok || strings.ContainsAny(name, " :;") {
			continue // a comma inside an entry's detail
		}
		reason, _, _ := strings.Cut(rest, ":")
		reason, _, _ = strings.Cut(reason, ")")
		named[name] = reason
	}
	return named
}

// notReadyDiff compares the extensions the condition names not ready with
// the model's, in both lists: an extension named expired that the model
// holds ready only by the start's grace is the previous instance's word,
// which a restarted controller keeps (the grace hides an expiry; it shows
// no renewal). gating says whether the gating list is compared too (a False
// condition's; a True one names none).
func (s *simulation) notReadyDiff(name string, obj *v1.Node, gating bool) string {
	namedGating, namedInfo := namedInMessage(obj)
	message := ""
	if c := nodeutil.Condition(obj, nodev1alpha1.SystemExtensionsReadyCondition); c != nil {
		message = c.Message
	}
	d := s.listDiff(name, "not ready but not affecting readiness", namedInfo, s.listedByController(obj, s.model.Informational(name)))
	if d == "" && gating {
		d = s.listDiff(name, "not ready", namedGating, s.model.NotReady(name))
	}
	if d != "" {
		d += fmt.Sprintf(" (%q)", message)
	}
	return d
}

// listDiff compares one list the message names (what says which) with the
// model's, but for an expiry the start's grace hides.
func (s *simulation) listDiff(name, what string, named map[string]string, want []string) string {
	for _, ext := range want {
		if _, ok := named[ext]; !ok {
			return fmt.Sprintf("%s: the condition does not name %s %s, the model does", name, ext, what)
		}
	}
	for _, ext := range slices.Sorted(maps.Keys(named)) {
		reason := named[ext]
		if slices.Contains(want, ext) || reason == nodev1alpha1.ExtensionLeaseExpired && s.model.StartGrace(name, ext) {
			continue
		}
		return fmt.Sprintf("%s: the condition names %s %s (%s), the model does not", name, ext, what, reason)
	}
	return ""
}

// listedByController keeps the extensions of names that the node's list,
// as the controller last wrote it, holds. The model lists a registered
// extension (the updater's, which registers with its Lease) from the node's
// creation; the controller lists it once it observes the registration, so
// before the Lease exists the model names it not ready and the controller
// does not name it at all (seed 132: n6, new, at 1m23s). Whether the
// controller lists a registration is not compared.
func (s *simulation) listedByController(obj *v1.Node, names []string) []string {
	list, err := nodev1alpha1.DecodeSystemExtensions(obj.Annotations[nodev1alpha1.SystemExtensionsAnnotation], simNS)
	if err != nil {
		s.t.Fatalf("node %s: the controller's list of its extensions: %v", obj.Name, err)
	}
	return slices.DeleteFunc(names, func(name string) bool {
		return !slices.ContainsFunc(list, func(e nodev1alpha1.SystemExtension) bool { return e.Name == name })
	})
}

// deadMarks is the Dead field of the node's boot record as the model writes
// its marks: "name@renewTime" (µs), sorted, comma-separated.
func deadMarks(obj *v1.Node) string {
	rec, ok := decodeBootRecord(obj.Annotations[nodev1alpha1.BootAnnotation])
	if !ok {
		return ""
	}
	marks := make([]string, 0, len(rec.Dead))
	for ext, renewTime := range rec.Dead {
		marks = append(marks, fmt.Sprintf("%s@%d", ext, renewTime))
	}
	slices.Sort(marks)
	return strings.Join(marks, ",")
}

// liveMarks keeps the dead marks that name their Lease's current renewal
// (as the API server holds it): a mark is read only at the renewal it names
// (docs/controller.md, "A restart does not resurrect a dead extension"), so
// one of an earlier renewal says nothing. The model writes the record anew
// at every decision and drops such marks as it goes; the controller writes
// no record only to drop them, and keeps them until its next write of the
// record (seed 255710585287952347: n10's ungate at 4m4s, written while the
// own view was stale, kept kube-proxy's mark of 2m12s; kube-proxy had renewed
// since, and the model's record had dropped it).
func (s *simulation) liveMarks(node, marks string) string {
	if marks == "" {
		return ""
	}
	var live []string
	for _, mark := range strings.Split(marks, ",") {
		ext, at, ok := strings.Cut(mark, "@")
		if !ok {
			live = append(live, mark)
			continue
		}
		l, err := s.kube.CoordinationV1().Leases(simNS).Get(s.ctx, nodehealth.LeaseNameFor(ext, node), metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && strconv.FormatInt(l.Spec.RenewTime.UnixMicro(), 10) == at {
			live = append(live, mark)
		}
	}
	return strings.Join(live, ",")
}

// The per-event comparison adds nothing to the trace while it finds no
// difference: a seed's trace is the per-second one either way, so the
// regression seeds and the determinism tests hash the same with it on.
func TestThePerEventComparisonLeavesThePerSecondTraceAsItIs(t *testing.T) {
	const seed, ticks = 42, 120
	run := func(perEvent bool) *simulation {
		s := newSimulation(t, seed, 0)
		defer s.stop()
		s.perEvent = perEvent
		for range ticks {
			if !s.step() {
				t.Fatalf("seed %d stopped at t=%s (per-event %v)", seed, s.at(), perEvent)
			}
		}
		return s
	}
	off, on := run(false), run(true)
	if on.eventChecks == 0 {
		t.Fatal("the per-event comparison never compared")
	}
	if off.trace.Hash() != on.trace.Hash() {
		t.Fatalf("seed %d gave another trace with the per-event comparison (%d points compared):\n%s\n----\n%s",
			seed, on.eventChecks, off.trace, on.trace)
	}
}

// noteForeignWrites records, for each Node write f requests, a lower bound
// of the resourceVersion it will get (cacheCaughtUp). f is a client of the
// driver or of another writer, never the controller's.
func (s *simulation) noteForeignWrites(f *clienttesting.Fake) {
	f.PrependReactor("*", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		var name string
		switch act := action.(type) {
		case clienttesting.CreateActionImpl:
			if m, ok := act.Object.(*v1.Node); ok {
				name = m.Name
			}
		case clienttesting.UpdateActionImpl:
			if m, ok := act.Object.(*v1.Node); ok {
				name = m.Name
			}
		case clienttesting.PatchActionImpl:
			name = act.Name
		case clienttesting.DeleteActionImpl:
			name = act.Name
		}
		if name != "" {
			rv := s.api.ResourceVersion() + 1
			s.foreignMu.Lock()
			if s.foreignRV == nil {
				s.foreignRV = map[string]int64{}
			}
			s.foreignRV[name] = rv
			s.foreignMu.Unlock()
		}
		return false, nil, nil // served by the API's reactor
	})
}

// cacheCaughtUp reports whether the controller's Node cache holds the node
// at or past the last write someone else requested on it.
func (s *simulation) cacheCaughtUp(name string) bool {
	s.foreignMu.Lock()
	want := s.foreignRV[name]
	s.foreignMu.Unlock()
	cached, err := s.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		s.t.Fatal(err)
	}
	rv, err := strconv.ParseInt(cached.ResourceVersion, 10, 64)
	return err == nil && rv >= want
}

// retryOwed reports whether a sync or an eviction of the node failed and
// has not succeeded since.
func (s *simulation) retryOwed(name string) bool {
	for _, q := range s.queues {
		if q.NumRequeues(name) > 0 {
			return true
		}
	}
	return false
}

// dueNote says when the controller's next sync of the node is due, if one
// is: a difference with a sync due within the second is usually one the
// product puts right on its own (a diagnosis aid, not a verdict).
// syncDue reports whether the node's next sync is queued for later.
func (s *simulation) syncDue(name string) bool {
	_, ok := s.queues[0].due.At(name)
	return ok
}

func (s *simulation) dueNote(name string) string {
	if at, ok := s.queues[0].due.At(name); ok {
		return fmt.Sprintf(" (its next sync due in %s)", at.Sub(s.clk.Now()))
	}
	return ""
}

// takenTogether groups the observations of a node that no sync of it began
// between, in the place of the last; a sync between two splits them, and
// another node's observation in between keeps its own place.
func TestObservationsOfANodeNoSyncBeganBetweenAreTakenTogether(t *testing.T) {
	in := func(delivery int64, key string) modelInput { return modelInput{delivery: delivery, key: key} }
	inputs := []modelInput{
		in(1, "1/n1/cni"),
		in(2, "1/n2/cni"),
		in(3, "1/n1/kube-proxy"),
		in(4, "0/n2"),
		in(5, "1/n2/kube-proxy"),
		in(5, "1/n3/cni"),
		in(5, "1/n3/kube-proxy"),
	}
	// n2's sync after delivery 4 saw its first two inputs and not its
	// third; n1's sync began before its first input.
	syncs := []syncStart{{node: "n1", delivery: 0}, {node: "n2", delivery: 4}, {node: "n3", delivery: 5}}
	got := groupKeys(takenTogether(inputs, syncs))
	want := []string{"1/n1/cni+1/n1/kube-proxy", "1/n2/cni+0/n2", "1/n2/kube-proxy", "1/n3/cni+1/n3/kube-proxy"}
	if !slices.Equal(got, want) {
		t.Errorf("groups:\n got %q\nwant %q", got, want)
	}
}

// groupKeys names each group by its inputs' keys joined with "+".
func groupKeys(groups [][]modelInput) []string {
	var out []string
	for _, g := range groups {
		var keys []string
		for _, in := range g {
			keys = append(keys, in.key)
		}
		out = append(out, strings.Join(keys, "+"))
	}
	return out
}

// A canary renewal reaches each node at its next sync: a node whose next sync
// began after later deliveries is released where that sync began, after
// them; one whose next sync saw nothing new takes the move in its place, and
// so does a node with no sync after it. Two canary renewals are never taken
// together: no sync of theirs exists, and each moves the horizon at its own
// place.
func TestTheHorizonsMoveReachesANodeWhereItsNextSyncBegan(t *testing.T) {
	in := func(delivery int64, key string) modelInput { return modelInput{delivery: delivery, key: key} }
	inputs := []modelInput{
		in(1, "1/n1/cni"),
		in(2, canaryInput),
		in(3, "1/n1/kube-proxy"),
		in(3, "1/n2/kube-proxy"),
		in(4, "0/n3"),
		in(5, canaryInput),
		in(6, "1/n3/cni"),
	}
	// n1's sync began after its input at 3, n2's and n4's right after the
	// first renewal, n3's after its input at 4 and again after the one at 6.
	syncs := []syncStart{{node: "n1", delivery: 3}, {node: "n2", delivery: 2}, {node: "n3", delivery: 4},
		{node: "n4", delivery: 2}, {node: "n3", delivery: 6}}
	lags, releases := horizonReachesLater(inputs, syncs)
	wantLags := map[int][]string{1: {"n1", "n3"}, 5: {"n3"}}
	if !maps.EqualFunc(lags, wantLags, slices.Equal) {
		t.Errorf("nodes the moves reach later: got %v, want %v", lags, wantLags)
	}
	var gotReleases []string
	for _, r := range releases {
		gotReleases = append(gotReleases, fmt.Sprintf("%d %s", r.delivery, r.key))
	}
	wantReleases := []string{"3 8/n1", "4 8/n3", "6 8/n3"}
	if !slices.Equal(gotReleases, wantReleases) {
		t.Errorf("releases: got %q, want %q", gotReleases, wantReleases)
	}
	all := append(slices.Clone(inputs), releases...)
	sortInputs(all)
	groups := groupKeys(takenTogether(all, syncs))
	wantGroups := []string{canaryInput, "1/n2/kube-proxy", "1/n1/cni+1/n1/kube-proxy+8/n1", "0/n3+8/n3", canaryInput, "1/n3/cni+8/n3"}
	if !slices.Equal(groups, wantGroups) {
		t.Errorf("groups:\n got %q\nwant %q", groups, wantGroups)
	}
}

// settleHolds tells the model which nodes the controller holds where the
// model took a taint as written, in the two cases where that is the order of
// one moment, not a defect; the model checks the node is such a one:
//   - held again after a resume of the blast radius and a new suspension in
//     one instant: the model tainted every held node at the resume, the
//     controller's syncs of some came after the suspension
//     (model.HoldAgainAtResume; seed 11717233602785484563);
//   - while the controller catches up after an outage of its writes: the
//     model took its decisions as written when the writes came back, the
//     controller's retry came after the own-view guard fired
//     (model.RetryMetTheGuard; seed 11577162341470377777).
func (s *simulation) settleHolds() {
	s.t.Helper()
	want := s.model.Nodes()
	catchingUp := s.clk.Now().Before(s.lagUntil)
	for _, n := range s.nodes {
		w := want[n.name]
		// While catching up, a node the model has untainted and not held
		// may be one whose gate it ended in the stale view after taking
		// its taint as written (RetryMetTheGuard checks it is; seed
		// 17271907123373396587).
		untaintedRetry := catchingUp && w.ConditionReason != nodev1alpha1.ReasonGatingSuspended
		if n.unlisted || !w.Tainted && !untaintedRetry {
			continue
		}
		obj, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		got := eventView(obj)
		if got.Tainted || got.ConditionReason != nodev1alpha1.ReasonGatingSuspended {
			continue
		}
		switch now := s.clk.Now(); {
		case w.Tainted && w.ConditionReason == nodev1alpha1.ReasonExtensionsNotReady && s.model.HoldAgainAtResume(n.name):
			s.trace.Add("t=%s %s: held again by a suspension in the instant of its resume, before its sync (the model had tainted it at the resume)", s.at(), n.name)
		case catchingUp && s.model.RetryMetTheGuard(now, n.name):
			s.trace.Add("t=%s %s: the controller's retry after the outage came after the own-view guard fired, which holds it (the model had taken the taint as written when the writes came back)", s.at(), n.name)
		}
	}
}

// bootRecord is what the simulation reads of the controller's boot record,
// decoded from the annotation's documented JSON (docs/controller.md, "The
// boot record") rather than by the controller's own parser, which a mutant
// could change along with what it writes.
type bootRecord struct {
	BootID     string           `json:"bootID"`
	UID        string           `json:"uid"`
	FailedOpen []string         `json:"failedOpen"`
	Pending    bool             `json:"pending"`
	Dead       map[string]int64 `json:"dead"`
}

// decodeBootRecord decodes a boot record; ok is false for none, or one the
// controller would not read either (unparseable, or without a UID).
func decodeBootRecord(value string) (rec bootRecord, ok bool) {
	if value == "" || json.Unmarshal([]byte(value), &rec) != nil || rec.UID == "" {
		return bootRecord{}, false
	}
	return rec, true
}
