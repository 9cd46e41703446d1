package nodeutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestAWritersLastWriteCountsWhereTheCacheShowsNothingOrItsOwn lists what a
// writer takes a condition for, from the informer's copy and its last write.
func TestAWritersLastWriteCountsWhereTheCacheShowsNothingOrItsOwn(t *testing.T) {
	ours := func(reason string) bool { return reason == "Ours" }
	cond := func(status v1.ConditionStatus, reason string) *v1.NodeCondition {
		return &v1.NodeCondition{Type: "Drained", Status: status, Reason: reason}
	}
	cases := []struct {
		name   string
		cached *v1.NodeCondition
		wrote  v1.ConditionStatus
		want   *v1.NodeCondition
	}{
		{name: "no write known: the copy", cached: cond(v1.ConditionTrue, "Ours"), want: cond(v1.ConditionTrue, "Ours")},
		{name: "no write known, nothing cached: nothing"},
		{name: "a True write the copy does not show yet", wrote: v1.ConditionTrue, want: cond(v1.ConditionTrue, "Ours")},
		{name: "a False write over our True the copy still shows", cached: cond(v1.ConditionTrue, "Ours"), wrote: v1.ConditionFalse,
			want: cond(v1.ConditionFalse, "Ours")},
		{name: "a True write over our False the copy still shows", cached: cond(v1.ConditionFalse, "Ours"), wrote: v1.ConditionTrue,
			want: cond(v1.ConditionTrue, "Ours")},
		{name: "a False write leaves an absent condition absent", wrote: v1.ConditionFalse},
		{name: "another writer's condition is the copy's", cached: cond(v1.ConditionTrue, "AdminRequested"), wrote: v1.ConditionFalse,
			want: cond(v1.ConditionTrue, "AdminRequested")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := OwnLastWrite(tc.cached, "Drained", ours, tc.wrote, "Ours")
			switch {
			case (got == nil) != (tc.want == nil):
				t.Errorf("got %+v, want %+v", got, tc.want)
			case got != nil && (got.Type != tc.want.Type || got.Status != tc.want.Status || got.Reason != tc.want.Reason):
				t.Errorf("got %s=%s/%s, want %s=%s/%s", got.Type, got.Status, got.Reason, tc.want.Type, tc.want.Status, tc.want.Reason)
			}
		})
	}
}
