// Package alertmanager asks an Alertmanager which alerts fire, through its
// v2 HTTP API (GET /api/v2/alerts), with net/http and encoding/json only:
// the update operator's alerts gate needs one read, and Alertmanager's own
// Go client would bring its dependency graph into every binary.
package alertmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Matcher is one of Alertmanager's label matchers: Name=Value, Name!=Value
// (IsEqual false), Name=~Value or Name!~Value (IsRegex).
type Matcher struct {
	Name    string
	Value   string
	IsRegex bool
	IsEqual bool
}

// String is the matcher in Alertmanager's matcher syntax, its value quoted
// the way Alertmanager's parser unquotes it (Go's quoting).
func (m Matcher) String() string {
	op := "="
	switch {
	case m.IsRegex && m.IsEqual:
		op = "=~"
	case m.IsRegex:
		op = "!~"
	case !m.IsEqual:
		op = "!="
	}
	return m.Name + op + strconv.Quote(m.Value)
}

// Alert is a firing alert as the API lists it.
type Alert struct {
	Fingerprint string
	Labels      map[string]string
	StartsAt    time.Time
}

// Name is the alert's alertname label, or its fingerprint without one.
func (a Alert) Name() string {
	if n := a.Labels["alertname"]; n != "" {
		return n
	}
	return a.Fingerprint
}

// Options say where an Alertmanager is and how to reach it.
type Options struct {
	// URL is its base URL; /api/v2/alerts is appended to its path.
	URL string
	// CAFile is a PEM bundle an https server's certificate is checked
	// against ("": the system's roots).
	CAFile string
	// BearerTokenFile is read at every query, so a rotated token is taken
	// without a restart ("": no Authorization header).
	BearerTokenFile string
	// Timeout bounds one query.
	Timeout time.Duration
}

// Client queries one Alertmanager.
type Client struct {
	base      *url.URL
	http      *http.Client
	tokenFile string
}

// New checks the options and builds the client; it sends nothing.
func New(o Options) (*Client, error) {
	base, err := url.Parse(o.URL)
	if err != nil {
		return nil, err
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL with a host", o.URL)
	}
	if o.Timeout <= 0 {
		return nil, errors.New("the timeout must be positive")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile: %s holds no PEM certificate", o.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// Read at every query, but once here too: a token file that is not
	// there (a Secret not mounted, a typo) stops the operator at its start
	// rather than holding every rollout as GateUnavailable.
	if o.BearerTokenFile != "" {
		if _, err := readToken(o.BearerTokenFile); err != nil {
			return nil, err
		}
	}
	return &Client{base: base, http: &http.Client{Transport: transport, Timeout: o.Timeout}, tokenFile: o.BearerTokenFile}, nil
}

// apiAlert is what the API returns of an alert (gettableAlert), the fields
// the gate reads.
type apiAlert struct {
	Fingerprint string            `json:"fingerprint"`
	Labels      map[string]string `json:"labels"`
	StartsAt    time.Time         `json:"startsAt"`
	Status      struct {
		State       string   `json:"state"`
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// maxResponse bounds what one answer may hold: an Alertmanager with tens
// of thousands of matching alerts still fits, a runaway one does not
// exhaust the operator's memory.
const maxResponse = 32 << 20

// Firing returns the alerts that match every matcher and fire: active,
// neither silenced nor inhibited, sorted by name and fingerprint. The
// server filters them; they are checked here again, so that a proxy or an
// Alertmanager that ignores a parameter cannot make the gate pass.
func (c *Client) Firing(ctx context.Context, matchers []Matcher) ([]Alert, error) {
	check, err := compile(matchers)
	if err != nil {
		return nil, err
	}
	req, err := c.request(ctx, matchers)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s: %s", req.URL.Redacted(), resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	if len(body) > maxResponse {
		return nil, fmt.Errorf("%s answered more than %d bytes", req.URL.Redacted(), maxResponse)
	}
	var list []apiAlert
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decoding the answer of %s: %w", req.URL.Redacted(), err)
	}
	return firing(list, check), nil
}

// request is the GET of the matching active alerts.
func (c *Client) request(ctx context.Context, matchers []Matcher) (*http.Request, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v2/alerts"
	q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}, "unprocessed": {"false"}}
	for _, m := range matchers {
		q.Add("filter", m.String())
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.tokenFile != "" {
		token, err := readToken(c.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// readToken reads the bearer token, whitespace trimmed; an empty file is
// an error, as a header without a token would only be refused.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("bearerTokenFile: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("bearerTokenFile: %s is empty", path)
	}
	return token, nil
}

// firing keeps the active, unsilenced, uninhibited alerts the matchers
// match, in order.
func firing(list []apiAlert, check func(map[string]string) bool) []Alert {
	var out []Alert
	for _, a := range list {
		if a.Status.State != "active" || len(a.Status.SilencedBy) > 0 || len(a.Status.InhibitedBy) > 0 || !check(a.Labels) {
			continue
		}
		out = append(out, Alert{Fingerprint: a.Fingerprint, Labels: a.Labels, StartsAt: a.StartsAt})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name() != out[j].Name() {
			return out[i].Name() < out[j].Name()
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out
}

// compile turns the matchers into one check of a label set, with
// Alertmanager's semantics: a regular expression is anchored at both ends,
// and a missing label has the empty value.
func compile(matchers []Matcher) (func(map[string]string) bool, error) {
	type check struct {
		m  Matcher
		re *regexp.Regexp
	}
	checks := make([]check, 0, len(matchers))
	for _, m := range matchers {
		ch := check{m: m}
		if m.IsRegex {
			re, err := regexp.Compile("^(?:" + m.Value + ")$")
			if err != nil {
				return nil, fmt.Errorf("matcher %s: %w", m, err)
			}
			ch.re = re
		}
		checks = append(checks, ch)
	}
	return func(labels map[string]string) bool {
		for _, ch := range checks {
			v := labels[ch.m.Name]
			match := v == ch.m.Value
			if ch.re != nil {
				match = ch.re.MatchString(v)
			}
			if match != ch.m.IsEqual {
				return false
			}
		}
		return true
	}, nil
}
