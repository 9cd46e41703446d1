package window

import (
	"errors"
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

func TestState(t *testing.T) {
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

func TestOverlappingWindows(t *testing.T) {
	s, err := Parse(Spec{Schedule: "0 2 * * *", Duration: 2 * time.Hour}, Spec{Schedule: "0 3 * * *", Duration: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	open, next := s.State(at("2026-01-01T03:30:00Z"))
	if !open || !next.Equal(at("2026-01-01T05:00:00Z")) {
		t.Errorf("open=%v next=%v, want open until 05:00", open, next)
	}
}

func TestParseSchedule(t *testing.T) {
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
