// Package window evaluates update windows: cron schedules that open a window
// for a duration. Configuration validation and the update controller both
// parse schedules here, with the parser the Kubernetes CronJob controller uses
// (github.com/robfig/cron/v3, standard 5-field syntax), so a schedule that
// validates is exactly one that the controller can evaluate.
package window

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses a standard 5-field cron expression or a descriptor
// such as @daily. Windows are evaluated in UTC, so a time zone prefix
// (TZ=..., CRON_TZ=...) is refused rather than silently honoured.
func ParseSchedule(s string) (cron.Schedule, error) {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, fmt.Errorf("time zones are not supported: windows are evaluated in UTC")
	}
	return cron.ParseStandard(s)
}

// Window opens each time Schedule fires and stays open for Duration.
type Window struct {
	Schedule cron.Schedule
	Duration time.Duration
}

// Set is the union of windows; an empty Set is always open.
type Set []Window

// Parse builds a Set from (schedule, duration) pairs.
func Parse(schedules []string, durations []time.Duration) (Set, error) {
	if len(schedules) != len(durations) {
		return nil, fmt.Errorf("%d schedules but %d durations", len(schedules), len(durations))
	}
	out := make(Set, 0, len(schedules))
	for i, s := range schedules {
		sched, err := ParseSchedule(s)
		if err != nil {
			return nil, fmt.Errorf("update window %d schedule %q: %w", i, s, err)
		}
		if durations[i] <= 0 {
			return nil, fmt.Errorf("update window %d: duration must be positive", i)
		}
		out = append(out, Window{Schedule: sched, Duration: durations[i]})
	}
	return out, nil
}

// State reports whether a window is open at now and when that changes next:
// the time it closes (if open) or the time the next window opens (if
// closed). next is zero when the set is empty (always open).
func (s Set) State(now time.Time) (open bool, next time.Time) {
	if len(s) == 0 {
		return true, time.Time{}
	}
	now = now.UTC()
	var closes, opens time.Time
	for _, w := range s {
		if start, ok := w.lastStart(now); ok {
			if end := start.Add(w.Duration); end.After(now) {
				open = true
				if end.After(closes) {
					closes = end
				}
			}
		}
		if n := w.Schedule.Next(now); !n.IsZero() && (opens.IsZero() || n.Before(opens)) {
			opens = n
		}
	}
	if open {
		// Overlapping windows: the set stays open while any is open; the
		// closing time found here is re-evaluated when it comes.
		return true, closes
	}
	return false, opens
}

// lastStart finds the latest activation at or before now that could still be
// open: the schedule is stepped forward from now-Duration.
func (w Window) lastStart(now time.Time) (time.Time, bool) {
	// Next returns times strictly after its argument (cron has whole-second
	// resolution): starting a second before now-Duration includes every
	// activation whose window can still be open at now.
	t := w.Schedule.Next(now.Add(-w.Duration).Add(-time.Second))
	var last time.Time
	found := false
	for !t.IsZero() && !t.After(now) {
		last, found = t, true
		t = w.Schedule.Next(t)
	}
	return last, found
}
