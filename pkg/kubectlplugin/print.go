package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// Output formats of `status`.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// validOutput reports whether format is one `status` prints.
func validOutput(format string) bool {
	switch format {
	case OutputTable, OutputWide, OutputJSON, OutputYAML:
		return true
	}
	return false
}

// printStatus writes a report in the requested format.
func printStatus(w io.Writer, format string, report StatusReport, taintKey string) error {
	if printed, err := printData(w, format, report); printed {
		return err
	}
	return printTable(w, format == OutputWide, report, taintKey)
}

// printData writes a report as JSON or YAML, the formats every command's -o
// shares; it reports false for a table format, which each command prints
// its own way (with table).
func printData(w io.Writer, format string, report any) (bool, error) {
	switch format {
	case OutputJSON:
		data, err := json.MarshalIndent(report, "", "    ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return true, err
	case OutputYAML:
		data, err := yaml.Marshal(report)
		if err != nil {
			return true, err
		}
		_, err = w.Write(data)
		return true, err
	}
	return false, nil
}

// table is the plugin's one table printer: a header and rows whose columns
// are aligned as kubectl aligns its own (printers.GetNewTabWriter).
type table struct {
	tw interface {
		io.Writer
		Flush() error
	}
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: printers.GetNewTabWriter(w)}
	t.row(header...)
	return t
}

// row adds a row of cells.
func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush writes the aligned table.
func (t *table) flush() error { return t.tw.Flush() }

// printTable prints one block per node: a line with the node's gate, then a
// table of its extensions.
func printTable(w io.Writer, wide bool, report StatusReport, taintKey string) error {
	skewed := false
	for i, n := range report.Nodes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "node/%s: %s; %s\n", n.Node, gateSummary(n, taintKey), conditionSummary(n.Condition))
		if n.ListError != "" {
			fmt.Fprintf(w, "  extension list cannot be parsed: %s\n", n.ListError)
			continue
		}
		if len(n.Extensions) == 0 {
			fmt.Fprintln(w, "  no system extensions")
			continue
		}
		header := []string{"EXTENSION", "AFFECTS READINESS", "SOURCE", "LEASE", "HOLDER", "LAST RENEWAL", "STATE", "REASON"}
		if wide {
			header = append(header, "LEASE DURATION", "RENEW TIME", "MESSAGE")
		}
		tw := newTable(w, header...)
		for _, e := range n.Extensions {
			renewal := lastRenewal(e)
			if e.ClockSkew {
				skewed = true
			}
			row := []string{e.Name, fmt.Sprint(e.AffectsReadiness), e.Source, leaseColumn(e.Lease, wide), orNone(e.Holder), renewal, e.State, orNone(e.Reason)}
			if wide {
				d, rt := "<none>", "<none>"
				if e.LeaseDurationSeconds > 0 {
					d = (time.Duration(e.LeaseDurationSeconds) * time.Second).String()
				}
				if e.RenewTime != nil {
					rt = e.RenewTime.UTC().Format(time.RFC3339)
				}
				row = append(row, d, rt, orNone(e.Message))
			}
			tw.row(row...)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	if skewed {
		fmt.Fprintln(w, "\n* renewTime is ahead of this machine's clock: the extension's node, the API server or this machine has a wrong clock.")
		fmt.Fprintln(w, "  States here are estimated from renewTime; the controller judges by when it observed each renewal (see the node's condition).")
	}
	return nil
}

func gateSummary(n NodeStatus, taintKey string) string {
	var s string
	if n.Gated {
		effects := make([]string, 0, len(n.TaintEffects))
		for _, e := range n.TaintEffects {
			effects = append(effects, string(e))
		}
		s = fmt.Sprintf("gated (taint %s:%s)", taintKey, strings.Join(effects, ","))
	} else {
		s = "not gated"
	}
	if n.Excluded {
		s += ", excluded (nodehealth.io/exclude=true)"
	}
	return s
}

func conditionSummary(c *Condition) string {
	if c == nil {
		return "no SystemExtensionsReady condition"
	}
	s := "SystemExtensionsReady=" + string(c.Status)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

// leaseColumn shortens "namespace/name" to the name in the table: every Lease
// of a list lives in the one extension namespace (the codec enforces it).
func leaseColumn(ref string, wide bool) string {
	if wide {
		return ref
	}
	if _, name, ok := strings.Cut(ref, "/"); ok {
		return name
	}
	return ref
}

func lastRenewal(e ExtensionStatus) string {
	switch {
	case e.State == StateLeaseMissing:
		return "<none>"
	case e.LastRenewalSeconds == nil:
		return "<never>"
	case e.ClockSkew:
		return "-" + duration.HumanDuration(time.Duration(-*e.LastRenewalSeconds)*time.Second) + "*"
	default:
		return duration.HumanDuration(time.Duration(*e.LastRenewalSeconds) * time.Second)
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// taintString formats a taint as key:effect.
func taintString(key string, effect corev1.TaintEffect) string {
	return key + ":" + string(effect)
}
