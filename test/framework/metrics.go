package framework

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ScrapeMetric reads a /metrics endpoint (the text format every nodehealth
// binary serves) and returns SumMetric of name over it.
func ScrapeMetric(ctx context.Context, url, name string, labels map[string]string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", url, err)
	}
	family := families[name]
	if family == nil {
		return 0, nil
	}
	return SumMetric([]*dto.MetricFamily{family}, name, labels), nil
}

// SumMetric sums the series of the metric name whose labels include labels
// (every series when labels is empty): a counter's or gauge's value, a
// histogram's sample count. A metric with no series yet is 0, which is what a
// counter that has not been incremented means.
func SumMetric(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
