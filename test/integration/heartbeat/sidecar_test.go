package heartbeat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// extension-heartbeat as a real process, probing a local HTTP endpoint:
// it releases the Lease within the probe period times the failure threshold
// of the endpoint failing, renews again when it recovers, keeps the Lease
// held across a restart for a changed configuration file, and releases it on
// SIGTERM.
func TestTheHeartbeatProcessReleasesWhenItsProbeFailsAndRenewsWhenItRecovers(t *testing.T) {
	t.Parallel()
	env := testenv.Env(t)
	const node = "n-proc"
	testenv.CreateNode(t, node, nil)
	leaseNS := testenv.NewNamespace(t, "lease")
	ext := newExtension(t, "kube-proxy", node, leaseNS)
	endpoint := newHealthEndpoint(t)
	kubeconfig := ext.writeKubeconfig(t)

	const (
		probePeriod      = time.Second
		probeTimeout     = 500 * time.Millisecond
		failureThreshold = 2
	)
	settings := sidecarSettings{
		probeURL: endpoint.URL + "/healthz", renewInterval: "2s",
		probePeriod: probePeriod.String(), probeTimeout: probeTimeout.String(), failureThreshold: failureThreshold,
	}
	config := ext.sidecarConfig(t, kubeconfig, settings)
	first := ext.startSidecar(t, "extension-heartbeat-"+node+"-1", "", config)

	l := ext.waitLease(t, "held", heldBy(ext.pod))
	ownedByNode(t, l, node)
	ext.waitLease(t, "renewed", renewedAfter(ext.pod, l.Spec.RenewTime))

	if body := httpGet(t, first.healthzURL()); body != "ok" {
		t.Errorf("/healthz: %q", body)
	}
	metrics := httpGet(t, first.metricsURL())
	for _, want := range []string{
		`nodehealth_heartbeat_renewals_total{extension="kube-proxy"}`,
		`nodehealth_heartbeat_holding{extension="kube-proxy"} 1`,
		`nodehealth_heartbeat_probe_duration_seconds_count{extension="kube-proxy",result="success"}`,
		"nodehealth_heartbeat_renewal_failures_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The endpoint fails: released within failureThreshold probe periods (+
	// the probe timeout), not after the 30s Lease expires.
	endpoint.down.Store(true)
	failedAt := time.Now()
	l = waitLeaseFor(t, leaseNS, ext.leaseName(), "released", time.Minute, releasedWith(heartbeat.ReasonProbeFailed))
	took := time.Since(failedAt)
	bound := failureThreshold*probePeriod + probeTimeout + 5*time.Second // slack for a busy machine
	t.Logf("released %s after the endpoint failed", took.Round(10*time.Millisecond))
	if took > bound {
		t.Errorf("released %s after the endpoint failed, want within %s", took, bound)
	}
	if msg := l.Annotations[nodev1alpha1.MessageAnnotation]; !strings.Contains(msg, "503") || !strings.Contains(msg, "service proxy is not synced") {
		t.Errorf("message %q, want the probe's error", msg)
	}
	// The watch can deliver the release before the sidecar has read the API
	// server's answer and counted it; give the counter a moment.
	counted := func(context.Context) (bool, error) {
		return strings.Contains(httpGet(t, first.metricsURL()), `nodehealth_heartbeat_releases_total{extension="kube-proxy",reason="ProbeFailed"} 1`), nil
	}
	if err := wait.PollUntilContextTimeout(testenv.Context(t), 100*time.Millisecond, 10*time.Second, true, counted); err != nil {
		t.Error("/metrics does not count the release")
	}

	// It recovers: renewed again.
	endpoint.down.Store(false)
	l = ext.waitLease(t, "re-acquired", renewedAfter(ext.pod, l.Spec.RenewTime))

	// A valid change of the configuration file: the process exits 0 to
	// restart, and the Lease stays held the whole time (one ConfigMap edit
	// must not gate every node).
	releases := watchReleases(t, leaseNS, ext.leaseName(), l.ResourceVersion)
	settings.probeTimeout = "600ms"
	changed := ext.sidecarConfig(t, kubeconfig, settings)
	// Keep the ports: the file is what changes, and the restarted process
	// binds the same addresses.
	changed = strings.Replace(changed, metricsLine(changed), metricsLine(first.config), 1)
	changed = strings.Replace(changed, healthzLine(changed), healthzLine(first.config), 1)
	if err := writeFile(first.configPath, changed); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("extension-heartbeat did not restart within 2m of a valid configuration change")
	}
	if _, err := first.Exited(); err != nil {
		t.Fatalf("extension-heartbeat exited with %v after a configuration change, want 0", err)
	}
	l, err := env.Client.CoordinationV1().Leases(leaseNS).Get(testenv.Context(t), ext.leaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !heldBy(ext.pod)(l) {
		t.Fatalf("lease after the restart exit: holder %v annotations %v", l.Spec.HolderIdentity, l.Annotations)
	}

	// The pod's container restarts with the new file and renews.
	second := ext.startSidecar(t, "extension-heartbeat-"+node+"-2", first.configPath, changed)
	ext.waitLease(t, "renewed by the restarted process", renewedAfter(ext.pod, l.Spec.RenewTime))
	if got := releases(); len(got) > 0 {
		t.Errorf("the Lease was released across a configuration restart: %v", got)
	}

	// SIGTERM: released at once, reason Terminating.
	if err := second.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Exited(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want 0", err)
	}
	l, err = env.Client.CoordinationV1().Leases(leaseNS).Get(testenv.Context(t), ext.leaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !releasedWith(heartbeat.ReasonTerminating)(l) {
		t.Errorf("after SIGTERM: holder %v annotations %v", l.Spec.HolderIdentity, l.Annotations)
	}
}

func metricsLine(config string) string { return lineWith(config, "metricsBindAddress:") }
func healthzLine(config string) string { return lineWith(config, "healthzBindAddress:") }

func lineWith(s, prefix string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return line
		}
	}
	return ""
}

// watchReleases records every version of the Lease after resourceVersion
// that has an empty holder, until the test ends; the returned function
// reports them so far.
func watchReleases(t *testing.T, ns, name, resourceVersion string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := testenv.Env(t).Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: resourceVersion,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	found := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || holder(l) == "" {
				found <- string(ev.Type) + " " + l.ResourceVersion + " reason=" + l.Annotations[nodev1alpha1.ReasonAnnotation]
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []string {
		var out []string
		for {
			select {
			case s := <-found:
				out = append(out, s)
			default:
				return out
			}
		}
	}
}
