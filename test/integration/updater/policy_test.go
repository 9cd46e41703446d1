package updater_test

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// policyObserved watches a policy from now on and reports the
// resourceVersion of the first version of it whose status.observedGeneration
// is at least gen: the leader's own record that it saw that generation.
func policyObserved(t *testing.T, ctx context.Context, name string) func(gen int64) string {
	t.Helper()
	c := shadows(t).UpdatesV1alpha1().UpdatePolicies()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		gen int64
		rv  string
	}
	ch := make(chan seen, 1000)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*updatesv1alpha1.UpdatePolicy); ok && p.Name == name {
				ch <- seen{p.Status.ObservedGeneration, p.ResourceVersion}
			}
		}
	}()
	return func(gen int64) string {
		t.Helper()
		for {
			select {
			case s := <-ch:
				if s.gen >= gen {
					return s.rv
				}
			case <-ctx.Done():
				t.Fatalf("UpdatePolicy %s: generation %d never observed", name, gen)
			}
		}
	}
}

// rvAfter compares resourceVersions. They are opaque to clients in general;
// this control plane has one etcd, whose revisions they are, so a larger
// one was written later — across resources too.
func rvAfter(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("resourceVersions %q, %q are not etcd revisions", a, b)
	}
	return x > y
}

// A pause with two operator replicas behind leader election: once the
// leader recorded that it saw the paused generation (status.observed-
// Generation, written by the pass that read it), no node starts — not by
// it, and not by the standby after the leader is killed (SIGKILL, no
// release). A watch over the whole run sees every start; each is older
// (a smaller etcd revision) than the leader's record.
func TestAPauseWithTwoReplicasStartsNothingAfterTheLeaderObservedIt(t *testing.T) {
	env := testenv.Env(t)
	ctx := ctxFor(t, 4*time.Minute)
	nodes := []string{"pause2-1", "pause2-2", "pause2-3", "pause2-4", "pause2-5"}
	h := watchHistory(t, ctx, nodes...)
	createNodes(t, nodes...)
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["pause2-1"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	pol := createPolicy(t)
	observed := policyObserved(t, ctx, pol.Name)

	const leaseName = "update-operator-pause-test"
	first, firstLeader := startOperatorReplicas(t, ctx, leaseName, "update-operator-pause-a", "update-operator-pause-b")
	waitShadow(t, ctx, "pause2-1", "in flight", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate
	})

	paused := editPolicy(t, ctx, pol.Name, func(s *updatesv1alpha1.UpdatePolicySpec) { s.Paused = true })
	observedRV := observed(paused.Generation)
	// The node in flight finishes; nothing else starts.
	a.mu.Lock()
	delete(a.stuckIn, "pause2-1")
	a.mu.Unlock()
	resumeAgent(t, ctx, "pause2-1")
	waitShadow(t, ctx, "pause2-1", "finished while paused", updated)

	// The standby takes over with the pause already in force. The first
	// replica started alone, so it leads.
	if err := syscall.Kill(first.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if _, err := env.WaitForLease(ctx, "default", leaseName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != firstLeader && *l.Spec.HolderIdentity != ""
	}); err != nil {
		t.Fatalf("the standby did not take over: %v", err)
	}
	never(t, ctx, 5*time.Second, "paused rollout after the failover", nodes[1:]...)

	h.mu.Lock()
	for n, rvs := range h.startRVs {
		for _, rv := range rvs {
			if rvAfter(t, rv, observedRV) {
				t.Errorf("%s started at revision %s, after the leader recorded the pause at %s", n, rv, observedRV)
			}
		}
	}
	h.mu.Unlock()

	// Unpaused, the new leader goes on without a restart.
	editPolicy(t, ctx, pol.Name, func(s *updatesv1alpha1.UpdatePolicySpec) { s.Paused = false })
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated after the unpause", updated)
	}
}

// A changed targetVersion affects only the nodes that have not started: the
// node in flight finishes on the version it started with.
func TestATargetVersionChangeAffectsOnlyNodesNotStarted(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"pin-a", "pin-b", "pin-c"}
	createNodes(t, "pin-a")
	createNodesReady(t, false, "pin-b", "pin-c")
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["pin-a"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = newVersion })
	observed := policyObserved(t, ctx, pol.Name)
	startOperator(t, baseOptions(t))
	waitShadow(t, ctx, "pin-a", "started", func(s *updatesv1alpha1.BottlerocketShadow) bool {
		return s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate
	})
	const newer = "1.21.0"
	edited := editPolicy(t, ctx, pol.Name, func(s *updatesv1alpha1.UpdatePolicySpec) { s.TargetVersion = newer })
	observed(edited.Generation)
	a.mu.Lock()
	delete(a.stuckIn, "pin-a")
	a.mu.Unlock()
	setReady(t, ctx, "pin-b", true)
	setReady(t, ctx, "pin-c", true)
	resumeAgent(t, ctx, "pin-a")
	runs := func(v string) func(*updatesv1alpha1.BottlerocketShadow) bool {
		return func(s *updatesv1alpha1.BottlerocketShadow) bool {
			return s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle && s.Status.CurrentVersion == v
		}
	}
	waitShadow(t, ctx, "pin-a", "finished on the version it started with", runs(newVersion))
	waitShadow(t, ctx, "pin-b", "updated to the new pin", runs(newer))
	waitShadow(t, ctx, "pin-c", "updated to the new pin", runs(newer))
}

// A node two policies select is never started, and both policies say so in
// their Conflict condition; the other nodes of both go on. Once one policy
// stops selecting it, the node starts.
func TestConflictingSelectorsNeverStartTheNode(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	k, v := testLabel(t)
	const pool = "updater-it/pool"
	nodes := []string{"conflict-a", "conflict-b", "conflict-both"}
	createNodes(t, nodes...)
	label := func(node, value string) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, pool, value)
		if _, err := testenv.Env(t).Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("conflict-a", "a")
	label("conflict-b", "b")
	label("conflict-both", "both")
	mk := func(name string, values ...string) *updatesv1alpha1.UpdatePolicy {
		return createPolicyObject(t, &updatesv1alpha1.UpdatePolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName(t) + "-" + name},
			Spec: updatesv1alpha1.UpdatePolicySpec{
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: pool, Operator: metav1.LabelSelectorOpIn, Values: values}}},
				MaxConcurrentUpdates: intstr.FromInt32(1), PostRebootSoak: &metav1.Duration{Duration: time.Second}}})
	}
	pa := mk("a", "a", "both")
	pb := mk("b", "b", "both")
	startAgent(t, ctx, nodes...)
	startOperator(t, baseOptions(t))
	waitShadow(t, ctx, "conflict-a", "updated", updated)
	waitShadow(t, ctx, "conflict-b", "updated", updated)
	for _, p := range []*updatesv1alpha1.UpdatePolicy{pa, pb} {
		waitPolicy(t, ctx, p.Name, "in conflict", func(p *updatesv1alpha1.UpdatePolicy) bool {
			return meta.IsStatusConditionTrue(p.Status.Conditions, updatesv1alpha1.PolicySelectorConflict)
		})
	}
	never(t, ctx, 3*time.Second, "a node two policies select", "conflict-both")

	editPolicy(t, ctx, pb.Name, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.NodeSelector.MatchExpressions[0].Values = []string{"b"}
	})
	waitShadow(t, ctx, "conflict-both", "updated once one policy governs it", updated)
	waitPolicy(t, ctx, pa.Name, "out of conflict and complete", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return !meta.IsStatusConditionTrue(p.Status.Conditions, updatesv1alpha1.PolicySelectorConflict) &&
			meta.IsStatusConditionTrue(p.Status.Conditions, updatesv1alpha1.PolicyComplete)
	})
}

// The counts in a policy's status are what a watch of its shadows shows:
// in a stable moment of the rollout (two nodes held in flight) and at its
// end.
func TestPolicyStatusCountsEqualWhatAWatchOfTheShadowsShows(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	nodes := []string{"count-1", "count-2", "count-3", "count-4"}
	h := watchHistory(t, ctx, nodes...)
	// Only count-1 and count-2 may start at first (the others are not
	// ready), and their agents hold them in flight.
	createNodes(t, "count-1", "count-2")
	createNodesReady(t, false, "count-3", "count-4")
	a := startAgent(t, ctx, nodes...)
	a.mu.Lock()
	a.stuckIn["count-1"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.stuckIn["count-2"] = updatesv1alpha1.StateStagedAndPerformedUpdate
	a.mu.Unlock()
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) { s.MaxConcurrentUpdates = intstr.FromInt32(2) })
	startOperator(t, baseOptions(t))
	for _, n := range []string{"count-1", "count-2"} {
		waitShadow(t, ctx, n, "held in flight", func(s *updatesv1alpha1.BottlerocketShadow) bool {
			return s.Status.CurrentState == updatesv1alpha1.StateStagedAndPerformedUpdate
		})
	}
	// What the watch shows counting as updating (docs/updater.md's table).
	watched := func() (inFlight int32) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.current {
			if c {
				inFlight++
			}
		}
		return inFlight
	}
	// waitShadow reads a watch of its own: the history's may deliver the
	// same change a moment later.
	watchShows := func(want int32) {
		t.Helper()
		for in := watched(); in != want; in = watched() {
			select {
			case <-ctx.Done():
				t.Fatalf("the watch shows %d nodes in flight, want %d", in, want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	watchShows(2)
	waitPolicy(t, ctx, pol.Name, "counting 2 in flight, 2 waiting", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return p.Status.Nodes == 4 && p.Status.InFlight == 2 && p.Status.Waiting == 2 && p.Status.UpToDate == 0 && p.Status.Failed == 0
	})
	a.mu.Lock()
	a.stuckIn = map[string]updatesv1alpha1.ShadowState{}
	a.mu.Unlock()
	setReady(t, ctx, "count-3", true)
	setReady(t, ctx, "count-4", true)
	resumeAgent(t, ctx, "count-1")
	resumeAgent(t, ctx, "count-2")
	for _, n := range nodes {
		waitShadow(t, ctx, n, "updated", updated)
	}
	watchShows(0)
	done := waitPolicy(t, ctx, pol.Name, "complete", func(p *updatesv1alpha1.UpdatePolicy) bool {
		return p.Status.Nodes == 4 && p.Status.UpToDate == 4 && p.Status.InFlight == 0 && p.Status.Waiting == 0 &&
			meta.IsStatusConditionTrue(p.Status.Conditions, updatesv1alpha1.PolicyComplete)
	})
	// Steady state: the status is written only when it changes, so the
	// policy is not written again (its times survive the API's rounding).
	// A node change brings the start pass back without changing the status.
	resumeAgent(t, ctx, "count-3")
	time.Sleep(3 * time.Second)
	now, err := shadows(t).UpdatesV1alpha1().UpdatePolicies().Get(ctx, pol.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != done.ResourceVersion {
		t.Errorf("the policy was written at steady state: resourceVersion %s → %s, status %+v", done.ResourceVersion, now.ResourceVersion, now.Status)
	}
}
