package delegated

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// writePair writes a self-signed pair for host into dir and returns the
// certificate's PEM.
func writePair(t *testing.T, dir, host string) []byte {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// serve serves 404s over TLS with cfg, as process.Serve does: no
// Certificates, every handshake through GetCertificate.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), TLSConfig: cfg, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String()
}

// served is the host name of the certificate a client is shown.
func served(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0].DNSNames[0]
}

// The operator's pair serves /metrics to a client that verifies it, and a
// renewed pair (cert-manager rewrites the Secret) is served without a
// restart; a renewal that cannot be loaded yet keeps the last good pair and
// is picked up once it can.
func TestTheMetricsCertificateFilesAreServedAndReloadedWhenTheyChange(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "first.example")
	cfg, err := TLSConfig(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(first)
	verified := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "first.example"}}}
	resp, err := verified.Get(serve(t, cfg))
	if err != nil {
		t.Fatalf("a client trusting the certificate file: %v", err)
	}
	resp.Body.Close()

	// The same with a clock the reload checks go by.
	c, err := NewCertificateFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	url := serve(t, &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12})
	if got := served(t, url); got != "first.example" {
		t.Fatalf("served %q, want first.example", got)
	}

	// Half a renewal: the new certificate, the old key.
	certPEM, _, err := certutil.GenerateSelfSignedCertKey("second.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(recheckEvery)
	if got := served(t, url); got != "first.example" {
		t.Fatalf("a certificate without its key: served %q, want the last good first.example", got)
	}

	writePair(t, dir, "third.example")
	now = now.Add(recheckEvery)
	if got := served(t, url); got != "third.example" {
		t.Fatalf("after the renewal: served %q, want third.example", got)
	}
}

// A pair that cannot be read at start is an error naming the file, not a
// self-signed certificate in its place.
func TestAMissingCertificateFileFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	_, err := TLSConfig(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Fatalf("got %v, want an error naming tls.crt", err)
	}
}
