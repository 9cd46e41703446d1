// Package results owns the machine-readable output of the benchmarks under test/bench:
// one JSON document per benchmark run, committed under docs/benchmarks/data/ and read
// by the plot generator (make plots). Figures are recorded as measured; nothing here
// derives or smooths them, so a plot always shows what a run printed.
//
// It is a module of its own, with nothing but the standard library, so that
// the plot generator (hack/plots, outside go.work) reads the very types the
// benchmarks write without requiring the product module and its Kubernetes
// dependencies.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Document is one benchmark run: where and when it ran and what it measured.
type Document struct {
	// Benchmark names the benchmark ("scale", "rollout", "footprint", "replay", "soak").
	Benchmark string  `json:"benchmark"`
	Date      string  `json:"date"` // RFC 3339, UTC
	Machine   Machine `json:"machine"`
	// Notes says what a reader must know to compare figures (load, flags that differ
	// from the defaults).
	Notes string `json:"notes,omitempty"`
	// Points are measurements against a size (node count) — one per size run.
	Points []Point `json:"points,omitempty"`
	// Series are measurements over time (e.g. rollout progress), one per run.
	Series []Series `json:"series,omitempty"`
}

// Machine describes where the figures were taken.
type Machine struct {
	Cores     int    `json:"cores"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// Point holds named figures at one size. Metric names are lowerCamelCase with the unit
// as suffix (detectionP99Ms, controllerCPUPercent, controllerRSSMiB) so plots label
// their axes from the name.
type Point struct {
	// Label names the point when it is not a node count (a process of the
	// footprint benchmark); plots name its bars by it.
	Label      string             `json:"label,omitempty"`
	Nodes      int                `json:"nodes"`
	Extensions int                `json:"extensions,omitempty"`
	Metrics    map[string]float64 `json:"metrics"`
}

// Series is a time series of named figures for one run of a given size.
type Series struct {
	Name    string   `json:"name"`
	Nodes   int      `json:"nodes"`
	Columns []string `json:"columns"` // names of the values in each Sample, e.g. ["updated","inProgress"]
	Samples []Sample `json:"samples"`
}

// Sample is one observation: seconds since the start of the run and one value per column.
type Sample struct {
	Seconds float64   `json:"seconds"`
	Values  []float64 `json:"values"`
}

// New starts a document for benchmark on this machine, dated now.
func New(benchmark string, now time.Time) *Document {
	return &Document{
		Benchmark: benchmark,
		Date:      now.UTC().Format(time.RFC3339),
		Machine: Machine{
			Cores:     runtime.NumCPU(),
			GoVersion: runtime.Version(),
			OS:        runtime.GOOS,
			Arch:      runtime.GOARCH,
		},
	}
}

// Write stores the document as indented JSON at path, creating its directory.
func (d *Document) Write(path string) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads a document written by Write.
func Read(path string) (*Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Benchmark == "" {
		return nil, fmt.Errorf("%s: no benchmark name", path)
	}
	for _, s := range d.Series {
		for i, smp := range s.Samples {
			if len(smp.Values) != len(s.Columns) {
				return nil, fmt.Errorf("%s: series %q sample %d has %d values for %d columns", path, s.Name, i, len(smp.Values), len(s.Columns))
			}
		}
	}
	return &d, nil
}
