// Package window evaluates update windows: cron schedules that open a window
// for a duration, in an IANA time zone. The update controller parses
// schedules here, with the parser the Kubernetes CronJob controller uses
// (github.com/robfig/cron/v3, standard 5-field syntax), so a schedule that
// validates is exactly one that the controller can evaluate.
//
// The package embeds the time zone database (time/tzdata): the images have
// no zoneinfo, and a window in Europe/Berlin must open at the same instant
// in the image as on a developer's machine.
package window

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the images have no zoneinfo

	"github.com/robfig/cron/v3"
)

// ErrUnknownTimeZone is wrapped by Parse for a time zone name the embedded
// database does not know.
var ErrUnknownTimeZone = errors.New("unknown time zone")

// ParseSchedule parses a standard 5-field cron expression or a descriptor
// such as @daily. The time zone is a window's own field, so a time zone
// prefix (TZ=..., CRON_TZ=...) is refused rather than silently honoured;
// @every is refused too: it names no instant (its Next is "now plus the
// delay"), so a window built on it would be never or always open.
func ParseSchedule(s string) (cron.Schedule, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, fmt.Errorf("a time zone prefix is not supported: set the window's timeZone")
	}
	if strings.HasPrefix(t, "@every") {
		return nil, fmt.Errorf("@every is not a schedule of instants: use a 5-field cron expression or @hourly, @daily, @weekly, @monthly")
	}
	// The trimmed string: the CRD's CEL rules trim before they look at the
	// prefix, and robfig/cron recognises a descriptor only at the very
	// start (" @daily" would be refused as a cron line of one field).
	sched, err := cron.ParseStandard(t)
	if err != nil {
		return nil, err
	}
	if _, ok := sched.(*cron.SpecSchedule); !ok {
		return nil, fmt.Errorf("not a schedule of instants")
	}
	return sched, nil
}

// LoadLocation resolves an IANA time zone name; "" is UTC.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	// time.LoadLocation also accepts "Local", the process's zone: a
	// window must mean the same instant on every replica.
	if name == "Local" {
		return nil, fmt.Errorf("%w %q", ErrUnknownTimeZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownTimeZone, name)
	}
	return loc, nil
}

// Window opens each time Schedule fires, in Location, and stays open for
// Duration.
type Window struct {
	Schedule cron.Schedule
	Duration time.Duration
	// Location is the time zone Schedule is evaluated in; nil is UTC.
	Location *time.Location
}

// Spec is a window as written in an UpdatePolicy.
type Spec struct {
	Schedule string
	Duration time.Duration
	TimeZone string
}

// Parse builds a Set from window specs.
func Parse(specs ...Spec) (Set, error) {
	out := make(Set, 0, len(specs))
	for i, w := range specs {
		sched, err := ParseSchedule(w.Schedule)
		if err != nil {
			return nil, fmt.Errorf("update window %d schedule %q: %w", i, w.Schedule, err)
		}
		if w.Duration <= 0 {
			return nil, fmt.Errorf("update window %d: duration must be positive", i)
		}
		if w.Duration > MaxDuration {
			return nil, fmt.Errorf("update window %d: duration %s must be at most %s", i, w.Duration, MaxDuration)
		}
		loc, err := LoadLocation(w.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("update window %d: %w", i, err)
		}
		if gap := shortestGap(w, sched, loc); w.Duration > gap {
			return nil, fmt.Errorf("update window %d: duration %s is longer than the %s between its starts (schedule %q): it would open again while still open",
				i, w.Duration, gap, w.Schedule)
		}
		out = append(out, Window{Schedule: sched, Duration: w.Duration, Location: loc})
	}
	return out, nil
}

// MaxDuration bounds a window's duration, as the UpdatePolicy CRD does.
const MaxDuration = 7 * 24 * time.Hour

// A window longer than the gap between two of its starts would overlap
// itself: the state check (lastStart) steps through every start that could
// still be open, duration/gap of them, on every pass. shortestGap finds the
// gap from the starts of gapHorizon (leap years and the weekdays of month
// days included), at most gapStarts of them: a schedule firing that often
// repeats its pattern within them.
const (
	gapHorizon = 4 * 366 * 24 * time.Hour
	gapStarts  = 1000
)

// gapRef is where the scan starts: a fixed instant, so that a policy is
// judged the same on every replica and every day.
var gapRef = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// gaps caches shortestGap: policies are parsed on every sync and start
// pass, and scanning a schedule takes up to gapStarts steps.
var gaps = struct {
	sync.Mutex
	m map[Spec]time.Duration
}{m: map[Spec]time.Duration{}}

// shortestGap is the shortest time between two consecutive starts of
// sched in loc (outside clock changes), stopping early once one is shorter than w.Duration; at
// most the horizon when it starts once or never.
func shortestGap(w Spec, sched cron.Schedule, loc *time.Location) time.Duration {
	gaps.Lock()
	g, ok := gaps.m[w]
	gaps.Unlock()
	if ok {
		return g
	}
	g = gapHorizon
	end := gapRef.Add(gapHorizon)
	prev := sched.Next(gapRef.In(loc))
	for n := 0; n < gapStarts && !prev.IsZero() && prev.Before(end); n++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		// A gap across a clock change does not count: on the night the
		// clocks go back, a daily 02:30 starts twice an hour apart (as
		// CronJobs do), which costs one more step once a year.
		_, po := prev.Zone()
		_, no := next.Zone()
		if d := next.Sub(prev); po == no && d < g {
			g = d
			if g < w.Duration {
				break
			}
		}
		prev = next
	}
	gaps.Lock()
	if len(gaps.m) >= 4096 { // edits add keys; bound what they leave behind
		gaps.m = map[Spec]time.Duration{}
	}
	gaps.m[w] = g
	gaps.Unlock()
	return g
}

// Set is the union of windows; an empty Set is always open.
type Set []Window

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
		loc := w.Location
		if loc == nil {
			loc = time.UTC
		}
		// The parsed schedules carry time.Local, which makes Next work in
		// the location of the time it is given (robfig/cron): the window's
		// own zone, whatever the process's.
		now := now.In(loc)
		if start, ok := w.lastStart(now); ok {
			if end := start.Add(w.Duration).UTC(); end.After(now) {
				open = true
				if end.After(closes) {
					closes = end
				}
			}
		}
		if n := w.Schedule.Next(now).UTC(); !n.IsZero() && (opens.IsZero() || n.Before(opens)) {
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
