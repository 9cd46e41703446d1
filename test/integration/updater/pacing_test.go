package updater_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// The pacing of a policy (docs/updater.md, "Pacing") on the real API server,
// across operator restarts: the release's clock and the last success live
// in the policy's status, so a new operator neither starts the release's
// clock over nor forgets the success. The first node starts no earlier than
// minReleaseAge after the version was first seen offered, the second no
// earlier than delayBetweenNodes after the first passed its health gate,
// and the Paced condition says which wait holds them.
func TestPacingHoldsAcrossOperatorRestarts(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	const age, delay = 6 * time.Second, 8 * time.Second
	nodes := []string{"pace-1", "pace-2"}
	createNodes(t, nodes...)
	startAgent(t, ctx, nodes...)
	pol := createPolicy(t, func(s *updatesv1alpha1.UpdatePolicySpec) {
		s.MinReleaseAge = &metav1.Duration{Duration: age}
		s.DelayBetweenNodes = &metav1.Duration{Duration: delay}
	})
	paced := func(reason string) func(*updatesv1alpha1.UpdatePolicy) bool {
		return func(p *updatesv1alpha1.UpdatePolicy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, updatesv1alpha1.PolicyPaced)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}
	firstOffered := func(p *updatesv1alpha1.UpdatePolicy) time.Time {
		for _, o := range p.Status.OfferedVersions {
			if o.Version == newVersion {
				return o.FirstOffered.Time
			}
		}
		return time.Time{}
	}
	started := func(s *updatesv1alpha1.BottlerocketShadow) time.Time {
		at, err := time.Parse(time.RFC3339, s.Annotations["updates.nodehealth.io/started"])
		if err != nil {
			t.Fatalf("%s: started annotation: %v", s.Name, err)
		}
		return at
	}

	op := startOperator(t, baseOptions(t))
	p := waitPolicy(t, ctx, pol.Name, "waiting for the release's age", paced("ReleaseAge"))
	first := firstOffered(p)
	if first.IsZero() {
		t.Fatalf("no first offer of %s recorded: %+v", newVersion, p.Status.OfferedVersions)
	}
	op.stop()
	op = startOperator(t, baseOptions(t))

	s1 := waitShadow(t, ctx, "pace-1", "updated", updated)
	if at := started(s1); at.Before(first.Add(age)) {
		t.Errorf("pace-1 started at %s, before %s was %s old (first offered %s)", at, newVersion, age, first)
	}
	p = waitPolicy(t, ctx, pol.Name, "waiting between nodes", paced("DelayBetweenNodes"))
	if got := firstOffered(p); !got.Equal(first) {
		t.Errorf("the restarted operator moved the first offer from %s to %s", first, got)
	}
	if p.Status.LastUpdateSucceeded == nil {
		t.Fatalf("no lastUpdateSucceeded after pace-1 passed its health gate")
	}
	last := p.Status.LastUpdateSucceeded.Time
	op.stop()
	startOperator(t, baseOptions(t))

	s2 := waitShadow(t, ctx, "pace-2", "updated", updated)
	if at := started(s2); at.Before(last.Add(delay)) {
		t.Errorf("pace-2 started at %s, within %s of pace-1's success at %s", at, delay, last)
	}
}
