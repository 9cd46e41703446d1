// Package monitoring checks the Grafana dashboards and the Prometheus rules of
// deploy/monitoring: every expression parses with Prometheus's own PromQL
// parser, and every metric it names is one a nodehealth binary registers, as
// listed in deploy/monitoring/metrics.txt. That list is generated (make
// generate) from the Describe of each binary's collectors by
// hack/metrics-list, so a dashboard cannot draw from a metric that was
// renamed or never existed, even one that has no series yet.
package monitoring

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const dir = "../../deploy/monitoring"

// expression is one PromQL expression and where it comes from.
type expression struct{ where, expr string }

func TestEveryMetricIsRegistered(t *testing.T) {
	known := registeredSeries(t, filepath.Join(dir, "metrics.txt"))
	exprs := append(dashboardExpressions(t), ruleExpressions(t, filepath.Join(dir, "nodehealth.rules.yaml"))...)
	if len(exprs) == 0 {
		t.Fatal("no expressions found")
	}
	for _, e := range exprs {
		names, err := metricNames(e.expr)
		if err != nil {
			t.Errorf("%s: %v\n  %s", e.where, err, e.expr)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: the expression names no metric: %s", e.where, e.expr)
		}
		for _, n := range names {
			if !known[n] {
				t.Errorf("%s: metric %q is not one any nodehealth binary registers (deploy/monitoring/metrics.txt; run make generate after adding a metric)\n  %s", e.where, n, e.expr)
			}
		}
	}
	t.Logf("checked %d expressions against %d series names", len(exprs), len(known))
}

// Every selector of every dashboard filters by the cluster variable, so that
// one Prometheus holding several clusters' series shows one cluster; each
// dashboard has the cluster and job variables.
func TestDashboardsFilterByCluster(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(dir, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		var doc struct {
			Templating struct {
				List []struct {
					Name     string `json:"name"`
					AllValue string `json:"allValue"`
				} `json:"list"`
			} `json:"templating"`
		}
		readJSON(t, file, &doc)
		vars := map[string]string{}
		for _, v := range doc.Templating.List {
			vars[v.Name] = v.AllValue
		}
		for _, name := range []string{"cluster", "job"} {
			// All must match series without the label too (one cluster, no
			// cluster label): ".*" does, Grafana's default (a list) does not.
			if all, ok := vars[name]; !ok || all != ".*" {
				t.Errorf("%s: no variable %s with allValue \".*\"", filepath.Base(file), name)
			}
		}
	}
	for _, e := range dashboardExpressions(t) {
		node, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVariables.Replace(e.expr))
		if err != nil {
			continue // TestEveryMetricIsRegistered reports it
		}
		parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				found := false
				for _, m := range vs.LabelMatchers {
					found = found || m.Name == "cluster"
				}
				if !found {
					t.Errorf("%s: selector %s does not filter by cluster=~\"$cluster\"", e.where, vs)
				}
			}
			return nil
		})
	}
}

// Every count of nodes the controller exports (its nodehealth_*_nodes
// gauges) has a panel: an operator who sees the gated count move must also
// see the tracked, not-ready and leaving counts beside it, or a scale-down's
// leaving nodes read as gated nodes nobody explains.
func TestTheDashboardsShowEveryNodeCountOfTheController(t *testing.T) {
	shown := map[string]bool{}
	for _, e := range dashboardExpressions(t) {
		names, err := metricNames(e.expr)
		if err != nil {
			continue // TestEveryMetricIsRegistered reports it
		}
		for _, n := range names {
			shown[n] = true
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	counts := 0
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "nodehealth-controller" || fields[2] != "gauge" || !strings.HasSuffix(fields[1], "_nodes") {
			continue
		}
		counts++
		if !shown[fields[1]] {
			t.Errorf("no dashboard panel shows %s", fields[1])
		}
	}
	if counts == 0 {
		t.Fatal("metrics.txt lists no nodehealth_*_nodes gauge of the controller")
	}
}

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The checker itself: a made-up metric, a histogram without its suffix and
// a Grafana variable it does not know are rejected.
func TestTheCheckerRejectsUnknownMetricsHistogramsWithoutSuffixAndUnknownVariables(t *testing.T) {
	known := registeredSeries(t, filepath.Join(dir, "metrics.txt"))
	for _, expr := range []string{
		`sum(nodehealth_no_such_metric)`,
		`histogram_quantile(0.9, rate(nodehealth_detection_latency_seconds[5m]))`,
		`nodehealth_gated_nodes{reason="$reason"} + on() nodehealth_tracked_nodes[$__foo]`,
	} {
		names, err := metricNames(expr)
		if err != nil {
			continue
		}
		allKnown := true
		for _, n := range names {
			allKnown = allKnown && known[n]
		}
		if allKnown {
			t.Errorf("accepted %s", expr)
		}
	}
	if !known["nodehealth_detection_latency_seconds_bucket"] || !known["nodehealth_gated_nodes"] {
		t.Error("registered metrics are missing from the list")
	}
}

// The PrometheusRule carries exactly the plain rules file's groups: one is
// generated from the other, and this catches a hand edit that make verify
// would report only later.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain, crd map[string]any
	readYAML(t, filepath.Join(dir, "nodehealth.rules.yaml"), &plain)
	readYAML(t, filepath.Join(dir, "prometheusrule.yaml"), &crd)
	if crd["kind"] != "PrometheusRule" || crd["apiVersion"] != "monitoring.coreos.com/v1" {
		t.Fatalf("prometheusrule.yaml is a %v %v", crd["apiVersion"], crd["kind"])
	}
	if !reflect.DeepEqual(crd["spec"], plain) {
		t.Error("prometheusrule.yaml's spec differs from nodehealth.rules.yaml; run make generate")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// registeredSeries reads metrics.txt into the series names Prometheus
// stores: a histogram is <name>_bucket, _sum and _count; a summary also
// <name> itself.
func registeredSeries(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			t.Fatalf("%s:%d: want binary, name and type: %q", path, line, text)
		}
		name, typ := fields[1], fields[2]
		switch typ {
		case "histogram":
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				known[name+suffix] = true
			}
		case "summary":
			for _, suffix := range []string{"", "_sum", "_count"} {
				known[name+suffix] = true
			}
		case "counter", "gauge", "untyped", "unknown":
			known[name] = true
		default:
			t.Fatalf("%s:%d: unknown type %q", path, line, typ)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(known) == 0 {
		t.Fatalf("%s lists no metric", path)
	}
	return known
}

// grafanaVariables are the built-in interval variables the dashboards may
// use, replaced by a duration before parsing, and the dashboards' own
// cluster, job and extension variables, replaced by a regular expression. Any other
// $variable fails.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h", "$cluster", ".*", "$job", ".*", "$extension", ".*")

var variable = regexp.MustCompile(`\$\{?\w+`)

func metricNames(expr string) ([]string, error) {
	expr = grafanaVariables.Replace(expr)
	if v := variable.FindString(expr); v != "" {
		return nil, fmt.Errorf("unknown Grafana variable %s", v)
	}
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var inspectErr error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && name == "" {
				if m.Type != labels.MatchEqual {
					inspectErr = fmt.Errorf("selector %s matches metric names by pattern; name the metric", vs)
				}
				name = m.Value
			}
		}
		names = append(names, name)
		return nil
	})
	return names, inspectErr
}

// dashboardExpressions returns every "expr" of every dashboard, wherever it
// is nested (panels, rows' panels, template queries).
func dashboardExpressions(t *testing.T) []expression {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no dashboards found")
	}
	var out []expression
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		n := len(out)
		walk(doc, filepath.Base(file), func(where, expr string) { out = append(out, expression{where, expr}) })
		if len(out) == n {
			t.Errorf("%s has no expression", file)
		}
	}
	return out
}

func walk(v any, where string, found func(where, expr string)) {
	switch v := v.(type) {
	case map[string]any:
		if title, ok := v["title"].(string); ok {
			where += " / " + title
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && k == "expr" {
				found(where, s)
				continue
			}
			walk(v[k], where, found)
		}
	case []any:
		for _, e := range v {
			walk(e, where, found)
		}
	}
}

// ruleExpressions parses the rules file as Prometheus loads it (which also
// validates the expressions and the annotation templates) and returns its
// expressions.
func ruleExpressions(t *testing.T, path string) []expression {
	t.Helper()
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	var out []expression
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			out = append(out, expression{filepath.Base(path) + " / " + g.Name + " / " + name, r.Expr})
		}
	}
	return out
}

// Every alert links its runbook with an absolute runbook_url (Alertmanager
// and its receivers make it a link; a relative path goes nowhere), to a
// section docs/monitoring.md has.
func TestRunbookURLs(t *testing.T) {
	const base = "https://github.com/nodehealth/nodehealth/blob/main/docs/monitoring.md#"
	path := filepath.Join(dir, "nodehealth.rules.yaml")
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	doc, err := os.ReadFile(filepath.Join(dir, "..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "#") {
			title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
			anchor := regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(title, "")
			anchors[strings.ReplaceAll(anchor, " ", "-")] = true
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if _, ok := r.Annotations["runbook"]; ok {
				t.Errorf("%s: annotation runbook; use runbook_url", r.Alert)
			}
			url := r.Annotations["runbook_url"]
			if !strings.HasPrefix(url, base) {
				t.Errorf("%s: runbook_url %q does not start with %s", r.Alert, url, base)
				continue
			}
			if !anchors[strings.TrimPrefix(url, base)] {
				t.Errorf("%s: runbook_url %q: docs/monitoring.md has no such section", r.Alert, url)
			}
		}
	}
}
