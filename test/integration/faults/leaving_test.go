package faults_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// release stops renewing the node's Lease and releases it with reason, as the
// heartbeat does when its probe fails.
func (f *fleet) release(t *testing.T, node, reason string) {
	t.Helper()
	f.fail(node)
	name, err := nodev1alpha1.LeaseName(extension, node)
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{nodev1alpha1.ReasonAnnotation: reason}},
		"spec":     map[string]any{"holderIdentity": ""},
	})
	if _, err := f.client.CoordinationV1().Leases(f.leaseNS).Patch(testenv.Context(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// leaseHolder is the holder of the node's extension Lease ("" when released).
func (f *fleet) leaseHolder(t testing.TB, node string) string {
	t.Helper()
	name, err := nodev1alpha1.LeaseName(extension, node)
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.client.CoordinationV1().Leases(f.leaseNS).Get(testenv.Context(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// addTaint adds a taint the way cluster-autoscaler does: the whole list, on a
// fresh read, again on a conflict.
func (f *fleet) addTaint(t *testing.T, node, key string) {
	t.Helper()
	nodes := f.env.Client.CoreV1().Nodes()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(testenv.Context(t), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "1732780000", Effect: v1.TaintEffectNoSchedule})
		_, err = nodes.Update(testenv.Context(t), n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// kubeProxyHealthz answers like kube-proxy's /healthz since Kubernetes 1.28
// (pkg/proxy/healthcheck/proxy_health.go, NodeEligible): 503 while the node
// carries ToBeDeletedByClusterAutoscaler, 200 otherwise. kube-proxy reads its
// node from an informer; this reads it from the API server at each probe.
// The node is the path: /healthz/<node>.
func (f *fleet) kubeProxyHealthz(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node, err := f.env.Client.CoreV1().Nodes().Get(r.Context(), strings.TrimPrefix(r.URL.Path, "/healthz/"), metav1.GetOptions{})
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == nodev1alpha1.TaintToBeDeletedByClusterAutoscaler }):
			http.Error(w, "node is being deleted", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startHeartbeats hands the nodes' Leases over from the fleet's renewer to
// the real extension-heartbeat, one process per node, probing url/<node>.
func (f *fleet) startHeartbeats(t *testing.T, url string, nodes []string) {
	t.Helper()
	dir := t.TempDir()
	addrs := testenv.FreeLoopbackAddresses(t, 2*len(nodes))
	f.fail(nodes...)
	for i, n := range nodes {
		config := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
extensionName: %s
clientConnection:
  kubeconfig: %s
lease:
  namespace: %s
  duration: %s
  renewInterval: %s
probe:
  http:
    url: %s/healthz/%s
  period: 1s
  timeout: 1s
  failureThreshold: 2
`, extension, f.env.Kubeconfig, f.leaseNS, leaseDuration, renewPeriod, url, n)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := f.env.StartProcess(framework.ProcessSpec{
			Name: "extension-heartbeat-" + n, Path: testenv.Binary(t, "extension-heartbeat"),
			Args: []string{"--config", config, "--node-name", n, "--healthz-bind-address", addrs[2*i], "--metrics-bind-address", addrs[2*i+1]},
			Env:  []string{"POD_NAME=heartbeat-" + n},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := p.Stop(5 * time.Second); err != nil {
				t.Logf("stopping the heartbeat of %s: %v", n, err)
			}
			if t.Failed() {
				t.Logf("last lines of the heartbeat of %s:\n%s", n, p.LogTail(20))
			}
		})
	}
}

// Since Kubernetes 1.28 kube-proxy's /healthz answers 503 on a node carrying
// ToBeDeletedByClusterAutoscaler, so a heartbeat probing it releases its
// Lease on every node being scaled down: here the real extension-heartbeat
// probes a target that answers as kube-proxy's /healthz does, on the nodes
// the scale-down removes. A scale-down of 6 of 20 nodes (30 %, over the
// default 20 % threshold) with eviction mode Evict trips nothing:
// no blast-radius suspension, no eviction, the condition says NodeLeaving;
// a real failure of another node afterwards is tainted and escalated as
// usual.
func TestAScaleDownOfThirtyPercentOfTheNodesTripsNothing(t *testing.T) {
	f := newFleet(t, "leaving", 20)
	cs := f.startControllers(t, 1, controllerConfig{election: defaultElection, clusterThreshold: 20, zoneThreshold: 20})
	f.settleEvaluated(t, cs)
	leaving, other := f.nodes[:6], f.nodes[6]
	f.startHeartbeats(t, f.kubeProxyHealthz(t).URL, leaving)
	f.waitAll(t, "held by its heartbeat", leaving, func(n string) bool { return f.leaseHolder(t, n) == "heartbeat-"+n })
	parallel(t, leaving, func(n string) error {
		f.addTaint(t, n, nodev1alpha1.TaintToBeDeletedByClusterAutoscaler)
		return nil
	})
	f.waitAll(t, "released by its heartbeat", leaving, func(n string) bool { return f.leaseHolder(t, n) == "" })
	f.waitAll(t, "not ready (condition False)", leaving, func(n string) bool {
		status, _ := f.condition(t, n)
		return status == v1.ConditionFalse
	})
	// Longer than the eviction timeout: a leaving node would be escalated
	// by now.
	quiet(2*evictionTimeout + 2*time.Second)
	for _, n := range leaving {
		if status, reason := f.condition(t, n); status != v1.ConditionFalse || reason != nodev1alpha1.ReasonNodeLeaving {
			t.Errorf("%s: condition %s/%s, want False/%s", n, status, reason, nodev1alpha1.ReasonNodeLeaving)
		}
		if !f.tainted(n) {
			t.Errorf("%s: a leaving node whose extension released its Lease is not gated", n)
		}
	}
	// The blast radius's scopes: an own-view suspension (a slow API server
	// on a loaded machine) says nothing about the scale-down.
	for _, scope := range []string{"cluster", "zone"} {
		if v := testenv.Metric(t, cs.metricsURLs[0], "nodehealth_suspensions_total", map[string]string{"scope": scope}); v != 0 {
			t.Errorf("nodehealth_suspensions_total{scope=%q} = %v: the scale-down suspended gating", scope, v)
		}
	}
	if v := testenv.Metric(t, cs.metricsURLs[0], "nodehealth_gating_suspended", map[string]string{"scope": "cluster"}); v != 0 {
		t.Errorf("nodehealth_gating_suspended{scope=cluster} = %v, want 0", v)
	}
	if v := testenv.Metric(t, cs.metricsURLs[0], "nodehealth_leaving_nodes", nil); v != float64(len(leaving)) {
		t.Errorf("nodehealth_leaving_nodes = %v, want %d", v, len(leaving))
	}
	for p, codes := range evictionRequests(t, f.podNS) {
		t.Errorf("pod %s: eviction requests %v during the scale-down", p, codes)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Another node's extension fails: tainted, and evicted once its
	// eviction timeout passes.
	f.fail(other)
	f.waitAll(t, "tainted", []string{other}, f.tainted)
	// The condition is a write of its own (nodes/status), which may reach
	// the watch after the taint's.
	f.waitAll(t, "condition False/"+nodev1alpha1.ReasonExtensionsNotReady, []string{other}, func(n string) bool {
		status, reason := f.condition(t, n)
		return status == v1.ConditionFalse && reason == nodev1alpha1.ReasonExtensionsNotReady
	})
	pod := "pod-" + other
	f.waitPodEvicted(t, other, "failed")
	for p, codes := range evictionRequests(t, f.podNS) {
		if p != pod {
			t.Errorf("pod %s of a leaving node: eviction requests %v", p, codes)
		}
	}
	for _, n := range f.nodes[7:] {
		if f.everTainted(n) {
			t.Errorf("healthy node %s was tainted: %s", n, describe(f.transitions(n)))
		}
	}
}

// setCondition patches a lifecycle condition onto the node's status the way
// an admin's maintenance tool does, with the lastTransitionTime it gives.
func (f *fleet) setCondition(t *testing.T, node, kind, reason string, since time.Time) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{{
		Type: v1.NodeConditionType(kind), Status: v1.ConditionTrue, Reason: reason,
		Message: "set by the test's maintenance tool", LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since),
	}}}})
	if _, err := f.env.Client.CoreV1().Nodes().Patch(testenv.Context(t), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// A Drained=True another tool left three hours ago on a node that is
// schedulable again says nothing about the node today (lifecycleConditionMaxAge,
// 2 h by default): its failure is gated, counted and escalated like any
// other. The same condition an hour old makes its node leaving.
func TestAStaleForeignDrainedConditionDoesNotExemptASchedulableNode(t *testing.T) {
	f := newFleet(t, "stale-drained", 4)
	cs := f.startControllers(t, 1, controllerConfig{election: defaultElection})
	f.settleEvaluated(t, cs)
	stale, recent := f.nodes[0], f.nodes[1]
	f.setCondition(t, stale, nodev1alpha1.LifecycleConditionDrained, "AdminRequested", time.Now().Add(-3*time.Hour))
	f.setCondition(t, recent, nodev1alpha1.LifecycleConditionDrained, "AdminRequested", time.Now().Add(-time.Hour))
	f.release(t, stale, "ProbeFailed")
	f.release(t, recent, "ProbeFailed")

	f.waitAll(t, "condition False/"+nodev1alpha1.ReasonExtensionsNotReady, []string{stale}, func(n string) bool {
		status, reason := f.condition(t, n)
		return status == v1.ConditionFalse && reason == nodev1alpha1.ReasonExtensionsNotReady
	})
	f.waitAll(t, "condition False/"+nodev1alpha1.ReasonNodeLeaving, []string{recent}, func(n string) bool {
		status, reason := f.condition(t, n)
		return status == v1.ConditionFalse && reason == nodev1alpha1.ReasonNodeLeaving
	})
	f.waitAll(t, "tainted", []string{stale, recent}, f.tainted)
	cs.waitMetric(t, 0, "nodehealth_leaving_nodes", nil, 1)

	f.waitPodEvicted(t, stale, "failed under a stale Drained condition")
	if codes := evictionRequests(t, f.podNS)["pod-"+recent]; len(codes) > 0 {
		t.Errorf("pod of the leaving node %s: eviction requests %v", recent, codes)
	}
	for _, n := range f.nodes[2:] {
		if f.everTainted(n) {
			t.Errorf("healthy node %s was tainted: %s", n, describe(f.transitions(n)))
		}
	}
}
