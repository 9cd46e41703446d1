package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"nodehealth.io/nodehealth/test/bench/results"
)

const fixture = "testdata/data"

func render(t *testing.T, dir string) ([]Output, string) {
	t.Helper()
	docs, err := readDocuments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var notes bytes.Buffer
	outs, err := Render(docs, &notes)
	if err != nil {
		t.Fatal(err)
	}
	return outs, notes.String()
}

func names(outs []Output) []string {
	var ns []string
	for _, o := range outs {
		ns = append(ns, o.Name)
	}
	return ns
}

// The fixture gives each kind of plot: lines against node count per unit,
// bars of the footprint, and the rollout's progress over time; metrics
// without a known unit (renewalsPerSecond) and one-size points are not drawn.
func TestTheFixtureRendersEachKindOfPlotAndSaysWhyOthersAreNotDrawn(t *testing.T) {
	outs, notes := render(t, fixture)
	want := []string{"footprint-cpu.png", "footprint-memory.png", "rollout-progress.png", "scale-cpu.png", "scale-latency.png", "scale-memory.png"}
	if got := names(outs); !reflect.DeepEqual(got, want) {
		t.Fatalf("plots %v, want %v", got, want)
	}
	for _, o := range outs {
		img, err := png.Decode(bytes.NewReader(o.PNG))
		if err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 250 {
			t.Errorf("%s: %v, too small to read", o.Name, b)
		}
	}
	if !strings.Contains(notes, "rollout: figures of one node count only") {
		t.Errorf("notes do not say why the rollout's points are not drawn: %q", notes)
	}
	if strings.Contains(notes, "no scale.json") {
		t.Errorf("notes report a file that exists: %q", notes)
	}
}

// make verify compares bytes, so the same data must give the same bytes.
func TestRenderIsDeterministic(t *testing.T) {
	first, _ := render(t, fixture)
	second, _ := render(t, fixture)
	for i := range first {
		if !bytes.Equal(first[i].PNG, second[i].PNG) {
			t.Errorf("%s differs between two renders", first[i].Name)
		}
	}
}

// A figure that changes changes the plot (the check would otherwise pass on
// stale plots).
func TestRenderFollowsTheData(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir)
	before, _ := render(t, dir)
	path := filepath.Join(dir, "scale.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"detectionP99Ms": 300`), []byte(`"detectionP99Ms": 350`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	after, _ := render(t, dir)
	for i := range before {
		changed := !bytes.Equal(before[i].PNG, after[i].PNG)
		if want := before[i].Name == "scale-latency.png"; changed != want {
			t.Errorf("%s: changed = %v, want %v", before[i].Name, changed, want)
		}
	}
}

func TestMissingDataIsSkipped(t *testing.T) {
	outs, notes := render(t, t.TempDir())
	if len(outs) != 0 {
		t.Errorf("plots without data: %v", names(outs))
	}
	for _, b := range expected {
		if !strings.Contains(notes, "no "+b+".json") {
			t.Errorf("notes do not report the missing %s.json: %q", b, notes)
		}
	}
}

// run writes the plots, removes PNGs no data gives, and with check fails,
// naming the file, on a stale, missing or extra plot without touching it.
func TestCheckingPlotsFailsOnAStaleMissingOrExtraPlotWithoutTouchingIt(t *testing.T) {
	out := t.TempDir()
	var log bytes.Buffer
	if err := run(fixture, out, true, &log); err == nil || !strings.Contains(err.Error(), "scale-latency.png") {
		t.Fatalf("check with no plots written: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("check wrote %d files", len(entries))
	}
	extra := filepath.Join(out, "old-plot.png")
	if err := os.WriteFile(extra, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(fixture, out, false, &log); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(extra); !os.IsNotExist(err) {
		t.Errorf("a plot no data gives was kept: %v", err)
	}
	if err := run(fixture, out, true, &log); err != nil {
		t.Fatalf("check right after writing: %v", err)
	}
	stale := filepath.Join(out, "rollout-progress.png")
	if err := os.WriteFile(stale, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(fixture, out, true, &log); err == nil || !strings.Contains(err.Error(), "rollout-progress.png") {
		t.Errorf("check of a stale plot: %v", err)
	}
	if b, _ := os.ReadFile(stale); string(b) != "stale" {
		t.Error("check rewrote a plot")
	}
}

func TestBadDataNamesTheFile(t *testing.T) {
	for name, content := range map[string]string{
		"not json":       `{"benchmark": `,
		"no benchmark":   `{"points": []}`,
		"short sample":   `{"benchmark": "rollout", "series": [{"name": "x", "columns": ["a", "b"], "samples": [{"seconds": 1, "values": [1]}]}]}`,
		"wrong type":     `{"benchmark": "scale", "points": [{"nodes": "ten"}]}`,
		"unknown number": `{"benchmark": "scale", "points": [{"nodes": 1, "metrics": {"aMs": "fast"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := readDocuments(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
				t.Errorf("got %v, want an error naming bad.json", err)
			}
		})
	}
}

func copyFixture(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(fixture, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Bars of labelled points (the footprint's processes) are grouped by process
// and named by it; unlabelled points keep the metric-first order.
func TestBarsOfLabelledPointsAreGroupedAndNamedByProcess(t *testing.T) {
	mem := unit{key: "memory", label: "MiB", suffix: "MiB"}
	labelled := &results.Document{Benchmark: "footprint", Points: []results.Point{
		{Label: "agent", Metrics: map[string]float64{"rssStartMiB": 1, "rssAfterMiB": 2}},
		{Label: "sidecar", Metrics: map[string]float64{"rssStartMiB": 3, "rssAfterMiB": 4}},
	}}
	vals, names := barValues(labelled, mem)
	want := []string{"agent: rssAfter", "agent: rssStart", "sidecar: rssAfter", "sidecar: rssStart"}
	if !reflect.DeepEqual(names, want) || !reflect.DeepEqual([]float64(vals), []float64{2, 1, 4, 3}) {
		t.Errorf("labelled: bars %v %v, want %v [2 1 4 3]", names, vals, want)
	}
	sized := &results.Document{Benchmark: "x", Points: []results.Point{
		{Nodes: 100, Metrics: map[string]float64{"rssMiB": 1}},
		{Nodes: 500, Metrics: map[string]float64{"rssMiB": 2}},
	}}
	if _, names := barValues(sized, mem); !reflect.DeepEqual(names, []string{"rss (100 nodes)", "rss (500 nodes)"}) {
		t.Errorf("by node count: %v", names)
	}
}
