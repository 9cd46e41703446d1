package measure

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scrapeTimeout bounds one Scrape: a component too busy to answer in that
// time is itself a result.
const scrapeTimeout = 10 * time.Second

// Metrics is one read of a /metrics page: each sample's value by its full
// name with labels, e.g. `nodehealth_evictions_total{reason="x"}`.
type Metrics map[string]float64

// Scrape reads the text exposition format at url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// Sum adds every sample of a metric (all label values).
func (m Metrics) Sum(name string) float64 {
	total := 0.0
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// Bucket is one cumulative bucket of a histogram.
type Bucket struct {
	LE    float64
	Count float64
}

// Histogram returns the cumulative buckets of an unlabelled histogram, minus
// those of base (an earlier read), in ascending order.
func (m Metrics) Histogram(name string, base Metrics) []Bucket {
	var out []Bucket
	prefix := name + `_bucket{le="`
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		leStr := strings.TrimSuffix(strings.TrimPrefix(k, prefix), `"}`)
		le := math.Inf(1)
		if leStr != "+Inf" {
			var err error
			if le, err = strconv.ParseFloat(leStr, 64); err != nil {
				continue
			}
		}
		out = append(out, Bucket{LE: le, Count: v - base[k]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LE < out[j].LE })
	return out
}

// Quantile estimates a quantile from cumulative buckets the way PromQL's
// histogram_quantile does (linear within a bucket); NaN without observations.
func Quantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].Count == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].Count
	rank := q * total
	lower, lowerCount := 0.0, 0.0
	for _, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.LE, 1) {
				return lower
			}
			if b.Count == lowerCount {
				return b.LE
			}
			return lower + (b.LE-lower)*(rank-lowerCount)/(b.Count-lowerCount)
		}
		lower, lowerCount = b.LE, b.Count
	}
	return lower
}
