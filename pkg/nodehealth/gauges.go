package nodehealth

// This file holds each node's contribution to the gauges (gated nodes by
// reason, the longest gate).

import (
	"slices"
	"sort"
)

// updateContribution moves a node's share of the gauges. Callers hold c.mu.
func (c *Controller) updateContribution(node string, next contribution) {
	prev := c.contributions[node]
	if prev.reason != "" {
		c.metrics.GatedNodes.WithLabelValues(string(prev.reason)).Dec()
	}
	for _, e := range prev.notReady {
		c.metrics.notReadySeries.dec(e)
	}
	if prev.invalid {
		c.metrics.InvalidLists.Dec()
	}
	if prev.tracked {
		c.metrics.TrackedNodes.Dec()
	}
	if prev.leaving {
		c.metrics.LeavingNodes.Dec()
	}
	if next.reason != "" {
		c.metrics.GatedNodes.WithLabelValues(string(next.reason)).Inc()
		next.gatedSince = prev.gatedSince
		if prev.reason == "" {
			next.gatedSince = c.clock.Now()
		}
	}
	// notReady becomes the label values the node is counted under, so that
	// the next update takes it from the same series.
	series := make([]string, 0, len(next.notReady))
	for _, e := range next.notReady {
		l := c.metrics.notReadySeries.label(e)
		if !slices.Contains(series, l) {
			series = append(series, l)
			c.metrics.notReadySeries.inc(l)
		}
	}
	next.notReady = series
	if next.invalid {
		c.metrics.InvalidLists.Inc()
	}
	if next.tracked {
		c.metrics.TrackedNodes.Inc()
	}
	if next.leaving {
		c.metrics.LeavingNodes.Inc()
	}
	if next.reason == "" && len(next.notReady) == 0 && !next.invalid && !next.tracked && !next.leaving {
		delete(c.contributions, node)
		return
	}
	c.contributions[node] = next
}

// longestGates returns, by reason, how long the longest-gated node has been
// gated (nodehealth_longest_gate_seconds).
func (c *Controller) longestGates() map[gateCause]float64 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[gateCause]float64{}
	for _, contrib := range c.contributions {
		if contrib.reason == "" {
			continue
		}
		age := now.Sub(contrib.gatedSince).Seconds()
		if longest, ok := out[contrib.reason]; !ok || age > longest {
			out[contrib.reason] = age
		}
	}
	return out
}

func gateReason(st *nodeState) gateCause {
	if !st.gated {
		return ""
	}
	return st.gate.cause
}

func notReadyNames(statuses []extensionStatus) []string {
	var out []string
	for _, s := range statuses {
		if !s.ready {
			out = append(out, s.name)
		}
	}
	sort.Strings(out)
	return out
}
