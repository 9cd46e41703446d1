package sim

import (
	"slices"
	"testing"
	"time"
)

func TestDueItemsAreTakenOnceDueInNameOrderAndKeepTheEarlierOfTwoDeadlines(t *testing.T) {
	var d DueItems
	t0 := time.Unix(0, 0)
	d.Add("b", t0.Add(2*time.Second))
	d.Add("a", t0.Add(2*time.Second))
	d.Add("c", t0.Add(5*time.Second))
	d.Add("c", t0.Add(time.Second))   // sooner: taken
	d.Add("a", t0.Add(9*time.Second)) // later: ignored
	if at, ok := d.At("c"); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("c due at %v (%v), want 1 s", at, ok)
	}
	if got := d.Take(t0); len(got) != 0 {
		t.Fatalf("at 0 s took %q, want nothing", got)
	}
	if got, want := d.Take(t0.Add(2*time.Second)), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("at 2 s took %q, want %q", got, want)
	}
	if _, ok := d.At("c"); ok {
		t.Fatal("c still waits once taken")
	}
	if got := d.Take(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("taken items came back: %q", got)
	}
}
