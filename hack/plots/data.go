package main

import (
	"path/filepath"
	"sort"
	"strings"

	"nodehealth.io/nodehealth/test/bench/results"
)

// readDocuments reads every *.json of dir, sorted by file name. A file that
// is not a results document is an error that names it: a plot silently
// missing is worse than a failed make target.
func readDocuments(dir string) ([]*results.Document, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var docs []*results.Document
	for _, p := range paths {
		d, err := results.Read(p)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
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
