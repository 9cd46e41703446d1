package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Document mirrors nodehealth.io/nodehealth/test/bench/results.Document. It
// is a copy, not an import, so this module never requires the product's
// (and its Kubernetes dependencies); the fields are read as plain JSON.
type Document struct {
	Benchmark string   `json:"benchmark"`
	Date      string   `json:"date"`
	Machine   Machine  `json:"machine"`
	Notes     string   `json:"notes,omitempty"`
	Points    []Point  `json:"points,omitempty"`
	Series    []Series `json:"series,omitempty"`
}

// Machine is results.Machine.
type Machine struct {
	Cores     int    `json:"cores"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// Point is results.Point.
type Point struct {
	Label      string             `json:"label,omitempty"`
	Nodes      int                `json:"nodes"`
	Extensions int                `json:"extensions,omitempty"`
	Metrics    map[string]float64 `json:"metrics"`
}

// Series is results.Series.
type Series struct {
	Name    string   `json:"name"`
	Nodes   int      `json:"nodes"`
	Columns []string `json:"columns"`
	Samples []Sample `json:"samples"`
}

// Sample is results.Sample.
type Sample struct {
	Seconds float64   `json:"seconds"`
	Values  []float64 `json:"values"`
}

// readDocuments reads every *.json of dir, sorted by file name. A file that
// is not a results document is an error that names it: a plot silently
// missing is worse than a failed make target.
func readDocuments(dir string) ([]*Document, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var docs []*Document
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var d Document
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&d); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if d.Benchmark == "" {
			return nil, fmt.Errorf("%s: no benchmark name", p)
		}
		for _, s := range d.Series {
			for i, smp := range s.Samples {
				if len(smp.Values) != len(s.Columns) {
					return nil, fmt.Errorf("%s: series %q sample %d has %d values for %d columns", p, s.Name, i, len(smp.Values), len(s.Columns))
				}
			}
		}
		docs = append(docs, &d)
	}
	return docs, nil
}

// unit is a family of metrics that share an axis, told by the suffix of the
// metric name (results.Point: "the unit as suffix").
type unit struct {
	key    string // used in file names
	label  string // the Y axis
	suffix string
}

var units = []unit{
	{key: "latency", label: "milliseconds", suffix: "Ms"},
	{key: "cpu", label: "CPU, % of one core", suffix: "CPUPercent"},
	{key: "memory", label: "MiB", suffix: "MiB"},
}

func unitOf(metric string) (unit, bool) {
	for _, u := range units {
		if strings.HasSuffix(metric, u.suffix) {
			return u, true
		}
	}
	return unit{}, false
}
