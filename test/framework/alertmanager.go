package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// AlertmanagerBinary is the Alertmanager hack/build-alertmanager.sh builds
// (make controlplane) for the alerts gate's tests.
const AlertmanagerBinary = "alertmanager"

// alertmanagerConfig routes every alert to a receiver that sends nothing:
// the tests read alerts through the API only.
const alertmanagerConfig = `route:
  receiver: none
receivers:
- name: none
`

// Alertmanager is an Alertmanager on a loopback port, with its own
// configuration and storage in dir, clustering off.
type Alertmanager struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL  string
	proc *Process
}

// StartAlertmanager starts the binary of binDir and waits until it is
// ready.
func StartAlertmanager(ctx context.Context, binDir, dir string) (*Alertmanager, error) {
	if err := checkBinaries(binDir, AlertmanagerBinary); err != nil {
		return nil, fmt.Errorf("%w (hack/build-alertmanager.sh builds it)", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(alertmanagerConfig), 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	proc, err := startProcess(ProcessSpec{Name: "alertmanager", Path: filepath.Join(binDir, AlertmanagerBinary), Dir: dir, Args: []string{
		"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + hostPort(port),
		"--cluster.listen-address=", "--log.level=warn",
	}}, filepath.Join(dir, "alertmanager.log"))
	if err != nil {
		return nil, err
	}
	am := &Alertmanager{URL: "http://" + hostPort(port), proc: proc}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitUntil(wait, proc, "ready", func(ctx context.Context) error { return am.get(ctx, "/-/ready") }); err != nil {
		_ = proc.Stop(5 * time.Second)
		return nil, err
	}
	return am, nil
}

func (a *Alertmanager) get(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// Fire posts an alert with these labels that fires from now on; Resolve
// posts it again with an end in the past, as Prometheus does when the
// alert's rule stops matching.
func (a *Alertmanager) Fire(ctx context.Context, labels map[string]string) error {
	return a.post(ctx, labels, time.Now().Add(time.Hour))
}

// Resolve ends the alert with these labels.
func (a *Alertmanager) Resolve(ctx context.Context, labels map[string]string) error {
	return a.post(ctx, labels, time.Now().Add(-time.Second))
}

func (a *Alertmanager) post(ctx context.Context, labels map[string]string, endsAt time.Time) error {
	body, err := json.Marshal([]map[string]any{{"labels": labels, "startsAt": time.Now().Add(-time.Minute).UTC(), "endsAt": endsAt.UTC()}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /api/v2/alerts: %s", resp.Status)
	}
	return nil
}

// Stop stops it; its port refuses connections from then on.
func (a *Alertmanager) Stop() error { return a.proc.Stop(10 * time.Second) }
