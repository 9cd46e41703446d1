package measure

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6, 11}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 6}, {90, 10}, {95, 11}, {100, 11}, {1, 1}} {
		if got := Percentile(ds, tc.p); got != tc.want {
			t.Errorf("Percentile(p%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile of nothing = %v, want 0", got)
	}
}

func TestParallelRunsEveryIndexAndReturnsAnError(t *testing.T) {
	var calls atomic.Int64
	if err := Parallel(context.Background(), 100, 4, func(int) error { calls.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 100 {
		t.Errorf("%d calls, want 100", calls.Load())
	}
	boom := errors.New("boom")
	if err := Parallel(context.Background(), 100, 4, func(i int) error {
		if i == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("Parallel = %v, want %v", err, boom)
	}
}

func TestQuantileInterpolatesWithinABucket(t *testing.T) {
	m := Metrics{`x_bucket{le="1"}`: 0, `x_bucket{le="2"}`: 10, `x_bucket{le="+Inf"}`: 10}
	if got := Quantile(0.5, m.Histogram("x", nil)); got != 1.5 {
		t.Errorf("median = %v, want 1.5", got)
	}
}
