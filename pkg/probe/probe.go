// Package probe implements the local health checks of extension-heartbeat:
// http and https (status 200-399, like the kubelet), tcp, grpc
// (grpc.health.v1) and file (a file whose modification time must be recent).
// Each probe is a func(ctx) error whose error says what failed, because that
// text becomes the nodehealth.io/message of a released Lease and, through
// the controller, the message of the node's condition.
//
// The package takes plain values (Spec), not the configuration API: the
// sidecar converts its configuration, so that a per-node binary links no
// more than it runs.
package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Func checks once; nil means healthy. It must honour ctx's deadline.
type Func func(ctx context.Context) error

// maxBody is how much of a response body is read: enough for a body match and
// an error message, never a whole download.
const maxBody = 10 << 10

// Spec selects one probe: exactly one of its fields is set.
type Spec struct {
	HTTP *HTTPOptions
	TCP  *TCPOptions
	GRPC *GRPCOptions
	File *FileOptions
}

// TCPOptions configure a tcp probe.
type TCPOptions struct {
	// Address is host:port.
	Address string
}

// GRPCOptions configure a grpc probe.
type GRPCOptions struct {
	// Address is host:port of a plaintext gRPC server.
	Address string
	// Service is the name asked about; empty asks for the server's overall
	// health.
	Service string
}

// FileOptions configure a file probe.
type FileOptions struct {
	Path string
	// MaxAge is how long ago the file may have been modified at most.
	MaxAge time.Duration
	// Clock is injected by tests; default the real clock.
	Clock clock.PassiveClock
}

// ErrGRPCNotBuiltIn is New's error for a grpc probe in a build with the
// nogrpcprobe tag (GRPCBuiltIn false).
var ErrGRPCNotBuiltIn = errors.New("this build has no grpc probe (nogrpcprobe build tag); use the full build, extension-heartbeat-grpc")

// New returns the probe s describes.
func New(s Spec) (Func, error) {
	switch {
	case s.HTTP != nil:
		return HTTP(*s.HTTP)
	case s.TCP != nil:
		return TCP(s.TCP.Address), nil
	case s.GRPC != nil:
		if !GRPCBuiltIn {
			return nil, fmt.Errorf("grpc probe of %s: %w", s.GRPC.Address, ErrGRPCNotBuiltIn)
		}
		return GRPC(s.GRPC.Address, s.GRPC.Service), nil
	case s.File != nil:
		clk := s.File.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		return File(s.File.Path, s.File.MaxAge, clk), nil
	}
	return nil, errors.New("no probe configured: set one of http, tcp, grpc and file")
}

// String names the probe in one line, for logs.
func (s Spec) String() string {
	switch {
	case s.HTTP != nil:
		return "http " + s.HTTP.URL
	case s.TCP != nil:
		return "tcp " + s.TCP.Address
	case s.GRPC != nil:
		d := "grpc " + s.GRPC.Address
		if s.GRPC.Service != "" {
			d += " service " + s.GRPC.Service
		}
		return d
	case s.File != nil:
		return fmt.Sprintf("file %s (max age %s)", s.File.Path, s.File.MaxAge)
	}
	return "none"
}

// HTTPOptions configure an http or https probe.
type HTTPOptions struct {
	// URL is the absolute http:// or https:// URL to GET.
	URL string
	// CAFile is a PEM bundle that verifies an https server instead of the
	// system roots.
	CAFile string
	// InsecureSkipTLSVerify skips the verification of the server certificate.
	InsecureSkipTLSVerify bool
	// BodyContains, when set, must occur in the first 10 KiB of the body.
	BodyContains string
}

// HTTP returns a probe that GETs o.URL and succeeds on a status from 200 to
// 399. Redirects are not followed (a 3xx is a success, as for the kubelet's
// probes of a redirecting endpoint), no proxy is used, and every probe opens
// a new connection, so a dead server is never hidden behind a kept-alive one.
func HTTP(o HTTPOptions) (Func, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipTLSVerify} // insecureSkipTLSVerify is an explicit, documented option
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("probe caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("probe caFile %s holds no PEM certificate", o.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	client := &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			TLSClientConfig:   tlsConfig,
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "nodehealth-extension-heartbeat")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", o.URL, unwrapURLError(err))
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s%s", o.URL, resp.Status, excerpt(body))
		}
		if o.BodyContains != "" && !strings.Contains(string(body), o.BodyContains) {
			return fmt.Errorf("GET %s: %s, but the body does not contain %q%s", o.URL, resp.Status, o.BodyContains, excerpt(body))
		}
		return nil
	}, nil
}

// unwrapURLError drops the *url.Error wrapper, which repeats the method and
// URL the caller already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func excerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return ": " + strings.Join(strings.Fields(s), " ")
}

// TCP returns a probe that succeeds when a TCP connection to address opens.
func TCP(address string) Func {
	return func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", address)
		if err != nil {
			return fmt.Errorf("tcp %s: %w", address, err)
		}
		return conn.Close()
	}
}

// File returns a probe that succeeds when path exists and was modified at
// most maxAge ago: the liveness signal of device plugins and agents that
// touch a file instead of serving an endpoint.
func File(path string, maxAge time.Duration, clk clock.PassiveClock) Func {
	return func(context.Context) error {
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("file %s: %w", path, err)
		}
		if age := clk.Since(st.ModTime()); age > maxAge {
			return fmt.Errorf("file %s was last modified %s ago, more than the maximum age %s", path, age.Round(time.Second), maxAge)
		}
		return nil
	}
}
