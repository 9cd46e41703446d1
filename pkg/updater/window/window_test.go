package window

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func mustSet(t *testing.T, schedule string, d time.Duration) Set {
	t.Helper()
	s, err := Parse(Spec{Schedule: schedule, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestStateSaysWhetherTheWindowsAreOpenAndWhenThatChanges(t *testing.T) {
	nightly := "0 2 * * *" // 02:00 UTC for 2h
	cases := []struct {
		name     string
		set      Set
		now      string
		wantOpen bool
		wantNext string
	}{
		{"empty set always open", nil, "2026-01-01T12:00:00Z", true, ""},
		{"before opening", mustSet(t, nightly, 2*time.Hour), "2026-01-01T01:59:59Z", false, "2026-01-01T02:00:00Z"},
		{"at opening", mustSet(t, nightly, 2*time.Hour), "2026-01-01T02:00:00Z", true, "2026-01-01T04:00:00Z"},
		{"inside", mustSet(t, nightly, 2*time.Hour), "2026-01-01T03:30:00Z", true, "2026-01-01T04:00:00Z"},
		{"last second", mustSet(t, nightly, 2*time.Hour), "2026-01-01T03:59:59Z", true, "2026-01-01T04:00:00Z"},
		{"at closing", mustSet(t, nightly, 2*time.Hour), "2026-01-01T04:00:00Z", false, "2026-01-02T02:00:00Z"},
		{"window across midnight", mustSet(t, "0 23 * * *", 2*time.Hour), "2026-01-02T00:30:00Z", true, "2026-01-02T01:00:00Z"},
		{"non-UTC input", mustSet(t, nightly, 2*time.Hour), "2026-01-01T04:30:00+02:00", true, "2026-01-01T04:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			open, next := tc.set.State(at(tc.now))
			if open != tc.wantOpen {
				t.Errorf("open = %v, want %v", open, tc.wantOpen)
			}
			if tc.wantNext == "" {
				if !next.IsZero() {
					t.Errorf("next = %v, want none", next)
				}
			} else if !next.Equal(at(tc.wantNext)) {
				t.Errorf("next = %v, want %v", next, tc.wantNext)
			}
		})
	}
}

func TestOverlappingWindowsStayOpenUntilTheLastOneCloses(t *testing.T) {
	s, err := Parse(Spec{Schedule: "0 2 * * *", Duration: 2 * time.Hour}, Spec{Schedule: "0 3 * * *", Duration: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	open, next := s.State(at("2026-01-01T03:30:00Z"))
	if !open || !next.Equal(at("2026-01-01T05:00:00Z")) {
		t.Errorf("open=%v next=%v, want open until 05:00", open, next)
	}
}

func TestParseScheduleAcceptsCronAndItsMacrosButRefusesIntervalsTimeZonesAndBadFields(t *testing.T) {
	for _, ok := range []string{"* * * * *", "0 2 * * *", "*/15 0-6 1,15 jan-mar sun", "@daily", "@weekly", "5 4 * * SAT"} {
		if _, err := ParseSchedule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
		"a * * * *", "1-x * * * *", "@sometimes", "TZ=Europe/Berlin 0 2 * * *", "CRON_TZ=UTC 0 2 * * *",
		"@every 1h", " @every 5m"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestAWindowInATimeZoneOpensAtItsLocalTime: 02:00 in Europe/Berlin is 01:00
// UTC in winter and 00:00 UTC in summer; the embedded time zone database
// makes this hold in images without zoneinfo.
func TestAWindowInATimeZoneOpensAtItsLocalTime(t *testing.T) {
	s, err := Parse(Spec{Schedule: "0 2 * * *", Duration: time.Hour, TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		now, next string
		open      bool
	}{
		{"2026-01-15T00:59:59Z", "2026-01-15T01:00:00Z", false},
		{"2026-01-15T01:00:00Z", "2026-01-15T02:00:00Z", true},
		{"2026-01-15T02:00:00Z", "2026-01-16T01:00:00Z", false},
		{"2026-07-15T00:00:00Z", "2026-07-15T01:00:00Z", true},
		{"2026-07-14T23:59:59Z", "2026-07-15T00:00:00Z", false},
	} {
		open, next := s.State(at(tc.now))
		if open != tc.open || !next.Equal(at(tc.next)) || next.Location() != time.UTC {
			t.Errorf("at %s: open=%v next=%v, want open=%v next=%s (UTC)", tc.now, open, next, tc.open, tc.next)
		}
	}
}

// TestAnUnknownTimeZoneIsRefused: CEL cannot check IANA names, so the
// operator does; "Local" would mean another instant on every replica.
func TestAnUnknownTimeZoneIsRefused(t *testing.T) {
	for _, tz := range []string{"Mars/Olympus", "Local", "europe/berlin"} {
		if _, err := Parse(Spec{Schedule: "0 2 * * *", Duration: time.Hour, TimeZone: tz}); !errors.Is(err, ErrUnknownTimeZone) {
			t.Errorf("%q: err = %v, want ErrUnknownTimeZone", tz, err)
		}
	}
	for _, tz := range []string{"", "UTC", "America/New_York", "Asia/Kolkata"} {
		if _, err := Parse(Spec{Schedule: "0 2 * * *", Duration: time.Hour, TimeZone: tz}); err != nil {
			t.Errorf("%q: %v", tz, err)
		}
	}
}

// scheduleRule is a row of testdata/schedule-rules.json: a schedule that is
// valid cron but for its surroundings, and whether it is accepted. The
// UpdatePolicy CRD's CEL rules are tested with the same rows against the
// real API server (test/integration/updates), so that the API and the
// operator never disagree on them.
type scheduleRule struct {
	Schedule string `json:"schedule"`
	Accepted bool   `json:"accepted"`
	What     string `json:"what"`
}

func scheduleRules(t *testing.T) []scheduleRule {
	t.Helper()
	b, err := os.ReadFile("testdata/schedule-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []scheduleRule
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// The parser trims whitespace around a schedule before every rule, as the
// CRD's CEL rules do: " @every 1h" is refused as @every, " @daily" is
// @daily.
func TestTheScheduleRulesIgnoreSurroundingWhitespaceAsTheCRDDoes(t *testing.T) {
	for _, r := range scheduleRules(t) {
		_, err := ParseSchedule(r.Schedule)
		if r.Accepted && err != nil {
			t.Errorf("%s (%q): refused: %v", r.What, r.Schedule, err)
		}
		if !r.Accepted && err == nil {
			t.Errorf("%s (%q): accepted", r.What, r.Schedule)
		}
	}
}

// A window may stay open at most until its schedule's next start and at
// most 7 days: longer, windows of one schedule overlap (a state check then
// steps through every start that could still be open: "* * * * *" for
// 8760h is half a million of them) and the rollout never sees it close.
func TestAWindowLongerThanTheIntervalBetweenItsStartsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		schedule, tz string
		d            time.Duration
		want         string // "" = accepted
	}{
		{"* * * * *", "", 8760 * time.Hour, "at most 168h0m0s"},
		{"* * * * *", "", 2 * time.Minute, "longer than the 1m0s between its starts"},
		{"* * * * *", "", time.Minute, ""},
		{"0 2 * * *", "", 25 * time.Hour, "longer than the 24h0m0s between its starts"},
		{"0 2 * * *", "", 24 * time.Hour, ""},
		// Friday to Monday is 72h, but Monday to Tuesday is 24h.
		{"0 2 * * mon-fri", "", 48 * time.Hour, "longer than the 24h0m0s between its starts"},
		{"0 2 * * mon-fri", "Europe/Berlin", 4 * time.Hour, ""},
		{"0 0 1 * *", "", 7 * 24 * time.Hour, ""},
		{"0 0 1 * *", "", 7*24*time.Hour + time.Second, "at most 168h0m0s"},
		{"@weekly", "", 7 * 24 * time.Hour, ""},
		// An hour is an hour across both clock changes of the year.
		{"0 * * * *", "Europe/Berlin", time.Hour, ""},
		{"30 2 * * *", "Europe/Berlin", 23 * time.Hour, ""},
		// 02:00, 02:30 and 03:00: the smallest gap counts.
		{"0,30 2 * * *", "", 31 * time.Minute, "longer than the 30m0s between its starts"},
	} {
		_, err := Parse(Spec{Schedule: tc.schedule, Duration: tc.d, TimeZone: tc.tz})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q for %s in %q: refused: %v", tc.schedule, tc.d, tc.tz, err)
		case tc.want != "" && err == nil:
			t.Errorf("%q for %s in %q: accepted", tc.schedule, tc.d, tc.tz)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q for %s in %q: %v, want it to say %q", tc.schedule, tc.d, tc.tz, err, tc.want)
		}
	}
}
