// Command plots draws the PNG plots of docs/benchmarks.md from the
// benchmarks' machine-readable results (docs/benchmarks/data/*.json, the
// format of nodehealth.io/nodehealth/test/bench/results): latency, CPU and
// memory against node count (scale), the rollout's progress over time
// (rollout), per-binary footprint bars (footprint), and any other series.
// A missing results file is skipped with a note.
//
// `make plots` writes them; `make verify` runs it with --check, which fails
// when a committed PNG differs from what the data gives, so the output is
// byte-for-byte deterministic (fixed size, fonts and order; no dates but the
// data's own).
//
// It is its own Go module (run with GOWORK=off): gonum/plot never reaches the
// product's modules, and the results types are copied, not imported.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	data := flag.String("data", "../../docs/benchmarks/data", "folder of the results documents (*.json)")
	out := flag.String("out", "../../docs/benchmarks", "folder the PNGs are written to; every *.png in it is the generator's")
	check := flag.Bool("check", false, "write nothing; fail when the PNGs in --out differ from what the data gives")
	flag.Parse()
	if err := run(*data, *out, *check, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "plots: %v\n", err)
		os.Exit(1)
	}
}

func run(dataDir, outDir string, check bool, log io.Writer) error {
	docs, err := readDocuments(dataDir)
	if err != nil {
		return err
	}
	outs, err := Render(docs, log)
	if err != nil {
		return err
	}
	existing, err := filepath.Glob(filepath.Join(outDir, "*.png"))
	if err != nil {
		return err
	}
	want := map[string][]byte{}
	for _, o := range outs {
		want[o.Name] = o.PNG
	}
	var stale []string
	for _, path := range existing {
		if _, ok := want[filepath.Base(path)]; !ok {
			stale = append(stale, filepath.Base(path)+" (no data gives it)")
			if !check {
				if err := os.Remove(path); err != nil {
					return err
				}
			}
		}
	}
	for _, o := range outs {
		path := filepath.Join(outDir, o.Name)
		have, err := os.ReadFile(path)
		if err == nil && bytes.Equal(have, o.PNG) {
			continue
		}
		stale = append(stale, o.Name)
		if !check {
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, o.PNG, 0o644); err != nil {
				return err
			}
		}
	}
	sort.Strings(stale)
	if check && len(stale) > 0 {
		return fmt.Errorf("plots in %s are stale (run make plots): %s", outDir, strings.Join(stale, ", "))
	}
	if !check {
		fmt.Fprintf(log, "plots: %d plots in %s, %d updated\n", len(outs), outDir, len(stale))
	}
	return nil
}
