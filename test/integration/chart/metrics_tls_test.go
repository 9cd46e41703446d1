package chart_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The controller binary serves the certificate files of
// serving.tlsCertFile, as the chart's cert-manager option mounts them: a
// scraper that trusts only their CA verifies it under the Service's name,
// and after a renewal (a new pair from a new CA written over the files) a
// scraper trusting only the new CA does too, without a restart.
func TestTheMetricsServeACertificateScrapersVerifyAndItsRenewal(t *testing.T) {
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applyRender(t, ctx, filepath.Join(root, defaultRender), false)
	cfg := renderedConfig(t, ctx)
	const serverName = "nodehealth-controller-metrics.nodehealth-system.svc"
	dir := t.TempDir()
	writePair := func() *x509.CertPool {
		t.Helper()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(serverName, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Key first, as a renewal that lands half-way would not.
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certPEM)
		return pool
	}
	first := writePair()
	addrs := testenv.FreeLoopbackAddresses(t, 2)
	p := startControllerServing(t, ctx, cfg, map[string]any{
		"metricsBindAddress": addrs[0], "healthzBindAddress": addrs[1], "metricsAuthentication": "Delegated",
		"tlsCertFile": filepath.Join(dir, "tls.crt"), "tlsPrivateKeyFile": filepath.Join(dir, "tls.key"),
	})
	// A verified scrape without a token: the TLS handshake must pass and
	// the component answers 401.
	verifiedBy := func(pool *x509.CertPool) (int, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addrs[0]+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, err := verifiedBy(first)
		lastErr = err
		return err == nil && code == http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("a scraper trusting the certificate's CA: %v\n%s", lastErr, p.LogTail(30))
	}

	second := writePair()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, err := verifiedBy(second)
		lastErr = err
		return err == nil && code == http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("the renewed certificate is not served: %v\n%s", lastErr, p.LogTail(30))
	}
	if _, err := verifiedBy(first); err == nil {
		t.Error("a scraper trusting only the old CA still verifies the renewed certificate")
	}
}
