package app

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/loader"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
	"nodehealth.io/nodehealth/pkg/updater/alertmanager"
)

// loadConfig writes files into a folder of their own, the configuration
// among them, and loads it the way the binary does: relative paths are
// the configuration file's neighbours.
func loadConfig(t *testing.T, files map[string]string, configYAML string) *config.UpdateOperatorConfiguration {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "update-operator.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: config.nodehealth.io/v1alpha1\nkind: UpdateOperatorConfiguration\n"+configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c := options.UpdateOperator()
	cfg, _, err := loader.LoadFile(c.Kind, path)
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Validate(cfg); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return cfg
}

// alertmanagerTLS is an https Alertmanager that answers one firing alert
// to a query carrying the bearer token, and 401 to any other; its CA
// certificate in PEM.
func alertmanagerTLS(t *testing.T, token string) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `[{"fingerprint":"f1","labels":{"alertname":"DiskFull","severity":"critical"},"status":{"state":"active"}}]`)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, string(ca)
}

var critical = []alertmanager.Matcher{{Name: "severity", Value: "critical", IsEqual: true}}

// TestAnAlertSourceOfTheConfigurationSendsItsTokenAndTrustsItsCA: from the
// configuration file to a query, the source trusts the server through
// caFile and authenticates with bearerTokenFile, both relative to the
// file; without the CA the same server is not trusted, and a source
// without the token is refused.
func TestAnAlertSourceOfTheConfigurationSendsItsTokenAndTrustsItsCA(t *testing.T) {
	srv, ca := alertmanagerTLS(t, "s3cret")
	cfg := loadConfig(t, map[string]string{"ca.pem": ca, "token": "s3cret\n"}, fmt.Sprintf(`alertSources:
- name: prod
  url: %[1]s
  caFile: ca.pem
  bearerTokenFile: token
- name: system-roots
  url: %[1]s
  bearerTokenFile: token
- name: no-token
  url: %[1]s
  caFile: ca.pem
`, srv.URL))
	opts, err := updaterOptions(cfg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alerts, err := opts.AlertSources["prod"].Firing(ctx, critical)
	if err != nil {
		t.Fatalf("prod: %v", err)
	}
	if len(alerts) != 1 || alerts[0].Name() != "DiskFull" {
		t.Errorf("prod answered %v, want DiskFull", alerts)
	}
	if _, err := opts.AlertSources["system-roots"].Firing(ctx, critical); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without caFile: %v, want a certificate error", err)
	}
	if _, err := opts.AlertSources["no-token"].Firing(ctx, critical); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without bearerTokenFile: %v, want a 401", err)
	}
}

// TestAnAlertSourceWhoseFilesCannotBeReadStopsTheOperatorNamingTheField:
// the operator does not start, and says which source and which field.
func TestAnAlertSourceWhoseFilesCannotBeReadStopsTheOperatorNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		name, files, source, want string
	}{
		{name: "no CA file", source: "caFile: missing.pem", want: "alertSources[0] (prod): caFile: open "},
		{name: "a CA file without a certificate", files: "not a certificate", source: "caFile: file", want: "alertSources[0] (prod): caFile: "},
		{name: "no token file", source: "bearerTokenFile: missing", want: "alertSources[0] (prod): bearerTokenFile: open "},
		{name: "an empty token file", files: "\n", source: "bearerTokenFile: file", want: "alertSources[0] (prod): bearerTokenFile: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.files != "" {
				files["file"] = tc.files
			}
			cfg := loadConfig(t, files, "alertSources:\n- name: prod\n  url: https://alertmanager.example:9093\n  "+tc.source+"\n")
			_, err := updaterOptions(cfg, "n1")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}
