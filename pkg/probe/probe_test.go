package probe

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func check(t *testing.T, name string, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Errorf("%s: error %v, want one containing %q", name, err, wantErr)
	}
}

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte("ok"))
		case "/redirect":
			http.Redirect(w, r, "http://203.0.113.1/elsewhere", http.StatusFound)
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		default:
			http.Error(w, "proxy is not synced\nsecond line", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)

	for name, tc := range map[string]struct {
		opts    HTTPOptions
		timeout time.Duration
		wantErr string
	}{
		"200":                {opts: HTTPOptions{URL: srv.URL + "/ok"}},
		"302 not followed":   {opts: HTTPOptions{URL: srv.URL + "/redirect"}},
		"503 with body":      {opts: HTTPOptions{URL: srv.URL + "/down"}, wantErr: "503 Service Unavailable: proxy is not synced second line"},
		"body matches":       {opts: HTTPOptions{URL: srv.URL + "/ok", BodyContains: "ok"}},
		"body does not":      {opts: HTTPOptions{URL: srv.URL + "/ok", BodyContains: "SERVING"}, wantErr: `does not contain "SERVING"`},
		"timeout":            {opts: HTTPOptions{URL: srv.URL + "/slow"}, timeout: 20 * time.Millisecond, wantErr: "context deadline exceeded"},
		"connection refused": {opts: HTTPOptions{URL: "http://" + closedAddress(t) + "/ok"}, wantErr: "connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := HTTP(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c := ctx(t)
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				c, cancel = context.WithTimeout(c, tc.timeout)
				defer cancel()
			}
			err = p(c)
			check(t, name, err, tc.wantErr)
			if err != nil && strings.Count(err.Error(), srv.URL) > 1 {
				t.Errorf("URL repeated: %v", err)
			}
		})
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	p, _ := HTTP(HTTPOptions{URL: srv.URL})
	check(t, "system roots", p(ctx(t)), "certificate")
	p, err := HTTP(HTTPOptions{URL: srv.URL, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "caFile", p(ctx(t)), "")
	p, _ = HTTP(HTTPOptions{URL: srv.URL, InsecureSkipTLSVerify: true})
	check(t, "insecure", p(ctx(t)), "")

	if _, err := HTTP(HTTPOptions{URL: srv.URL, CAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil {
		t.Error("missing caFile accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	_ = os.WriteFile(empty, []byte("not pem"), 0o600)
	if _, err := HTTP(HTTPOptions{URL: srv.URL, CAFile: empty}); err == nil {
		t.Error("caFile without certificates accepted")
	}
}

func closedAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	check(t, "open", TCP(l.Addr().String())(ctx(t)), "")
	check(t, "closed", TCP(closedAddress(t))(ctx(t)), "connection refused")
}

func TestTheFileProbeFailsOnAMissingOrStaleFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	clk := testingclock.NewFakePassiveClock(time.Now())
	p := File(path, time.Minute, clk)
	check(t, "missing", p(ctx(t)), "no such file")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Now()
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(mtime.Add(30 * time.Second))
	check(t, "fresh", p(ctx(t)), "")
	clk.SetTime(mtime.Add(2 * time.Minute))
	check(t, "stale", p(ctx(t)), "last modified 2m0s ago, more than the maximum age 1m0s")
}

func TestNewAndDescribe(t *testing.T) {
	for want, cfg := range map[string]Spec{
		"http http://127.0.0.1:10256/healthz": {HTTP: &HTTPOptions{URL: "http://127.0.0.1:10256/healthz"}},
		"tcp 127.0.0.1:9099":                  {TCP: &TCPOptions{Address: "127.0.0.1:9099"}},
		"grpc 127.0.0.1:9808 service csi":     {GRPC: &GRPCOptions{Address: "127.0.0.1:9808", Service: "csi"}},
		"file /x (max age 1m0s)":              {File: &FileOptions{Path: "/x", MaxAge: time.Minute}},
	} {
		if got := cfg.String(); got != want {
			t.Errorf("String = %q, want %q", got, want)
		}
		if cfg.GRPC != nil && !GRPCBuiltIn {
			continue // nogrpc_test.go
		}
		if p, err := New(cfg); err != nil || p == nil {
			t.Errorf("New(%s): %v", want, err)
		}
	}
	if _, err := New(Spec{}); err == nil {
		t.Error("New without a probe kind succeeded")
	}
}
