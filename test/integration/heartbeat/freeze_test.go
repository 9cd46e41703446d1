package heartbeat_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The heartbeat attests fresh health only. extension-heartbeat is frozen
// (SIGSTOP, as a paused VM or a starved process would be) for longer than
// failureThreshold × probe period while its probe target starts failing;
// when it runs again it must not renew on the verdict it had before the
// freeze: the Lease's renewTime does not move (the failing probes release
// it, which leaves renewTime alone) until the target answers again. Before
// the fix the resumed process renewed within a second, on its old verdict.
func TestFrozenSidecarRenewsOnlyOnFreshHealth(t *testing.T) {
	t.Parallel()
	const node = "n-freeze"
	testenv.CreateNode(t, node, nil)
	leaseNS := testenv.NewNamespace(t, "lease")
	ext := newExtension(t, "cni", node, leaseNS)
	endpoint := newHealthEndpoint(t)
	const (
		probePeriod      = time.Second
		failureThreshold = 2
		freeze           = 5 * time.Second // > failureThreshold × probePeriod, < the 30s Lease
	)
	config := ext.sidecarConfig(t, ext.writeKubeconfig(t), sidecarSettings{
		probeURL: endpoint.URL + "/healthz", renewInterval: "2s",
		probePeriod: probePeriod.String(), probeTimeout: "500ms", failureThreshold: failureThreshold,
	})
	sidecar := ext.startSidecar(t, "extension-heartbeat-"+node, "", config)
	l := ext.waitLease(t, "held", heldBy(ext.pod))
	ext.waitLease(t, "renewed", renewedAfter(ext.pod, l.Spec.RenewTime))

	pausedAt := metav1.NowMicro()
	if err := sidecar.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = sidecar.Continue()
		}
	})
	// A renewal the process sent just before it stopped may still land; its
	// renewTime is before pausedAt.
	time.Sleep(500 * time.Millisecond)
	frozen, err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNS).Get(testenv.Context(t), ext.leaseName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !heldBy(ext.pod)(frozen) {
		t.Fatalf("lease not held when frozen: holder %v annotations %v", frozen.Spec.HolderIdentity, frozen.Annotations)
	}
	versions := watchVersions(t, leaseNS, ext.leaseName(), frozen.ResourceVersion)

	// While it is stopped, the extension fails.
	endpoint.down.Store(true)
	time.Sleep(freeze)
	if err := sidecar.Continue(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	resumedAt := time.Now()

	// The probes after the freeze fail: released, never renewed.
	released := waitLeaseFor(t, leaseNS, ext.leaseName(), "released", time.Minute, releasedWith(heartbeat.ReasonProbeFailed))
	t.Logf("released %s after the process resumed", time.Since(resumedAt).Round(10*time.Millisecond))
	// Stay failing a little longer: a renewal on the old verdict would come
	// within the renew interval.
	time.Sleep(3 * time.Second)
	for _, v := range versions() {
		if v.Spec.RenewTime != nil && v.Spec.RenewTime.After(pausedAt.Time) {
			t.Errorf("renewed at %s (holder %q), after the freeze (from %s, %s long) while the target failed",
				v.Spec.RenewTime.Format(time.StampMicro), holder(v), pausedAt.Format(time.StampMicro), freeze)
		}
	}
	if released.Spec.RenewTime == nil || released.Spec.RenewTime.After(pausedAt.Time) {
		t.Errorf("released Lease has renewTime %v, want the last renewal before the freeze (%s)", released.Spec.RenewTime, pausedAt.Format(time.StampMicro))
	}
	if msg := released.Annotations[nodev1alpha1.MessageAnnotation]; !strings.Contains(msg, "503") {
		t.Errorf("message %q, want the probe's error", msg)
	}

	// The target answers again: the next probe renews.
	endpoint.down.Store(false)
	answeredAt := time.Now()
	ext.waitLease(t, "renewed once the target answers", renewedAfter(ext.pod, &pausedAt))
	t.Logf("renewed %s after the target answered again", time.Since(answeredAt).Round(10*time.Millisecond))
}

// watchVersions records every version of the Lease after resourceVersion
// until the test ends; the returned function reports them so far.
func watchVersions(t *testing.T, ns, name, resourceVersion string) func() []*coordinationv1.Lease {
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
	var (
		mu   sync.Mutex
		seen []*coordinationv1.Lease
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok {
				mu.Lock()
				seen = append(seen, l)
				mu.Unlock()
			} else {
				t.Logf("watch of lease %s/%s: %s %s", ns, name, ev.Type, fmt.Sprint(ev.Object))
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []*coordinationv1.Lease {
		mu.Lock()
		defer mu.Unlock()
		return append([]*coordinationv1.Lease(nil), seen...)
	}
}
