package alertmanager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestTheQueryAsksForFiringAlertsWithTheMatchersAndKeepsOnlyThoseThatFire(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		// What a proxy that ignores the filter could answer: only the
		// first alert matches and fires.
		_, _ = w.Write([]byte(`[
 {"fingerprint":"b","labels":{"alertname":"DiskFull","severity":"critical","node":"n1"},"startsAt":"2026-11-29T05:00:00Z","status":{"state":"active","silencedBy":[],"inhibitedBy":[]}},
 {"fingerprint":"c","labels":{"alertname":"DiskFull","severity":"critical"},"status":{"state":"suppressed","silencedBy":["s"],"inhibitedBy":[]}},
 {"fingerprint":"d","labels":{"alertname":"DiskFull","severity":"info"},"status":{"state":"active"}},
 {"fingerprint":"e","labels":{"alertname":"Other","severity":"critical"},"status":{"state":"active"}}
]`))
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL + "/am/", BearerTokenFile: token, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := c.Firing(context.Background(), []Matcher{
		{Name: "alertname", Value: "Disk.*", IsRegex: true, IsEqual: true},
		{Name: "severity", Value: "info", IsEqual: false},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || alerts[0].Fingerprint != "b" || alerts[0].Name() != "DiskFull" {
		t.Errorf("firing alerts: got %+v, want only b", alerts)
	}
	if got.URL.Path != "/am/api/v2/alerts" {
		t.Errorf("path: got %s", got.URL.Path)
	}
	q := got.URL.Query()
	for k, v := range map[string]string{"active": "true", "silenced": "false", "inhibited": "false"} {
		if q.Get(k) != v {
			t.Errorf("query %s: got %q, want %q", k, q.Get(k), v)
		}
	}
	if want := []string{`alertname=~"Disk.*"`, `severity!="info"`}; !reflect.DeepEqual(q["filter"], want) {
		t.Errorf("filter: got %q, want %q", q["filter"], want)
	}
	if a := got.Header.Get("Authorization"); a != "Bearer s3cret" {
		t.Errorf("Authorization: got %q", a)
	}
}

func TestAnAnswerOtherThanOKIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad matcher", http.StatusBadRequest)
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Firing(context.Background(), []Matcher{{Name: "a", Value: "b", IsEqual: true}}); err == nil {
		t.Error("a 400 answer was taken for no alert firing")
	}
}

func TestAMatcherValueIsQuotedTheWayAlertmanagerUnquotesIt(t *testing.T) {
	for m, want := range map[Matcher]string{
		{Name: "a", Value: `x"y\z`, IsEqual: true}: `a="x\"y\\z"`,
		{Name: "a", Value: "b", IsRegex: true}:     `a!~"b"`,
		{Name: "a", Value: "", IsEqual: false}:     `a!=""`,
		{Name: "a", Value: "é,}", IsEqual: true}:   `a="é,}"`,
	} {
		if got := m.String(); got != want {
			t.Errorf("%+v: got %s, want %s", m, got, want)
		}
	}
}
