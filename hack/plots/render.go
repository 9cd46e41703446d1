package main

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"nodehealth.io/nodehealth/test/bench/results"
)

// Output is one rendered plot.
type Output struct {
	Name string // file name, e.g. scale-latency.png
	PNG  []byte
}

// expected are the documents docs/benchmarks.md shows plots of; a missing
// one is reported, not an error (benchmarks are run by hand).
var expected = []string{"scale", "rollout", "footprint"}

// barCharts are the benchmarks whose figures are one measurement per
// metric (no node-count axis), drawn as bars.
var barCharts = map[string]bool{"footprint": true}

// Render draws every plot the documents give, in a fixed order, and says on
// notes what it skipped and why.
func Render(docs []*results.Document, notes io.Writer) ([]Output, error) {
	have := map[string]bool{}
	var out []Output
	add := func(o Output, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		for _, prev := range out {
			if prev.Name == o.Name {
				return fmt.Errorf("two plots named %s", o.Name)
			}
		}
		out = append(out, o)
		return nil
	}
	for _, d := range docs {
		have[d.Benchmark] = true
		switch {
		case len(d.Points) == 0:
		case barCharts[d.Benchmark]:
			for _, u := range units {
				if o, ok, err := bars(d, u); ok || err != nil {
					if err := add(o, err); err != nil {
						return nil, err
					}
				}
			}
		case distinctNodes(d.Points) >= 2:
			for _, u := range units {
				if o, ok, err := lines(d, u); ok || err != nil {
					if err := add(o, err); err != nil {
						return nil, err
					}
				}
			}
		default:
			fmt.Fprintf(notes, "plots: %s: figures of one node count only; no plot against node count\n", d.Benchmark)
		}
		for _, s := range d.Series {
			for _, g := range seriesGroups(d, s) {
				if err := add(series(d, s, g)); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, b := range expected {
		if !have[b] {
			fmt.Fprintf(notes, "plots: no %s.json: its plots are skipped (run make bench-%s)\n", b, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func distinctNodes(ps []results.Point) int {
	seen := map[int]bool{}
	for _, p := range ps {
		seen[p.Nodes] = true
	}
	return len(seen)
}

// metricsOf are the sorted metric names of ps in unit u.
func metricsOf(ps []results.Point, u unit) []string {
	seen := map[string]bool{}
	for _, p := range ps {
		for m := range p.Metrics {
			if got, ok := unitOf(m); ok && got == u {
				seen[m] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for m := range seen {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

// lines draws the metrics of unit u against the node count, one line per
// metric and extension count.
func lines(d *results.Document, u unit) (Output, bool, error) {
	o := Output{Name: d.Benchmark + "-" + u.key + ".png"}
	metrics := metricsOf(d.Points, u)
	if len(metrics) == 0 {
		return o, false, nil
	}
	exts := map[int]bool{}
	for _, p := range d.Points {
		exts[p.Extensions] = true
	}
	extList := make([]int, 0, len(exts))
	for e := range exts {
		extList = append(extList, e)
	}
	sort.Ints(extList)

	p := newPlot(d, fmt.Sprintf("%s: %s against node count", d.Benchmark, u.key))
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = u.label
	p.Y.Min = 0
	i := 0
	for _, m := range metrics {
		for _, e := range extList {
			var xys plotter.XYs
			for _, pt := range d.Points {
				if v, ok := pt.Metrics[m]; ok && pt.Extensions == e {
					xys = append(xys, plotter.XY{X: float64(pt.Nodes), Y: v})
				}
			}
			if len(xys) == 0 {
				continue
			}
			sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
			label := m
			if len(extList) > 1 {
				label = fmt.Sprintf("%s, %d extensions", m, e)
			}
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return o, true, err
			}
			style(l, s, i)
			p.Add(l, s)
			p.Legend.Add(label, l, s)
			i++
		}
	}
	legendOnTop(p, len(metrics)*len(extList))
	b, err := encodePNG(p)
	o.PNG = b
	return o, true, err
}

// bars draws the metrics of unit u, one bar per metric and point. Labelled
// points (the footprint's processes) are grouped by point, each bar named
// "label: metric"; otherwise bars are grouped by metric, with the node count
// when the document holds several points.
func bars(d *results.Document, u unit) (Output, bool, error) {
	o := Output{Name: d.Benchmark + "-" + u.key + ".png"}
	vals, names := barValues(d, u)
	if len(vals) == 0 {
		return o, false, nil
	}
	p := newPlot(d, fmt.Sprintf("%s: %s", d.Benchmark, u.key))
	p.Y.Label.Text = u.label
	bc, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return o, true, err
	}
	bc.Color = plotutil.Color(0)
	bc.LineStyle.Width = 0
	p.Add(bc)
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	b, err := encodePNG(p)
	o.PNG = b
	return o, true, err
}

// group is the columns of a series that share an axis.
type group struct {
	key, label string
	columns    []int
}

// seriesGroups splits a series' columns by unit; columns without a unit
// suffix are counts (for the rollout: nodes in each state).
func seriesGroups(d *results.Document, s results.Series) []group {
	countKey, countLabel := "counts", "count"
	if d.Benchmark == "rollout" {
		countKey, countLabel = "progress", "nodes"
	}
	var gs []group
	find := func(key, label string) *group {
		for i := range gs {
			if gs[i].key == key {
				return &gs[i]
			}
		}
		gs = append(gs, group{key: key, label: label})
		return &gs[len(gs)-1]
	}
	for i, c := range s.Columns {
		if u, ok := unitOf(c); ok {
			find(u.key, u.label).columns = append(find(u.key, u.label).columns, i)
		} else {
			g := find(countKey, countLabel)
			g.columns = append(g.columns, i)
		}
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].key < gs[j].key })
	return gs
}

// series draws the columns of g over the run's time.
func series(d *results.Document, s results.Series, g group) (Output, error) {
	name := d.Benchmark + "-" + g.key + ".png"
	if len(d.Series) > 1 {
		name = fmt.Sprintf("%s-%dnodes-%s.png", d.Benchmark, s.Nodes, g.key)
	}
	o := Output{Name: name}
	p := newPlot(d, fmt.Sprintf("%s: %s, %d nodes", d.Benchmark, g.key, s.Nodes))
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = g.label
	p.Y.Min = 0
	for i, c := range g.columns {
		xys := make(plotter.XYs, len(s.Samples))
		for k, smp := range s.Samples {
			xys[k] = plotter.XY{X: smp.Seconds, Y: smp.Values[c]}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return o, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(s.Columns[c], l)
	}
	legendOnTop(p, len(g.columns))
	b, err := encodePNG(p)
	o.PNG = b
	return o, err
}

// newPlot starts a plot whose title also says where and when the figures
// were taken.
func newPlot(d *results.Document, title string) *plot.Plot {
	p := plot.New()
	date, _, _ := strings.Cut(d.Date, "T")
	p.Title.Text = fmt.Sprintf("%s\n%d cores, %s, %s", title, d.Machine.Cores, d.Machine.GoVersion, date)
	p.Add(plotter.NewGrid())
	return p
}

// legendOnTop puts the legend in the top left corner and raises the Y axis
// so that its entries sit above the data instead of over it.
func legendOnTop(p *plot.Plot, entries int) {
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(6)
	// Each legend line takes about 7 % of the plot's height.
	p.Y.Max *= 1 + 0.07*float64(entries+1)
}

func style(l *plotter.Line, s *plotter.Scatter, i int) {
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	s.Color = plotutil.Color(i)
	s.Shape = plotutil.Shape(i)
}

// encodePNG renders p at a fixed size and resolution: the bytes depend on the
// figures only.
func encodePNG(p *plot.Plot) ([]byte, error) {
	w, err := p.WriterTo(16*vg.Centimeter, 10*vg.Centimeter, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// labelled reports whether every point has a label.
func labelled(points []results.Point) bool {
	for _, pt := range points {
		if pt.Label == "" {
			return false
		}
	}
	return len(points) > 0
}

// barValues are the bars of unit u and their names, in the order bars draws
// them.
func barValues(d *results.Document, u unit) (plotter.Values, []string) {
	var (
		vals  plotter.Values
		names []string
	)
	add := func(pt results.Point, m string) {
		v, ok := pt.Metrics[m]
		if !ok {
			return
		}
		name := strings.TrimSuffix(m, u.suffix)
		switch {
		case pt.Label != "":
			name = pt.Label + ": " + name
		case len(d.Points) > 1:
			name = fmt.Sprintf("%s (%d nodes)", name, pt.Nodes)
		}
		vals = append(vals, v)
		names = append(names, name)
	}
	metrics := metricsOf(d.Points, u)
	if labelled(d.Points) {
		for _, pt := range d.Points {
			for _, m := range metrics {
				add(pt, m)
			}
		}
	} else {
		for _, m := range metrics {
			for _, pt := range d.Points {
				add(pt, m)
			}
		}
	}
	return vals, names
}
