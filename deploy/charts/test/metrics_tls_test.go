package test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// With monitoring.tls.certManager, each component whose metrics are
// Delegated gets a cert-manager Certificate for its metrics Service, serves
// it from the Secret (mounted as a folder, so renewals arrive), and the
// ServiceMonitor verifies it against the Secret's CA instead of skipping
// verification.
func TestCertManagerGivesTheMetricsAVerifiableCertificate(t *testing.T) {
	out, err := render(t, map[string]any{
		"updateOperator": map[string]any{"enabled": true, "config": map[string]any{"serving": map[string]any{"metricsAuthentication": "Delegated"}}},
		"monitoring": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true},
			"tls":            map[string]any{"certManager": map[string]any{"enabled": true, "issuerRef": map[string]any{"name": "metrics-ca", "kind": "ClusterIssuer"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"nodehealth-controller", "update-operator"} {
		t.Run(c, func(t *testing.T) {
			var cert struct {
				Spec struct {
					SecretName string   `json:"secretName"`
					DNSNames   []string `json:"dnsNames"`
					IssuerRef  struct {
						Name, Kind string
					} `json:"issuerRef"`
				} `json:"spec"`
			}
			doc := docOf(out, "kind: Certificate\nmetadata:\n  name: "+c+"-metrics\n")
			if !strings.Contains(doc, "kind: Certificate") {
				t.Fatalf("no Certificate %s-metrics:\n%s", c, doc)
			}
			if err := yaml.Unmarshal([]byte(doc), &cert); err != nil {
				t.Fatal(err)
			}
			if cert.Spec.SecretName != c+"-metrics-tls" || cert.Spec.IssuerRef.Name != "metrics-ca" || cert.Spec.IssuerRef.Kind != "ClusterIssuer" ||
				len(cert.Spec.DNSNames) == 0 || cert.Spec.DNSNames[0] != c+"-metrics.nodehealth-system.svc" {
				t.Errorf("Certificate %+v", cert.Spec)
			}

			config := docOf(out, "name: "+c+"-config")
			for _, want := range []string{"tlsCertFile: /etc/nodehealth-tls/tls.crt", "tlsPrivateKeyFile: /etc/nodehealth-tls/tls.key", "metricsAuthentication: Delegated"} {
				if !strings.Contains(config, want) {
					t.Errorf("the configuration lacks %q:\n%s", want, config)
				}
			}
			deployment := docOf(out, "kind: Deployment\nmetadata:\n  name: "+c+"\n")
			if !strings.Contains(deployment, "secretName: "+c+"-metrics-tls") || !strings.Contains(deployment, "mountPath: /etc/nodehealth-tls") {
				t.Errorf("the Deployment does not mount the certificate's Secret:\n%s", deployment)
			}

			monitor := docOf(out, "kind: ServiceMonitor\nmetadata:\n  name: "+c+"\n")
			if strings.Contains(monitor, "insecureSkipVerify") || !strings.Contains(monitor, "name: "+c+"-metrics-tls") ||
				!strings.Contains(monitor, "key: ca.crt") || !strings.Contains(monitor, "serverName: "+c+"-metrics.nodehealth-system.svc") {
				t.Errorf("the ServiceMonitor does not verify the certificate:\n%s", monitor)
			}
		})
	}

	// Without cert-manager: the self-signed certificate, not verified,
	// and no Certificate.
	out, err = render(t, map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "kind: Certificate") || strings.Contains(out, "tlsCertFile") {
		t.Error("a Certificate or certificate files without monitoring.tls.certManager")
	}
	if monitor := docOf(out, "kind: ServiceMonitor\nmetadata:\n  name: nodehealth-controller\n"); !strings.Contains(monitor, "insecureSkipVerify: true") {
		t.Errorf("the self-signed certificate's ServiceMonitor:\n%s", monitor)
	}

	// An issuer is required.
	_, err = render(t, map[string]any{"monitoring": map[string]any{"tls": map[string]any{"certManager": map[string]any{"enabled": true}}}})
	if err == nil || !strings.Contains(err.Error(), "issuerRef.name") {
		t.Errorf("cert-manager without an issuer: %v", err)
	}
}

// monitoring.serviceMonitor.authorization replaces the deprecated
// bearerTokenFile with a Secret's token.
func TestTheServiceMonitorCanSendASecretsToken(t *testing.T) {
	out, err := render(t, map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true,
		"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	monitor := docOf(out, "kind: ServiceMonitor\nmetadata:\n  name: nodehealth-controller\n")
	if strings.Contains(monitor, "bearerTokenFile") || !strings.Contains(monitor, "name: prometheus-token") {
		t.Errorf("ServiceMonitor:\n%s", monitor)
	}
}
