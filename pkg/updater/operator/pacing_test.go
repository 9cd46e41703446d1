package operator

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func minReleaseAge(d time.Duration) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.MinReleaseAge = &metav1.Duration{Duration: d} }
}
func delayBetweenNodes(d time.Duration) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.DelayBetweenNodes = &metav1.Duration{Duration: d} }
}

// firstOfferedAt is the policy's record that version v was first offered
// ago before t0.
func firstOfferedAt(v string, ago time.Duration) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		p.Status.OfferedVersions = append(p.Status.OfferedVersions,
			updatesv1alpha1.OfferedVersion{Version: v, FirstOffered: metav1.NewTime(t0.Add(-ago))})
	}
}
func lastSucceededAt(ago time.Duration) policyMod {
	return func(p *updatesv1alpha1.UpdatePolicy) {
		p.Status.LastUpdateSucceeded = &metav1.Time{Time: t0.Add(-ago)}
	}
}

// pacingCase is one policy over nodes a and b (both offered newV unless the
// shadows say otherwise) planned at t0.
type pacingCase struct {
	name    string
	policy  *updatesv1alpha1.UpdatePolicy
	shadows []*updatesv1alpha1.BottlerocketShadow
	// want is describePlan's; paced the Paced condition as
	// "Status/Reason: message" (message only when set); wake from t0.
	want, paced string
	wake        time.Duration
}

func runPacingCases(t *testing.T, cases []pacingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shadows := tc.shadows
			if shadows == nil {
				shadows = []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", idle, idle)}
			}
			pols := []*updatesv1alpha1.UpdatePolicy{tc.policy}
			f := newPolicyFixture(t, defaultOptions(), pols, []*v1.Node{mkNode("a"), mkNode("b")}, shadows)
			parsed := parsePolicies(pols, defaultOptions().Deadlines)
			snap, err := f.c.snapshot(shadows, parsed, t0)
			if err != nil {
				t.Fatal(err)
			}
			p := planStarts(snap, parsed[0])
			if got := describePlan(p); got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
			var wake time.Duration
			if !p.wake.IsZero() {
				wake = p.wake.Sub(t0)
			}
			if wake != tc.wake {
				t.Errorf("wake in %v, want %v", wake, tc.wake)
			}
			st := policyStatus(snap, parsed[0], p, &tc.policy.Status)
			c := meta.FindStatusCondition(st.Conditions, updatesv1alpha1.PolicyPaced)
			if c == nil {
				t.Fatalf("no %s condition in %+v", updatesv1alpha1.PolicyPaced, st.Conditions)
			}
			got := string(c.Status) + "/" + c.Reason
			if want, msg, ok := strings.Cut(tc.paced, ": "); ok {
				if got != want || c.Message != msg {
					t.Errorf("Paced = %s: %s\n  want %s", got, c.Message, tc.paced)
				}
			} else if got != tc.paced {
				t.Errorf("Paced = %s, want %s", got, tc.paced)
			}
		})
	}
}

// TestAVersionRollsOutOnlyOnceItHasBeenOfferedForMinReleaseAge: the age is
// measured from the policy's record of when one of its nodes first reported
// the version offered; a version without a record has just been offered,
// and a pin no node is offered has no age yet.
func TestAVersionRollsOutOnlyOnceItHasBeenOfferedForMinReleaseAge(t *testing.T) {
	runPacingCases(t, []pacingCase{
		{name: "no minReleaseAge: the offered version starts at once",
			policy: fleet(), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "offered 2h ago, needs 24h: nothing starts, the pass wakes when it is old enough",
			policy: fleet(minReleaseAge(24*time.Hour), firstOfferedAt(newV, 2*time.Hour)), want: "", wake: 22 * time.Hour,
			paced: "True/ReleaseAge: Waiting for release age (minReleaseAge 24h0m0s): 1.20.0 first offered at 2026-03-02T08:00:00Z, rolls out from 2026-03-03T08:00:00Z"},
		{name: "offered exactly 24h ago: it starts",
			policy: fleet(minReleaseAge(24*time.Hour), firstOfferedAt(newV, 24*time.Hour)), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "never recorded: its clock starts now",
			policy: fleet(minReleaseAge(time.Hour)), want: "", wake: time.Hour,
			paced: "True/ReleaseAge: Waiting for release age (minReleaseAge 1h0m0s): 1.20.0 first offered at 2026-03-02T10:00:00Z, rolls out from 2026-03-02T11:00:00Z"},
		{name: "a version recorded with a leading v is the same version",
			policy: fleet(minReleaseAge(time.Hour), firstOfferedAt("v"+newV, 2*time.Hour)), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "a pin no node of the policy is offered: nothing starts and nothing to wake for",
			policy: fleet(minReleaseAge(time.Hour), pin("1.21.0"), firstOfferedAt(newV, 48*time.Hour)), want: "",
			paced: "True/ReleaseAge: Waiting for release age (minReleaseAge 1h0m0s): 1.21.0 is not offered to any node of this policy yet"},
		{name: "each node goes to its own offer: the old enough one starts, the young one waits",
			policy:  fleet(minReleaseAge(time.Hour), firstOfferedAt(newV, 2*time.Hour), firstOfferedAt("1.21.0", time.Minute)),
			shadows: []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle, offered("1.21.0")), mkShadow("b", idle, idle)},
			want:    "start b@1.20.0", wake: 59 * time.Minute,
			paced: "True/ReleaseAge: Waiting for release age (minReleaseAge 1h0m0s): 1.21.0 first offered at 2026-03-02T09:59:00Z, rolls out from 2026-03-02T10:59:00Z"},
	})
}

// TestTheNextStartWaitsDelayBetweenNodesAfterAnUpdatePassedItsHealthGate:
// measured from the policy's record of its last success; nodes in flight
// are not held, and a policy with nothing to start is not paced.
func TestTheNextStartWaitsDelayBetweenNodesAfterAnUpdatePassedItsHealthGate(t *testing.T) {
	runPacingCases(t, []pacingCase{
		{name: "no delayBetweenNodes: the next node starts at once",
			policy: fleet(lastSucceededAt(time.Second)), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "the last success 4m ago, a delay of 10m: nothing starts for 6m",
			policy: fleet(delayBetweenNodes(10*time.Minute), lastSucceededAt(4*time.Minute)), want: "", wake: 6 * time.Minute,
			paced: "True/DelayBetweenNodes: Waiting between nodes: the last update of this policy passed its health gate at 2026-03-02T09:56:00Z; the next start waits until 2026-03-02T10:06:00Z (delayBetweenNodes 10m0s)"},
		{name: "the delay has just passed: the next node starts",
			policy: fleet(delayBetweenNodes(10*time.Minute), lastSucceededAt(10*time.Minute)), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "no success yet: the first node starts",
			policy: fleet(delayBetweenNodes(10 * time.Minute)), want: "start a@1.20.0", paced: "False/NotPaced"},
		{name: "with two slots the delay holds the second start too, however free the slot",
			policy:  fleet(delayBetweenNodes(10*time.Minute), lastSucceededAt(time.Minute), limit(intstr.FromInt32(2))),
			shadows: []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", staged, staged, startedBy("fleet")), mkShadow("b", idle, idle)},
			want:    "", wake: 9 * time.Minute, paced: "True/DelayBetweenNodes"},
		{name: "nothing to start: not paced",
			policy:  fleet(delayBetweenNodes(10*time.Minute), lastSucceededAt(time.Minute)),
			shadows: []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle, running(newV))},
			want:    "", paced: "False/NotPaced"},
	})
}

// TestThePacingRecordsLiveInThePolicysStatus: the start pass records the
// first offer of each version once and keeps it (a new leader reads the
// same clock), also for a version no node is offered any more (a pin moved
// back to it keeps its age), and keeps the last success.
func TestThePacingRecordsLiveInThePolicysStatus(t *testing.T) {
	pol := fleet(minReleaseAge(time.Hour), firstOfferedAt(newV, 30*time.Minute), firstOfferedAt("1.19.9", 48*time.Hour), lastSucceededAt(time.Hour))
	shadows := []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle), mkShadow("b", idle, idle, offered("1.21.0"))}
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{pol}, []*v1.Node{mkNode("a"), mkNode("b")}, shadows)
	f.clock.SetTime(t0)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var offers []string
	for _, o := range got.Status.OfferedVersions {
		offers = append(offers, o.Version+"@"+o.FirstOffered.UTC().Format(time.RFC3339))
	}
	if want := "1.19.9@2026-02-28T10:00:00Z 1.20.0@2026-03-02T09:30:00Z 1.21.0@2026-03-02T10:00:00Z"; strings.Join(offers, " ") != want {
		t.Errorf("offeredVersions %s, want %s", strings.Join(offers, " "), want)
	}
	if l := got.Status.LastUpdateSucceeded; l == nil || !l.Time.Equal(t0.Add(-time.Hour)) {
		t.Errorf("lastUpdateSucceeded %v, want %v", l, t0.Add(-time.Hour))
	}
	// A second pass a minute later, on a cache that shows the written
	// status, writes nothing: the records are not moved on.
	if err := f.policies.Update(got); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.clock.Step(time.Minute)
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.expect(nil)
}

// TestAnUpdatePassingItsHealthGateIsRecordedInItsPolicysStatusFirst: the
// success is written to the policy that started the update before the
// shadow returns to Idle, so no restart between the two loses it.
func TestAnUpdatePassingItsHealthGateIsRecordedInItsPolicysStatusFirst(t *testing.T) {
	s := mkShadow("n1", monitor, monitor, running(newV), since(7*time.Minute),
		annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-6*time.Minute).Format(time.RFC3339)), startedBy("fleet"))
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(delayBetweenNodes(time.Hour))}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"record-success fleet " + t0.UTC().Format(time.RFC3339), "update n1 Idle"})
	got, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Status.LastUpdateSucceeded; l == nil || !l.Time.Equal(t0) {
		t.Errorf("lastUpdateSucceeded %v, want %v", l, t0)
	}
}

// TestPacingOutOfRangeIsRefused: the CRD's rules refuse these; an older CRD
// may not, and the operator refuses them too.
func TestPacingOutOfRangeIsRefused(t *testing.T) {
	for name, mod := range map[string]policyMod{
		"a negative minReleaseAge":       minReleaseAge(-time.Second),
		"a minReleaseAge over 30 days":   minReleaseAge(MaxMinReleaseAge + time.Second),
		"a negative delayBetweenNodes":   delayBetweenNodes(-time.Second),
		"a delayBetweenNodes over a day": delayBetweenNodes(MaxDelayBetweenNodes + time.Second),
		"ignoreWaves with a minReleaseAge": func(p *updatesv1alpha1.UpdatePolicy) {
			p.Spec.TargetVersion, p.Spec.IgnoreWaves = newV, true
			p.Spec.MinReleaseAge = &metav1.Duration{Duration: time.Hour}
		},
	} {
		if pol := parsePolicy(fleet(mod), defaultOptions().Deadlines); pol.invalid == "" {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, mod := range map[string]policyMod{
		"the largest minReleaseAge":     minReleaseAge(MaxMinReleaseAge),
		"the largest delayBetweenNodes": delayBetweenNodes(MaxDelayBetweenNodes),
		"zero":                          minReleaseAge(0),
	} {
		if pol := parsePolicy(fleet(mod), defaultOptions().Deadlines); pol.invalid != "" {
			t.Errorf("%s: refused: %s", name, pol.invalid)
		}
	}
}

// TestAPinMovedBackToAVersionNoNodeIsOfferedAnyMoreKeepsItsAge: the nodes
// were offered 1.20.0 long ago and now report 1.21.0; a pin back to 1.20.0
// goes at once, on the age the policy recorded.
func TestAPinMovedBackToAVersionNoNodeIsOfferedAnyMoreKeepsItsAge(t *testing.T) {
	runPacingCases(t, []pacingCase{
		{name: "the pin's record is kept although no node reports it",
			policy:  fleet(minReleaseAge(time.Hour), pin(newV), firstOfferedAt(newV, 48*time.Hour), firstOfferedAt("1.21.0", time.Minute)),
			shadows: []*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle, offered("1.21.0"))},
			want:    "start a@1.20.0", paced: "False/NotPaced"},
	})
}

// TestAPolicyWithoutMinReleaseAgeRecordsNoOfferButEverySuccess: no
// minReleaseAge, no new offer recorded (a record made while it was set is
// kept); a success is recorded without delayBetweenNodes too, so that a
// delay set later counts from the last success (simulation seeds
// 11545879933131344284 and 4477944499289776246 started a node within a delay
// set after a success that was not recorded).
func TestAPolicyWithoutMinReleaseAgeRecordsNoOfferButEverySuccess(t *testing.T) {
	f := newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet(firstOfferedAt("1.19.9", time.Hour))}, []*v1.Node{mkNode("a")},
		[]*updatesv1alpha1.BottlerocketShadow{mkShadow("a", idle, idle)})
	if err := f.c.syncStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.UpdatesV1alpha1().UpdatePolicies().Get(f.ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := got.Status.OfferedVersions; len(o) != 1 || o[0].Version != "1.19.9" {
		t.Errorf("offeredVersions %+v, want only the record made before", o)
	}
	s := mkShadow("n1", monitor, monitor, running(newV), since(7*time.Minute),
		annotate(updatesv1alpha1.HealthySinceAnnotation, t0.Add(-6*time.Minute).Format(time.RFC3339)), startedBy("fleet"))
	f = newPolicyFixture(t, defaultOptions(), []*updatesv1alpha1.UpdatePolicy{fleet()}, []*v1.Node{mkNode("n1")},
		[]*updatesv1alpha1.BottlerocketShadow{s})
	if err := f.c.syncShadow(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.expect([]string{"record-success fleet " + t0.UTC().Format(time.RFC3339), "update n1 Idle"})
}
