package framework

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"
)

func TestSumMetricAddsTheSeriesWhoseLabelsInclude(t *testing.T) {
	series := func(scope string, v float64) *dto.Metric {
		return &dto.Metric{Label: []*dto.LabelPair{{Name: ptr.To("scope"), Value: ptr.To(scope)}}, Counter: &dto.Counter{Value: ptr.To[float64](v)}}
	}
	families := []*dto.MetricFamily{
		{Name: ptr.To("suspensions_total"), Metric: []*dto.Metric{series("cluster", 2), series("zones", 3)}},
		{Name: ptr.To("latency_seconds"), Metric: []*dto.Metric{{Histogram: &dto.Histogram{SampleCount: ptr.To[uint64](7)}}}},
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"suspensions_total", nil, 5},
		{"suspensions_total", map[string]string{"scope": "zones"}, 3},
		{"suspensions_total", map[string]string{"scope": "nowhere"}, 0},
		{"latency_seconds", nil, 7},
		{"absent_total", nil, 0},
	} {
		if got := SumMetric(families, tc.name, tc.labels); got != tc.want {
			t.Errorf("SumMetric(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
