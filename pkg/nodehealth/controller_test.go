package nodehealth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

func TestNewNodeIsGatedUntilItsExtensionsRenew(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")

	f.sync("n1")
	actions := f.expectWrites("patch nodes", "patch nodes/status")
	patch := patchOf(t, actions[0])
	if rv := patch["metadata"].(map[string]interface{})["resourceVersion"]; rv != "1" {
		t.Errorf("the taint patch must carry the resourceVersion it was computed from, got %v", rv)
	}
	node := f.node("n1")
	if got := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"kube-proxy","source":"rule/kube-proxy"}]` {
		t.Errorf("rule entry not injected: %q", got)
	}
	if !f.tainted("n1") {
		t.Fatalf("new node not gated: taints %s", fmtTaints(node))
	}
	if c := f.condition("n1"); c.Status != v1.ConditionFalse || c.Reason != string(causeNew) || !strings.Contains(c.Message, "kube-proxy (LeaseMissing") {
		t.Errorf("condition: %+v", c)
	}

	// Nothing changed: nothing is written.
	f.clock.Step(time.Second)
	f.sync("n1")
	f.expectWrites()

	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	node = f.node("n1")
	if f.tainted("n1") {
		t.Fatalf("node not ungated after its extension renewed: %s", fmtTaints(node))
	}
	if rec, ok := parseBootRecord(node.Annotations[nodev1alpha1.BootAnnotation]); !ok || rec.BootID != "boot-1" || rec.UID != node.UID {
		t.Errorf("boot record not written with the ungate: %q", node.Annotations[nodev1alpha1.BootAnnotation])
	}
	if c := f.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != "ExtensionsReady" {
		t.Errorf("condition after ungate: %+v", c)
	}
	f.expectEvent(EventNodeUngated)

	// Steady state: renewals and syncs write nothing.
	for i := 0; i < 5; i++ {
		f.clock.Step(10 * time.Second)
		f.renew("kube-proxy", "n1")
		f.sync("n1")
	}
	f.expectWrites()
}

func TestExpiredLeaseTaintsByObservationTime(t *testing.T) {
	tests := []struct {
		name string
		// renewTime is what the extension's own clock wrote.
		renewTime time.Duration
	}{
		{name: "renewTime in sync"},
		{name: "renewTime an hour in the future", renewTime: time.Hour},
		{name: "renewTime an hour in the past", renewTime: -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testOptions(), readyNode("n1"))
			l := lease("kube-proxy", "n1", "holder", t0.Add(tc.renewTime))
			f.putLease(l)
			f.sync("n1")
			f.expectWrites()

			// 40s lease + 10s grace: still ready just before 50s.
			f.clock.Step(49 * time.Second)
			f.sync("n1")
			f.expectWrites()

			f.clock.Step(time.Second)
			f.sync("n1")
			f.expectWrites("patch nodes", "patch nodes/status")
			if !f.tainted("n1") {
				t.Fatal("expired extension did not gate the node")
			}
			c := f.condition("n1")
			if c.Reason != string(causeNotReady) || !strings.Contains(c.Message, "kube-proxy (LeaseExpired") {
				t.Errorf("condition: %+v", c)
			}
			f.expectEvent(EventNodeGated)
		})
	}
}

// A renewal counts from when the controller observed it, also when the
// node's clock writes a renewTime ahead of the controller's: taken at its
// word, an hour-fast clock would keep a dead extension ready for an hour.
func TestARenewalExpiresByWhenItWasObservedWhateverItsRenewTimeSays(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			f := newFixture(t, testOptions(), readyNode("n1"))
			f.putLease(lease("kube-proxy", "n1", "holder", t0.Add(skew)))
			f.sync("n1")
			f.clock.Step(10 * time.Second)
			f.putLease(lease("kube-proxy", "n1", "holder", f.clock.Now().Add(skew)))
			f.sync("n1")
			f.expectWrites()

			// 40s lease + 10s grace from the renewal's observation.
			f.clock.Step(49 * time.Second)
			f.sync("n1")
			f.expectWrites()
			f.clock.Step(time.Second)
			f.sync("n1")
			f.expectWrites("patch nodes", "patch nodes/status")
			if !f.tainted("n1") {
				t.Fatal("the extension silent since its renewal did not gate the node")
			}
		})
	}
}

func TestExpiryIsScheduledNotPolled(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	// The renewal itself queued the node; take it off as a worker would.
	key, _ := f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	// The sync asked to be woken at the expiry instant, not before.
	f.clock.Step(49 * time.Second)
	if got := f.c.queue.Len(); got != 0 {
		t.Fatalf("queue has %d items before the expiry", got)
	}
	f.clock.Step(time.Second)
	waitForQueue(t, f, 1)
}

// A Lease deleted while its node stays (kubectl delete lease, a namespace
// clean-up) leaves its extension missing, not ready at once: the deletion
// queues the node, and the worker that takes the key gates it, without
// waiting for the expiry the last renewal scheduled.
func TestADeletedLeaseQueuesItsNodeAndTheWorkerGatesIt(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	l := f.renew("kube-proxy", "n1")
	key, _ := f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if f.tainted("n1") || f.c.queue.Len() != 0 {
		t.Fatalf("before the deletion: tainted %v, %d keys queued", f.tainted("n1"), f.c.queue.Len())
	}
	f.clock.Step(5 * time.Second)
	f.deleteLease(l)
	if got := f.c.queue.Len(); got != 1 {
		t.Fatalf("%d keys queued after the Lease's deletion, want its node's", got)
	}
	key, _ = f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if key != "n1" || !f.tainted("n1") {
		t.Fatalf("the worker took %q and n1 is tainted %v: a missing Lease must gate its node at once", key, f.tainted("n1"))
	}
}

// A Lease released for maintenance, then deleted before it renewed, is
// missing: an unplanned failure, and the node's other failures are no
// longer planned either (docs/controller.md). The gate's memory of the
// planned release kept it PlannedMaintenance (simulation seed
// 18378656569196115148).
func TestAPlannedReleaseWhoseLeaseIsDeletedIsPlannedNoLonger(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonPlannedMaintenance {
		t.Fatalf("after the release: tainted %v, %s; want tainted, %s", f.tainted("n1"), f.condition("n1").Reason, nodev1alpha1.ReasonPlannedMaintenance)
	}
	f.clock.Step(time.Second)
	f.deleteLease(lease("kube-proxy", "n1", "", f.clock.Now()))
	f.sync("n1")
	if !f.tainted("n1") || f.condition("n1").Reason != nodev1alpha1.ReasonExtensionsNotReady {
		t.Fatalf("after the deletion: tainted %v, %s; want tainted, %s (a missing Lease is unplanned)", f.tainted("n1"), f.condition("n1").Reason, nodev1alpha1.ReasonExtensionsNotReady)
	}
}

func waitForQueue(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.c.queue.Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("queue length %d, want %d", f.c.queue.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReleaseTaintsAtOnce(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.release("kube-proxy", "n1", "CrashLoop")
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	if !f.tainted("n1") {
		t.Fatal("released extension did not gate the node")
	}
	c := f.condition("n1")
	if c.Reason != string(causeNotReady) || !strings.Contains(c.Message, "released, reason CrashLoop: stopping") {
		t.Errorf("condition: %+v", c)
	}
	f.c.mu.Lock()
	failing := f.c.blast.isFailing("n1")
	f.c.mu.Unlock()
	if !failing {
		t.Error("an unplanned release after the node was ready must count as failing")
	}
}

func TestPlannedReleaseGatesButNeverEscalates(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.release("kube-proxy", "n1", nodev1alpha1.ReasonUpdating)
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("planned release did not gate the node")
	}
	if c := f.condition("n1"); c.Reason != string(causeMaintenance) {
		t.Errorf("condition reason %q, want %q", c.Reason, causeMaintenance)
	}
	f.clock.Step(time.Hour)
	f.sync("n1")
	if f.c.evictions.Len() != 0 {
		t.Error("a planned release must never escalate")
	}
	if got := f.c.blast.failingNodes(); len(got) != 0 {
		t.Errorf("a planned release must not count toward the blast radius, failing: %v", got)
	}
}

func TestRebootRegatesUntilFreshRenewals(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	f.expectWrites()

	f.clock.Step(2 * time.Second)
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	if !f.tainted("n1") {
		t.Fatal("reboot did not gate the node")
	}
	if c := f.condition("n1"); c.Reason != string(causeRebooted) {
		t.Errorf("condition reason %q, want %q", c.Reason, causeRebooted)
	}

	// The Lease is still fresh from before the reboot: not enough.
	f.clock.Step(time.Second)
	f.sync("n1")
	f.expectWrites()
	if !f.tainted("n1") {
		t.Fatal("ungated on a renewal from before the reboot")
	}

	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated after a fresh renewal")
	}
	if rec, _ := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation]); rec.BootID != "boot-2" {
		t.Errorf("boot record not updated to the new boot: %+v", rec)
	}
}

func TestKubeletRestartIsNotAReboot(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// A kubelet restart re-posts status with the same bootID.
	f.updateNode("n1", func(n *v1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.37.1" })
	f.sync("n1")
	f.expectWrites()
}

func TestChangesWhileTheControllerWasDown(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Node)
		cause  gateCause
	}{
		{name: "reboot", mutate: func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" }, cause: causeRebooted},
		{name: "re-created with the old record", mutate: func(n *v1.Node) { n.UID = "uid-new" }, cause: causeRecreated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The record says boot-1/uid-n1; the node now differs.
			node := readyNode("n1")
			tc.mutate(node)
			f := newFixture(t, testOptions(), node, lease("kube-proxy", "n1", "holder", t0))
			f.sync("n1")
			if !f.tainted("n1") {
				t.Fatal("change while the controller was down was not caught from the boot record")
			}
			if c := f.condition("n1"); c.Reason != string(tc.cause) {
				t.Errorf("condition reason %q, want %q", c.Reason, tc.cause)
			}
			// Re-syncing a stale record does not restart the gate.
			f.clock.Step(time.Second)
			f.renew("kube-proxy", "n1")
			f.sync("n1")
			if f.tainted("n1") {
				t.Fatal("not ungated after a fresh renewal")
			}
		})
	}
}

// A Node the controller saw deleted and created again under its name is a
// new node, whether the deletion's sync ran before the creation was
// delivered or both came before it, as they may with several workers
// (simulation seed 16025508996173224691: NodeRecreated where the model, and
// one worker, said NodeRegistered). Another UID seen only in an update, a
// watch that missed the deletion, is a re-creation.
func TestANodeSeenDeletedAndCreatedAgainIsANewNodeWhicheverCameFirst(t *testing.T) {
	recreate := func(f *fixture, syncBetween bool) {
		old := f.node("n1")
		if err := f.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("nodes"), "", "n1"); err != nil {
			t.Fatal(err)
		}
		if err := f.nodeIndexer().Delete(old); err != nil {
			t.Fatal(err)
		}
		f.c.deleteNode(old)
		if syncBetween {
			f.sync("n1")
		}
		created := newNode("n1", func(n *v1.Node) { n.UID = "uid-n1-2"; withTaint(n) })
		if err := f.client.Tracker().Add(created); err != nil {
			t.Fatal(err)
		}
		if err := f.nodeIndexer().Add(created.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		f.c.addNode(created, false)
	}
	tests := []struct {
		name   string
		change func(f *fixture)
		want   gateCause
	}{
		{name: "the deletion's sync before the creation", change: func(f *fixture) { recreate(f, true) }, want: causeNew},
		{name: "both before the sync", change: func(f *fixture) { recreate(f, false) }, want: causeNew},
		{name: "another UID in an update", change: func(f *fixture) {
			f.updateNode("n1", func(n *v1.Node) { n.UID = "uid-n1-2" })
			f.c.updateNode(f.node("n1"), f.node("n1"))
		}, want: causeRecreated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testOptions(), readyNode("n1"), lease("kube-proxy", "n1", "holder", t0))
			f.sync("n1")
			f.clock.Step(time.Second)
			tc.change(f)
			f.sync("n1")
			if c := f.condition("n1"); !f.tainted("n1") || c.Reason != string(tc.want) {
				t.Errorf("tainted %v, condition reason %q; want tainted, %q", f.tainted("n1"), c.Reason, tc.want)
			}
		})
	}
}

func TestControllerStartKeepsGatedNodesGatedUntilFreshRenewals(t *testing.T) {
	// Found tainted at start, with a Lease that looks fresh: every Lease
	// counts as observed at the start, and ungating needs a renewal after it.
	f := newFixture(t, testOptions(), readyNode("n1", withTaint), lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("ungated without a renewal observed after the start")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated after a fresh renewal")
	}
}

func TestControllerStartDoesNotGateReadyNodes(t *testing.T) {
	// First install on a running cluster: nodes without a boot record whose
	// extensions are ready are adopted with one record write, not gated.
	node := newNode("n1", func(n *v1.Node) {
		n.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`}
	})
	f := newFixture(t, testOptions(), node, lease("kube-proxy", "n1", "holder", t0))
	f.sync("n1")
	f.expectWrites("patch nodes", "patch nodes/status")
	if f.tainted("n1") {
		t.Fatal("a ready node was gated on the controller's first start")
	}
	if _, ok := parseBootRecord(f.node("n1").Annotations[nodev1alpha1.BootAnnotation]); !ok {
		t.Error("adopted node has no boot record")
	}
	f.sync("n1")
	f.expectWrites()
}

func TestRestartWritesNothingForReadyNodes(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), readyNode("n2"),
		lease("kube-proxy", "n1", "holder", t0), lease("kube-proxy", "n2", "holder", t0))
	f.sync("n1")
	f.sync("n2")
	f.expectWrites()
}

func TestANodeWithoutExtensionsKeepsTheCreationTaintUntilTheRegistrationGraceEnds(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, newNode("n1", withTaint))
	f.live("n1")
	f.sync("n1")
	f.expectWrites()
	if !f.tainted("n1") {
		t.Fatal("creation taint removed before the registration grace")
	}
	f.clock.Step(30 * time.Second)
	f.sync("n1")
	f.expectWrites("patch nodes")
	if f.tainted("n1") {
		t.Fatal("creation taint kept after the registration grace on a node without extensions")
	}
}

func TestSelfRegistrationWithinRegistrationGrace(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, newNode("n1", withTaint))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(5 * time.Second)
	l := lease("gpu", "n1", "holder", f.clock.Now())
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	f.putLease(l)
	f.sync("n1")
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"gpu","source":"lease"}]` {
		t.Fatalf("self-registered entry: %q", got)
	}
	// Registered after the gate started and renewed after it: ungated.
	if f.tainted("n1") {
		t.Fatal("node not ungated once its self-registered extension renewed")
	}

	f.deleteLease(l)
	f.sync("n1")
	if got, ok := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok {
		t.Fatalf("entry not removed with its Lease: %q", got)
	}
}

func TestSelfRegistrationAffectsReadinessLabel(t *testing.T) {
	opts := testOptions()
	opts.Rules = nil
	f := newFixture(t, opts, readyNode("n1", func(n *v1.Node) { delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation) }))
	l := lease("logging", "n1", "holder", t0)
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	l.Labels[nodev1alpha1.AffectsReadinessLabel] = "false"
	f.putLease(l)
	f.sync("n1")
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"logging","affectsReadiness":false,"source":"lease"}]` {
		t.Fatalf("entry: %q", got)
	}
	f.release("logging", "n1", "Crash")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("an extension that does not affect readiness gated the node")
	}
}

func TestManualEntryWinsOverRule(t *testing.T) {
	node := readyNode("n1", func(n *v1.Node) {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"kube-proxy","affectsReadiness":false}]`
	})
	f := newFixture(t, testOptions(), node)
	f.sync("n1")
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got != `[{"name":"kube-proxy","affectsReadiness":false}]` {
		t.Fatalf("manual entry changed: %q", got)
	}
	if f.tainted("n1") {
		t.Fatal("manual affectsReadiness=false must win over the rule")
	}
}

func TestRuleStopsMatchingUngatesOrphan(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].Selector = labels.SelectorFromSet(labels.Set{"pool": "a"})
	f := newFixture(t, opts, newNode("n1", func(n *v1.Node) { n.Labels["pool"] = "a" }))
	f.live("n1")
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not gated")
	}
	f.updateNode("n1", func(n *v1.Node) { n.Labels["pool"] = "b" })
	f.sync("n1")
	node := f.node("n1")
	if _, ok := node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]; ok || f.tainted("n1") {
		t.Fatalf("rule entry and its gate must go when the rule stops matching: annotations %v taints %s",
			node.Annotations, fmtTaints(node))
	}
}

func TestAStartupTimeoutIsCountedOnceAndKeepsOrUngatesTheNodeByItsFailurePolicy(t *testing.T) {
	for _, policy := range []FailurePolicy{FailurePolicyKeepGated, FailurePolicyUngate} {
		t.Run(string(policy), func(t *testing.T) {
			opts := testOptions()
			opts.Rules[0].StartupTimeout = time.Minute
			opts.Rules[0].FailurePolicy = policy
			f := newFixture(t, opts, newNode("n1"))
			f.live("n1")
			f.sync("n1")
			f.clock.Step(59 * time.Second)
			f.sync("n1")
			if !f.tainted("n1") {
				t.Fatal("ungated before the startup timeout")
			}
			f.clock.Step(time.Second)
			f.sync("n1")
			if got := testutil.ToFloat64(f.c.metrics.StartupTimeouts.WithLabelValues(string(policy))); got != 1 {
				t.Errorf("nodehealth_startup_timeouts_total{policy=%s} = %v, want 1", policy, got)
			}
			f.expectEvent("did not become ready within its startup timeout")
			f.sync("n1")
			if got := testutil.ToFloat64(f.c.metrics.StartupTimeouts.WithLabelValues(string(policy))); got != 1 {
				t.Errorf("a startup timeout must be counted once, got %v", got)
			}
			switch policy {
			case FailurePolicyKeepGated:
				if !f.tainted("n1") {
					t.Fatal("KeepGated ungated the node")
				}
				if c := f.condition("n1"); c.Reason != string(causeStartupExpiry) {
					t.Errorf("condition reason %q, want %q", c.Reason, causeStartupExpiry)
				}
			case FailurePolicyUngate:
				if f.tainted("n1") {
					t.Fatal("Ungate kept the node gated")
				}
				// Once it comes up and then fails, it gates again.
				f.renew("kube-proxy", "n1")
				f.sync("n1")
				f.release("kube-proxy", "n1", "Crash")
				f.sync("n1")
				if !f.tainted("n1") {
					t.Fatal("a failed-open extension that became ready must gate again when it fails")
				}
			}
		})
	}
}

func TestExcludedNodeLosesTheTaintAndIsLeftAlone(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", withTaint, func(n *v1.Node) {
		n.Labels[nodev1alpha1.ExcludeLabel] = "true"
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "other", Effect: v1.TaintEffectNoSchedule})
	}))
	f.sync("n1")
	// The taint goes, and the condition readyNode carries says excluded.
	f.expectWrites("patch nodes", "patch nodes/status")
	if got := fmtTaints(f.node("n1")); got != "other:NoSchedule" {
		t.Fatalf("taints %q, want only the other taint", got)
	}
	f.sync("n1")
	f.expectWrites()
}

func TestInvalidListKeepsGateStateAndServesOthers(t *testing.T) {
	bad := readyNode("bad", withTaint, func(n *v1.Node) {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"kube-proxy","oops":true}]`
	})
	f := newFixture(t, testOptions(), bad, newNode("good"))
	f.live("good")
	f.sync("bad")
	// Only the condition says the controller cannot judge the node; the
	// annotation and the taint are left as they are.
	f.expectWrites("patch nodes/status")
	if c := f.condition("bad"); c.Status != v1.ConditionUnknown || c.Reason != EventInvalidExtensionList || !strings.Contains(c.Message, `unknown field "[0].oops"`) {
		t.Errorf("condition: %+v", c)
	}
	f.expectEvent(EventInvalidExtensionList)
	if !f.tainted("bad") {
		t.Fatal("a node with an invalid list must keep its gate state")
	}
	f.sync("good")
	if !f.tainted("good") {
		t.Fatal("the other node was not served")
	}
	// Reported once, not on every sync.
	f.sync("bad")
	for _, e := range f.events() {
		if strings.Contains(e, EventInvalidExtensionList) {
			t.Fatalf("invalid list reported again: %s", e)
		}
	}
}

func TestConflictRetriesOnAFreshRead(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")
	conflicts := 0
	f.client.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		// Someone else (the cluster autoscaler) tainted the node meanwhile.
		node, _ := f.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("nodes"), "", "n1")
		n := node.(*v1.Node).DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "autoscaler", Effect: v1.TaintEffectNoSchedule})
		n.ResourceVersion = "2"
		if err := f.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	f.sync("n1")
	actions := f.client.Actions()
	var verbs []string
	for _, a := range actions {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	if strings.Join(verbs, ",") != "patch nodes/,get nodes/,patch nodes/,patch nodes/status" {
		t.Fatalf("actions %q: want a patch, a fresh get, a retried patch, then the condition", verbs)
	}
	patch := patchOf(t, actions[2])
	if rv := patch["metadata"].(map[string]interface{})["resourceVersion"]; rv != "2" {
		t.Errorf("retried patch must carry the fresh resourceVersion, got %v", rv)
	}
	if got := fmtTaints(f.node("n1")); got != "autoscaler:NoSchedule,"+testKey+":NoSchedule" {
		t.Fatalf("taints %q: the concurrent writer's taint must survive", got)
	}
}

func TestOtherTaintsAreKeptOnUngate(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1", func(n *v1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}
	}))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if got := fmtTaints(f.node("n1")); got != v1.TaintNodeUnschedulable+":NoSchedule" {
		t.Fatalf("taints after ungate %q: the cordon taint must stay", got)
	}
}

func TestEscalationEvictsAfterTimeoutSkippingProtectedPods(t *testing.T) {
	node := readyNode("n1")
	pods := []runtime.Object{
		pod("plain", "n1"),
		pod("daemon", "n1", func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
		}),
		pod("mirror", "n1", func(p *v1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "x"} }),
		pod("tolerates", "n1", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: testKey, Operator: v1.TolerationOpExists}}
		}),
		pod("finished", "n1", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
		pod("elsewhere", "n2"),
	}
	f := newFixture(t, testOptions(), append([]runtime.Object{node}, pods...)...)
	f.toASecondBeforeEviction("n1")
	f.clock.Step(time.Second)
	f.sync("n1")
	if f.c.evictions.Len() != 1 {
		t.Fatal("not escalated after the eviction timeout")
	}
	f.writes()
	// The fake clientset cannot filter by field selector; the fake list
	// returns every pod, so the node filter in the controller must hold.
	f.client.PrependReactor("list", "pods", func(action core.Action) (bool, runtime.Object, error) {
		list := &v1.PodList{}
		for _, obj := range pods {
			if p := obj.(*v1.Pod); p.Spec.NodeName == "n1" {
				list.Items = append(list.Items, *p)
			}
		}
		return true, list, nil
	})
	retry, err := f.c.escalate(f.ctx, "n1")
	if err != nil || retry {
		t.Fatalf("escalate: retry=%v err=%v", retry, err)
	}
	var evicted []string
	for _, a := range f.writes() {
		if a.GetSubresource() == "eviction" {
			evicted = append(evicted, a.(core.CreateAction).GetObject().(metav1.Object).GetName())
		}
	}
	if strings.Join(evicted, ",") != "plain" {
		t.Fatalf("evicted %q, want only the plain pod", evicted)
	}
	f.expectEvent(EventEvictingPods)
}

func TestBlockedEvictionIsRetriedAndNamesTheBudget(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"), pod("plain", "n1"))
	f.reachEvictionTime("n1")
	f.client.PrependReactor("create", "pods", func(action core.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: "DisruptionBudget", Message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}}
		return true, nil, err
	})
	retry, err := f.c.escalate(f.ctx, "n1")
	if err != nil || !retry {
		t.Fatalf("a blocked eviction must ask for a retry: retry=%v err=%v", retry, err)
	}
	f.expectEvent("web-pdb")
}

func TestNoExecuteModeAddsTheNoExecuteTaint(t *testing.T) {
	opts := testOptions()
	opts.Eviction.Mode = EvictionModeNoExecute
	f := newFixture(t, opts, readyNode("n1"))
	f.reachEvictionTime("n1")
	if _, err := f.c.escalate(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.sync("n1")
	if !nodeutil.HasTaint(f.node("n1"), testKey, v1.TaintEffectNoExecute) {
		t.Fatalf("NoExecute taint not added: %s", fmtTaints(f.node("n1")))
	}
	// Recovery removes both.
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if got := nodeutil.CountTaints(f.node("n1"), testKey); got != 0 {
		t.Fatalf("%d readiness taints left after recovery", got)
	}
}

func TestBlastRadiusSuspendsFailureTaintsWithHysteresis(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, readyNode(n), lease("kube-proxy", n, "holder", t0))
	}
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.5}
	f := newFixture(t, opts, objs...)
	for _, n := range names {
		f.sync(n)
	}
	f.clock.Step(time.Second)
	fail := func(n string) { f.release("kube-proxy", n, "Crash"); f.sync(n) }
	fail("n1")
	fail("n2")
	if !f.tainted("n1") || !f.tainted("n2") {
		t.Fatal("the first failures must be tainted")
	}
	fail("n3") // 3 of 6 = 50%: suspended, n3 is not tainted.
	if f.tainted("n3") {
		t.Fatal("failure taint added at the threshold")
	}
	if c := f.condition("n3"); c.Reason != "GatingSuspended" || !strings.Contains(c.Message, "3 of 6 nodes in the cluster are failing") {
		t.Errorf("condition: %+v", c)
	}
	f.expectEvent(EventGatingSuspended)
	// Untaints continue while suspended.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("untaint blocked by the suspension")
	}
	// 2 of 6 = 33%, below 50% - 5 points: gating resumes and n3 gets its taint.
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
		f.sync(key)
	}
	if !f.tainted("n3") {
		t.Fatal("suspension did not end below the threshold minus hysteresis")
	}
}

func TestBlastRadiusHysteresis(t *testing.T) {
	b := newBlastRadius(BlastRadiusOptions{ClusterThreshold: 0.5})
	for i := 0; i < 10; i++ {
		b.update(string(rune('a'+i)), "", true, false)
	}
	fail := func(n string, failing bool) { b.update(n, "", true, failing) }
	for _, n := range []string{"a", "b", "c", "d"} {
		fail(n, true)
	}
	if s, _ := b.suspended(""); s {
		t.Fatal("suspended at 40%")
	}
	fail("e", true)
	if s, _ := b.suspended(""); !s {
		t.Fatal("not suspended at 50%")
	}
	fail("e", false) // 40%, below 50% - 5 points: resumes.
	if s, _ := b.suspended(""); s {
		t.Fatal("still suspended at 40%, below threshold minus 5 points")
	}
	fail("e", true)
	fail("f", true)  // 60%: suspended
	fail("f", false) // 50%: stays suspended (not below 45%)
	if s, _ := b.suspended(""); !s {
		t.Fatal("resumed at 50%, within the hysteresis band")
	}
}

func TestBlastRadiusNeedsMoreThanTwoFailingNodes(t *testing.T) {
	b := newBlastRadius(BlastRadiusOptions{ClusterThreshold: 0.2})
	b.update("a", "", true, true)
	b.update("b", "", true, true)
	if s, _ := b.suspended(""); s {
		t.Fatal("a two-node cluster with both nodes failing must still gate them")
	}
}

func TestAZoneWithMostNodesFailingIsSuspendedWhileAHealthyZoneStillGates(t *testing.T) {
	objs := append(kubeProxyNodes("a", "a1", "a2", "a3", "a4"), kubeProxyNodes("b", "b1", "b2", "b3", "b4", "b5", "b6")...)
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ClusterThreshold: 0.9, ZoneThreshold: 0.7}
	f := newFixture(t, opts, objs...)
	f.syncNodes(objs)
	f.clock.Step(time.Second)
	for _, n := range []string{"a1", "a2", "a3"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if f.tainted("a3") || !f.tainted("a2") {
		t.Fatal("zone a must be suspended at 3 of 4 failing, after two taints")
	}
	f.release("kube-proxy", "b1", "Crash")
	f.sync("b1")
	if !f.tainted("b1") {
		t.Fatal("zone b is healthy and must still be gated")
	}
}

// A node without a zone label counts in the cluster only: nodes without one
// that fail together are no zone of their own, and are tainted however many
// of them fail, while the cluster is below its threshold (here it has none).
func TestNodesWithoutAZoneLabelThatFailTogetherAreNoZoneOfTheirOwn(t *testing.T) {
	objs := append(kubeProxyNodes("", "x1", "x2", "x3", "x4"), kubeProxyNodes("a", "a1", "a2", "a3", "a4")...)
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ZoneThreshold: 0.5} // no cluster-wide suspension
	f := newFixture(t, opts, objs...)
	f.syncNodes(objs)
	f.clock.Step(time.Second)
	failing := []string{"x1", "x2", "x3"} // more than minFailingToSuspend
	for _, n := range failing {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	for _, n := range failing {
		if !f.tainted(n) {
			t.Errorf("%s, without a zone label, failed and is not tainted: the nodes without one were suspended as if they were a zone (3 of 4 failing, zone threshold 50%%)", n)
		}
	}
}

// A node counts in the zone its label names at its latest evaluation: a
// relabelled node leaves its old zone's count (which is judged again on the
// nodes left: a held node moved out of a suspended zone is tainted, and the
// zone resumes), joins the new zone's (a failure there counts it), and a
// node without the label counts in the cluster only.
func TestARelabelledNodeCountsInTheZoneItsLabelNamesNow(t *testing.T) {
	objs := append(kubeProxyNodes("a", "a1", "a2", "a3", "a4"), kubeProxyNodes("b", "b1", "b2", "b3", "b4")...)
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ZoneThreshold: 0.5} // no cluster-wide suspension
	f := newFixture(t, opts, objs...)
	f.syncNodes(objs)
	suspended := func(zone string) bool { s, _ := f.c.blast.suspended(zone); return s }
	relabel := func(node, zone string) {
		t.Helper()
		f.updateNode(node, func(n *v1.Node) {
			delete(n.Labels, v1.LabelTopologyZone)
			if zone != "" {
				n.Labels[v1.LabelTopologyZone] = zone
			}
		})
		f.sync(node)
	}
	f.clock.Step(time.Second)
	for _, n := range []string{"a1", "a2", "a3"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if !suspended("a") || f.tainted("a3") {
		t.Fatal("zone a must be suspended at 3 of 4 failing, holding a3")
	}

	relabel("a3", "b")
	if suspended("a") {
		t.Error("zone a still suspended with 2 of its 3 nodes failing: a3 is counted there after moving to zone b")
	}
	if !f.tainted("a3") {
		t.Errorf("a3, failing in zone b where 1 of 5 fails, is not tainted: %+v", f.condition("a3"))
	}

	f.release("kube-proxy", "b1", "Crash")
	f.sync("b1")
	f.release("kube-proxy", "b2", "Crash")
	f.sync("b2")
	if !suspended("b") || f.tainted("b2") {
		t.Fatalf("zone b not suspended at 3 of 5 failing (a3 with it), or b2 tainted (%v)", f.tainted("b2"))
	}

	relabel("a3", "")
	if suspended("b") {
		t.Error("zone b still suspended with 2 of its 4 nodes failing: a3 is counted there after losing its zone")
	}
	f.sync("b2")
	if !f.tainted("b2") {
		t.Errorf("b2 not tainted once zone b resumed: %+v", f.condition("b2"))
	}
}

// A failing, tainted node relabelled into a suspended zone keeps its taint
// (a suspension withholds new failure taints only) and its eviction clock
// pauses there; relabelled out of every zone, no zone's suspension holds it
// and the clock goes on from what it had counted.
func TestAFailingNodeRelabelledIntoASuspendedZoneKeepsItsTaintAndItsEvictionClockPauses(t *testing.T) {
	objs := append(kubeProxyNodes("a", "a1", "a2", "a3", "a4"), kubeProxyNodes("b", "b1", "b2", "b3", "b4")...)
	opts := testOptions()
	opts.BlastRadius = BlastRadiusOptions{ZoneThreshold: 0.5} // no cluster-wide suspension
	f := newFixture(t, opts, objs...)
	f.syncNodes(objs)
	relabel := func(node, zone string) {
		t.Helper()
		f.updateNode(node, func(n *v1.Node) {
			delete(n.Labels, v1.LabelTopologyZone)
			if zone != "" {
				n.Labels[v1.LabelTopologyZone] = zone
			}
		})
		f.sync(node)
	}
	f.clock.Step(time.Second)
	f.release("kube-proxy", "b1", "Crash")
	f.sync("b1") // its eviction clock starts
	for _, n := range []string{"a1", "a2", "a3"} {
		f.release("kube-proxy", n, "Crash")
		f.sync(n)
	}
	if s, _ := f.c.blast.suspended("a"); !s || !f.tainted("b1") {
		t.Fatalf("zone a not suspended at 3 of 4, or b1 not tainted (%v)", f.tainted("b1"))
	}

	f.clock.Step(time.Minute)
	relabel("b1", "a")
	if !f.tainted("b1") {
		t.Fatalf("b1 lost its taint moving into the suspended zone a: %+v", f.condition("b1"))
	}
	f.clock.Step(5 * time.Minute)
	f.sync("b1")
	if n := f.c.evictions.Len(); n != 0 {
		t.Fatalf("b1 escalated 6 min after its failure, 5 of them in the suspended zone a: its clock ran there")
	}

	relabel("b1", "")
	f.clock.Step(3*time.Minute + 59*time.Second)
	f.sync("b1")
	if n := f.c.evictions.Len(); n != 0 {
		t.Fatalf("b1 escalated after 1 min in zone b and 3m59s without a zone: its clock counted the suspension")
	}
	f.clock.Step(time.Second)
	f.sync("b1")
	if n := f.c.evictions.Len(); n != 1 {
		t.Errorf("b1 not escalated after 1 min in zone b and 4 min without a zone (%d queued): no zone's suspension holds it", n)
	}
}

func TestOwnViewStaleSuspendsAdditionsNotRemovals(t *testing.T) {
	opts := testOptions()
	opts.CanaryInterval = 5 * time.Second
	f := newFixture(t, opts, readyNode("n1"), readyNode("n2", withTaint))
	f.renew("kube-proxy", "n1")
	f.renew("kube-proxy", "n2")
	f.sync("n1")
	f.sync("n2")
	f.clock.Step(16 * time.Second)
	if stale, changed := f.c.canary.check(f.clock.Now()); !stale || !changed {
		t.Fatal("canary not stale after 3 intervals without observing a renewal")
	}
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n2")
	f.release("kube-proxy", "n1", "Crash")
	f.sync("n1")
	f.sync("n2")
	if f.tainted("n1") {
		t.Fatal("taint added while the controller does not trust its view")
	}
	if f.tainted("n2") {
		t.Fatal("untaint blocked while the view is stale")
	}
	// Observing its own renewal restores it.
	c := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: nodev1alpha1.ControllerCanaryLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-a"), RenewTime: &metav1.MicroTime{Time: f.clock.Now()}}}
	f.putLease(c)
	if stale, _ := f.c.canary.check(f.clock.Now()); stale {
		t.Fatal("canary still stale after observing a renewal")
	}
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("taint not added once the view is trusted again")
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	opts := testOptions()
	opts.DryRun = true
	f := newFixture(t, opts, newNode("n1"), readyNode("n2"))
	f.live("n1")
	f.sync("n1")
	f.renew("kube-proxy", "n2")
	f.sync("n2")
	f.clock.Step(time.Minute)
	f.sync("n2")
	f.expectWrites()
	if events := f.events(); len(events) != 0 {
		t.Fatalf("dry run recorded events: %q", events)
	}
}

func TestDeletedNodeIsForgotten(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if err := f.nodeIndexer().Delete(f.node("n1")); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncNode(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if _, ok := f.c.nodes["n1"]; ok {
		t.Fatal("state of a deleted node kept")
	}
}

func pod(name, node string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestNodesWithoutExtensionsAreNeverWritten(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].Selector = labels.SelectorFromSet(labels.Set{"pool": "gpu"})
	f := newFixture(t, opts, newNode("old"), newNode("new"))
	f.live("new")
	f.sync("old")
	f.sync("new")
	f.clock.Step(time.Minute)
	f.updateNode("new", func(n *v1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	f.sync("old")
	f.sync("new")
	f.expectWrites()
}

func TestFirstInstallWithABrokenExtensionDoesNotGateTheCluster(t *testing.T) {
	// The controller starts on a running cluster whose kube-proxy Leases do
	// not exist (a broken rollout, or extensions not yet instrumented):
	// the nodes are in service, so their failures count for the blast radius.
	var objs []runtime.Object
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		objs = append(objs, newNode(n))
	}
	f := newFixture(t, testOptions(), objs...)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		f.sync(n)
	}
	tainted := 0
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if f.tainted(n) {
			tainted++
		}
	}
	if tainted != 2 {
		t.Fatalf("%d of 4 nodes tainted; the blast radius (50%%, more than 2 failing) must stop at 2", tainted)
	}
}

func TestOverwrittenConditionIsPutBack(t *testing.T) {
	f := newFixture(t, testOptions(), newNode("n1"))
	f.live("n1")
	f.sync("n1")
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	if c := f.condition("n1"); c.Status != v1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
	// A status writer working from a stale read puts the old condition back.
	f.updateNode("n1", func(n *v1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == nodev1alpha1.SystemExtensionsReadyCondition {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = v1.ConditionFalse, string(causeNew)
			}
		}
	})
	f.sync("n1")
	f.expectWrites("patch nodes/status")
	if c := f.condition("n1"); c.Status != v1.ConditionTrue || c.Reason != "ExtensionsReady" {
		t.Fatalf("overwritten condition not put back: %+v", c)
	}
	f.sync("n1")
	f.expectWrites()
}

func TestRenewalOfATemplatedLeaseReachesItsNode(t *testing.T) {
	opts := testOptions()
	opts.Rules[0].LeaseName = func(node string) string { return "kp-" + node }
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	if got := f.node("n1").Annotations[nodev1alpha1.SystemExtensionsAnnotation]; got !=
		`[{"name":"kube-proxy","lease":{"namespace":"node-extension-lease","name":"kp-n1"},"source":"rule/kube-proxy"}]` {
		t.Fatalf("entry %q", got)
	}
	// The Lease's name does not say its node; its event must still queue n1.
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	f.clock.Step(time.Second)
	l := lease("kube-proxy", "n1", "holder", f.clock.Now())
	l.Name = "kp-n1"
	f.putLease(l)
	if key, _ := f.c.queue.Get(); key != "n1" {
		t.Fatalf("queued %q, want n1", key)
	}
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("not ungated by a renewal of its templated Lease")
	}
	// Once the node is forgotten, the Lease no longer points at it.
	if err := f.nodeIndexer().Delete(f.node("n1")); err != nil {
		t.Fatal(err)
	}
	f.c.forgetNode("n1")
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if len(f.c.leaseRefs) != 0 || len(f.c.nodeLeaseRefs) != 0 {
		t.Fatalf("references kept after the node went: %v %v", f.c.leaseRefs, f.c.nodeLeaseRefs)
	}
}

// An excluded node must not keep a condition that says its extensions are not
// ready: nothing evaluates them any more.
func TestExcludedNodeConditionSaysExcluded(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1", withTaint))
	f.sync("n1")
	if c := f.condition("n1"); c.Status != v1.ConditionFalse {
		t.Fatalf("setup: condition %+v, want False", c)
	}
	f.updateNode("n1", func(n *v1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[nodev1alpha1.ExcludeLabel] = "true"
	})
	f.writes()
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("an excluded node must lose the taint")
	}
	if c := f.condition("n1"); c.Status != v1.ConditionUnknown || c.Reason != nodev1alpha1.ReasonNodeExcluded {
		t.Fatalf("condition %+v, want Unknown/%s", c, nodev1alpha1.ReasonNodeExcluded)
	}
	f.writes()
	f.sync("n1")
	f.expectWrites()
}

// A renewal of a Lease that stays ready, on a node that is not gated, changes
// nothing: it does not queue the node. The node's expiry timer still re-evaluates
// it, and a Lease that then stops renewing is detected at its expiry.
func TestQuietRenewalDoesNotQueueButExpiryIsDetected(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	key, _ := f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if f.tainted("n1") {
		t.Fatal("ready node tainted")
	}

	// t=10s: a quiet renewal (the Lease now expires at 60s).
	f.clock.Step(10 * time.Second)
	f.renew("kube-proxy", "n1")
	if got := f.c.queue.Len(); got != 0 {
		t.Fatalf("a renewal of a ready Lease on an ungated node queued %d items", got)
	}

	// t=50s: the timer of the first observation fires; the node is still ready.
	f.clock.Step(40 * time.Second)
	waitForQueue(t, f, 1)
	key, _ = f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if f.tainted("n1") {
		t.Fatal("node tainted although its Lease was renewed 40s ago")
	}
	f.expectWrites()

	// t=60s: no renewal since 10s: expired, tainted.
	f.clock.Step(10 * time.Second)
	waitForQueue(t, f, 1)
	key, _ = f.c.queue.Get()
	f.sync(key)
	f.c.queue.Done(key)
	if !f.tainted("n1") {
		t.Fatal("node not tainted at the expiry of a quietly renewed Lease")
	}

	// While gated, a renewal is not quiet: it queues the node for the ungate.
	f.clock.Step(time.Second)
	f.renew("kube-proxy", "n1")
	if got := f.c.queue.Len(); got != 1 {
		t.Fatalf("a renewal on a gated node queued %d items, want 1", got)
	}
}

// process takes one node from the queue as a worker does (processNext), then
// copies the node the API holds into the cache as an informer would.
func (f *fixture) process(want string) {
	f.t.Helper()
	waitForQueue(f.t, f, 1)
	if !f.c.processNext(f.ctx) {
		f.t.Fatal("the queue was shut down")
	}
	f.refresh(want)
}

func (f *fixture) counts() (evaluations, rechecks float64) {
	return testutil.ToFloat64(f.c.metrics.EvaluationsTotal), testutil.ToFloat64(f.c.metrics.TimerRechecks)
}

// The expiry timer of a steady node whose Leases were all renewed quietly since
// moves to the new expiry without a full evaluation; an expiry that did happen
// is still detected at its instant.
func TestTimerRecheckSkipsEvaluationButDetectsExpiry(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1") // t=0: ready; the Lease expires at 50s
	if f.tainted("n1") {
		t.Fatal("ready node tainted")
	}
	if ev, rc := f.counts(); ev != 1 || rc != 0 {
		t.Fatalf("after the first sync: %v evaluations, %v rechecks; want 1, 0", ev, rc)
	}
	f.client.ClearActions()

	// t=10s: a quiet renewal (expiry now 60s). t=50s: the old timer fires.
	f.clock.Step(10 * time.Second)
	f.renew("kube-proxy", "n1")
	f.clock.Step(40 * time.Second)
	f.process("n1")
	if ev, rc := f.counts(); ev != 1 || rc != 1 {
		t.Fatalf("timer of a quietly renewed node: %v evaluations, %v rechecks; want 1, 1", ev, rc)
	}
	f.expectWrites()

	// t=60s: no renewal since 10s. The moved timer fires at the new expiry,
	// the recheck sees it expired, the full evaluation taints.
	f.clock.Step(10 * time.Second)
	f.process("n1")
	if ev, rc := f.counts(); ev != 2 || rc != 1 {
		t.Fatalf("at the expiry: %v evaluations, %v rechecks; want 2, 1", ev, rc)
	}
	if !f.tainted("n1") {
		t.Fatal("node not tainted at the expiry of a quietly renewed Lease")
	}
	if c := f.condition("n1"); c.Status != v1.ConditionFalse {
		t.Fatalf("condition %s, want False", c.Status)
	}
}

// Anything but the node's own timer (here a node update the controller
// cares about) gets a full evaluation even when the node is steady.
func TestTimerRecheckLeavesOtherCausesToAFullEvaluation(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1")
	f.clock.Step(time.Second)
	f.c.enqueue("n1")
	f.process("n1")
	if ev, rc := f.counts(); ev != 2 || rc != 0 {
		t.Fatalf("after an enqueue: %v evaluations, %v rechecks; want 2, 0", ev, rc)
	}
}

// A gated node is never steady: its timer always evaluates, so that the gate's
// own deadlines (ungate, escalation) are never skipped.
func TestTimerRecheckNeverSkipsAGatedNode(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.process("n1")
	f.clock.Step(50 * time.Second) // expired: gated, eviction clock running
	f.process("n1")
	if !f.tainted("n1") {
		t.Fatal("not tainted at expiry")
	}
	f.c.mu.Lock()
	steady := (f.c.nodes["n1"].steadyLeases != nil)
	f.c.mu.Unlock()
	if steady {
		t.Fatal("a gated node is marked steady")
	}
	f.clock.Step(5 * time.Minute) // the eviction clock's timer
	f.process("n1")
	if ev, rc := f.counts(); ev != 3 || rc != 0 {
		t.Fatalf("timer of a gated node: %v evaluations, %v rechecks; want 3, 0", ev, rc)
	}
}

// When the own view recovers, every Lease counts as observed at that moment:
// a Lease whose renewals the stale watch missed is not expired by the
// recovery, and it gets a full duration of grace from it (docs/controller.md).
func TestOwnViewRecoveryGivesEveryLeaseFullGrace(t *testing.T) {
	opts := testOptions()
	opts.CanaryInterval = 5 * time.Second
	f := newFixture(t, opts, readyNode("n1"))
	f.renew("kube-proxy", "n1")
	f.sync("n1")
	// The watch stalls for a minute: no renewal of anything is observed.
	f.clock.Step(16 * time.Second)
	stale, _ := f.c.canary.check(f.clock.Now())
	if !stale {
		t.Fatal("canary not stale")
	}
	f.c.ownViewChanged(f.ctx, true, f.clock.Now())
	f.clock.Step(44 * time.Second)
	// It catches up: the canary is observed, the view recovers.
	canaryRenewed := func() {
		f.putLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "nodehealth-controller-canary"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-a"), RenewTime: &metav1.MicroTime{Time: f.clock.Now()}}})
	}
	canaryRenewed()
	if stale, changed := f.c.canary.check(f.clock.Now()); stale || !changed {
		t.Fatal("canary did not recover")
	}
	f.c.ownViewChanged(f.ctx, false, f.clock.Now())
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("tainted at the recovery for renewals the stale watch missed")
	}
	// The view stays current (the canary keeps being observed).
	f.clock.Step(49 * time.Second)
	canaryRenewed()
	f.sync("n1")
	if f.tainted("n1") {
		t.Fatal("tainted within a full duration plus grace of the recovery")
	}
	f.clock.Step(time.Second)
	canaryRenewed()
	f.sync("n1")
	if !f.tainted("n1") {
		t.Fatal("not tainted a full duration plus grace after the recovery without a renewal")
	}
}

// Every node is queued again every safetyResync (10 % jitter) on the
// controller's clock, which bounds what a lost timer could cost. The first
// resync comes a period after the start, not at it: the informers' initial
// lists queue every node then.
func TestTheResyncQueuesEveryNodeAPeriodAfterTheStartOnTheControllersClock(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(t0)
	// Queues on the real clock: the fake clock's only timer is then the
	// resync's.
	realClockQueues := func(name string, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	}
	c, err := NewController(ctx, Config{Client: client, Nodes: factory.Core().V1().Nodes(),
		Leases: factory.Coordination().V1().Leases().Informer(), Recorder: record.NewFakeRecorder(10), Clock: clk,
		Options: testOptions(), Queues: realClockQueues})
	if err != nil {
		t.Fatal(err)
	}
	defer c.queue.ShutDown()
	for _, name := range []string{"a", "b"} {
		if err := factory.Core().V1().Nodes().Informer().GetIndexer().Add(readyNode(name)); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.resync(runCtx) }()
	defer func() { cancel(); <-done }()
	until := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("never: %s: %v", what, err)
		}
	}
	armed := func() bool { return clk.Waiters() == 1 }
	until("the resync arms its timer", armed)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("%d nodes queued at the start, want none: the first resync comes a period later", n)
	}
	clk.Step(safetyResync - time.Second)
	if !armed() {
		t.Fatal("the resync's timer fired before its period")
	}
	clk.Step(safetyResync / 10)
	until("both nodes queued once the period and its jitter passed", func() bool { return c.queue.Len() == 2 })
	until("the resync arms its next timer", armed)
}
