// Package probe implements the local health checks of extension-heartbeat:
// http and https (status 200-399, like the kubelet), tcp, grpc
// (grpc.health.v1) and file (a file whose modification time must be recent).
// Each probe is a func(ctx) error whose error says what failed, because that
// text becomes the nodehealth.io/message of a released Lease and, through
// the controller, the message of the node's condition.
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/utils/clock"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
)

// Func checks once; nil means healthy. It must honour ctx's deadline.
type Func func(ctx context.Context) error

// maxBody is how much of a response body is read: enough for a body match and
// an error message, never a whole download.
const maxBody = 10 << 10

// New returns the probe a validated ProbeConfiguration describes.
func New(cfg config.ProbeConfiguration) (Func, error) {
	switch {
	case cfg.HTTP != nil:
		return HTTP(HTTPOptions{URL: cfg.HTTP.URL, CAFile: cfg.HTTP.CAFile, InsecureSkipTLSVerify: cfg.HTTP.InsecureSkipTLSVerify})
	case cfg.TCP != nil:
		return TCP(cfg.TCP.Address), nil
	case cfg.GRPC != nil:
		return GRPC(cfg.GRPC.Address, cfg.GRPC.Service), nil
	case cfg.File != nil:
		return File(cfg.File.Path, cfg.File.MaxAge.Duration, clock.RealClock{}), nil
	}
	return nil, errors.New("no probe configured: set one of http, tcp, grpc and file")
}

// Describe names a probe configuration in one line, for logs.
func Describe(cfg config.ProbeConfiguration) string {
	switch {
	case cfg.HTTP != nil:
		return "http " + cfg.HTTP.URL
	case cfg.TCP != nil:
		return "tcp " + cfg.TCP.Address
	case cfg.GRPC != nil:
		s := "grpc " + cfg.GRPC.Address
		if cfg.GRPC.Service != "" {
			s += " service " + cfg.GRPC.Service
		}
		return s
	case cfg.File != nil:
		return fmt.Sprintf("file %s (max age %s)", cfg.File.Path, cfg.File.MaxAge.Duration)
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

// GRPC returns a probe that calls grpc.health.v1.Health/Check on a plaintext
// server and succeeds when it answers SERVING. Like the kubelet's gRPC probe
// it opens a new connection per probe.
func GRPC(address, service string) Func {
	name := "grpc " + address
	if service != "" {
		name += " service " + service
	}
	return func(ctx context.Context) error {
		conn, err := grpc.NewClient("passthrough:///"+address,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUserAgent("nodehealth-extension-heartbeat"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s: status %s", name, s)
		}
		return nil
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
