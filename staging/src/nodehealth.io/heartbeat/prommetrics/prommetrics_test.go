package prommetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The names, labels and help texts are the sidecar's contract with its
// dashboards and alerts: they must not change.
func TestTheHeartbeatMetricsKeepTheirNamesLabelsAndHelpTexts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	m.Renewed(time.Unix(1700000000, 500000000))
	m.RenewalFailed()
	m.Released("ProbeFailed")
	m.Probed(3*time.Millisecond, true)
	m.Probed(2*time.Second, false)
	m.Holding(true)

	want := `
# HELP nodehealth_heartbeat_holding 1 while this process holds the extension's Lease (last write succeeded and held it), 0 otherwise.
# TYPE nodehealth_heartbeat_holding gauge
nodehealth_heartbeat_holding{extension="kube-proxy"} 1
# HELP nodehealth_heartbeat_last_renewal_timestamp_seconds Unix time of the last successful renewal; alert when it falls behind by more than the lease duration.
# TYPE nodehealth_heartbeat_last_renewal_timestamp_seconds gauge
nodehealth_heartbeat_last_renewal_timestamp_seconds{extension="kube-proxy"} 1.7000000005e+09
# HELP nodehealth_heartbeat_releases_total Releases of the extension's Lease (empty holderIdentity), by reason.
# TYPE nodehealth_heartbeat_releases_total counter
nodehealth_heartbeat_releases_total{extension="kube-proxy",reason="ProbeFailed"} 1
# HELP nodehealth_heartbeat_renewal_failures_total Failed writes of the extension's Lease (each is retried with back-off).
# TYPE nodehealth_heartbeat_renewal_failures_total counter
nodehealth_heartbeat_renewal_failures_total{extension="kube-proxy"} 1
# HELP nodehealth_heartbeat_renewals_total Successful writes of the extension's Lease that hold it (creation, renewal, re-acquisition).
# TYPE nodehealth_heartbeat_renewals_total counter
nodehealth_heartbeat_renewals_total{extension="kube-proxy"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"nodehealth_heartbeat_holding", "nodehealth_heartbeat_last_renewal_timestamp_seconds",
		"nodehealth_heartbeat_releases_total", "nodehealth_heartbeat_renewal_failures_total",
		"nodehealth_heartbeat_renewals_total"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(reg, "nodehealth_heartbeat_probe_duration_seconds")
	if err != nil || n != 2 {
		t.Errorf("probe duration series %d (%v), want success and failure", n, err)
	}
	m.Holding(false)
	if v := testutil.ToFloat64(m.holding); v != 0 {
		t.Errorf("holding %v after Holding(false)", v)
	}
}

// Every series carries extension, so renewers of several extensions share a
// registry; a second renewer of the same extension is refused.
func TestTwoExtensionsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, ext := range []string{"kube-proxy", "cni"} {
		if _, err := New(reg, ext); err != nil {
			t.Fatalf("%s: %v", ext, err)
		}
	}
	if _, err := New(reg, "cni"); err == nil {
		t.Error("registering the same extension twice did not fail")
	}
	n, err := testutil.GatherAndCount(reg, "nodehealth_heartbeat_holding")
	if err != nil || n != 2 {
		t.Errorf("holding series %d (%v), want 2", n, err)
	}
}
