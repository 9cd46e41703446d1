package nodehealth

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// The fuzz targets feed the controller's Lease and Node event handlers what
// anyone allowed to write those objects could send, through the informer
// transforms as in production, and check that nothing panics, that the
// transforms bound what is cached, and that a node whose input cannot be
// judged keeps its gate state. hack/fuzz.sh runs them briefly in make test;
// their seeds run in every go test.

// fuzzLease builds a Lease from fuzzed fields; hasX false leaves X unset.
func fuzzLease(name, holder string, hasHolder bool, duration int32, hasDuration bool, renewUnix int64, hasRenew bool,
	reason, message string, register bool) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name,
		Annotations: map[string]string{nodev1alpha1.ReasonAnnotation: reason, nodev1alpha1.MessageAnnotation: message, "other": message}}}
	if register {
		l.Labels = map[string]string{nodev1alpha1.RegisterLabel: "true", nodev1alpha1.AffectsReadinessLabel: reason}
	}
	if hasHolder {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	if hasDuration {
		l.Spec.LeaseDurationSeconds = ptr.To(duration)
	}
	if hasRenew {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(renewUnix%(1<<40), 0)}
	}
	return l
}

func FuzzLeaseEvents(f *testing.F) {
	f.Add("kube-proxy.n1", "holder", true, int32(40), true, t0.Unix(), true, "", "", false, "other-holder", int64(5))
	f.Add("kube-proxy.n1", "", true, int32(0), true, int64(0), true, "Updating", "reboot", false, "holder", int64(1))
	f.Add("kube-proxy.n1", "h", true, int32(-5), true, int64(-1), true, "ProbeFailed", strings.Repeat("m", 5000), true, "", int64(100))
	f.Add("x.n1", "h", true, int32(40), false, int64(4102444800), true, "", "", true, "h2", int64(0))
	f.Add("no-dot", "h", true, int32(40), true, int64(0), false, "", "", true, "", int64(0))
	f.Add("UPPER.n1", "h", false, int32(1), true, int64(1), true, "", "", false, "h", int64(1))
	f.Add("kube-proxy.b.n1", "h", true, int32(1<<30), true, int64(1), true, "", "", true, "h", int64(1))
	f.Fuzz(func(t *testing.T, name, holder string, hasHolder bool, duration int32, hasDuration bool, renewUnix int64, hasRenew bool,
		reason, message string, register bool, nextHolder string, advance int64) {
		f := newFixture(t, testOptions(), readyNode("n1"), readyNode("b.n1"))
		first := fuzzLease(name, holder, hasHolder, duration, hasDuration, renewUnix, hasRenew, reason, message, register)
		obj, err := TransformLease(first)
		if err != nil {
			t.Fatal(err)
		}
		first = obj.(*coordinationv1.Lease)
		checkLeaseBounded(t, first)
		f.putLease(first)
		// A second event: another holder, another renewTime, after a
		// moment (or a deletion).
		f.clock.Step(time.Duration(advance%3600) * time.Second)
		next := first.DeepCopy()
		next.Spec.HolderIdentity = ptr.To(nextHolder)
		next.Spec.RenewTime = &metav1.MicroTime{Time: f.clock.Now()}
		obj, _ = TransformLease(next)
		if advance%7 == 0 {
			f.deleteLease(first)
		} else {
			f.putLease(obj.(*coordinationv1.Lease))
		}
		for _, n := range []string{"n1", "b.n1"} {
			if err := f.c.syncNode(f.ctx, n); err != nil {
				t.Fatalf("sync %s: %v", n, err)
			}
			st := f.c.nodes[n]
			if st != nil && len(st.last.extReady) > nodev1alpha1.MaxSystemExtensions+len(f.c.opts.Rules) {
				t.Fatalf("node %s holds %d extensions", n, len(st.last.extReady))
			}
		}
		for _, e := range f.events() {
			if len(e) > 4*maxMessageLength {
				t.Fatalf("an Event of %d bytes", len(e))
			}
		}
	})
}

func FuzzNodeEvents(f *testing.F) {
	f.Add("n1", `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`, `{"bootID":"boot-1","uid":"uid-n1"}`, "boot-1", "zone-a", true, "ready")
	f.Add("n1", `[{"name":"kube-proxy","oops":1}]`, "", "", "", false, "")
	f.Add("b.n1", `[{"name":"a"},{"name":"a"}]`, `{"uid":""}`, "boot-2", "z", true, "x")
	f.Add("n1", strings.Repeat(" ", 40000)+"[]", strings.Repeat("b", 5000), "b", "", false, "")
	f.Add("n1", `[{"name":"x","lease":{"namespace":"elsewhere","name":"y"}}]`, `null`, "", "", true, "")
	f.Fuzz(func(t *testing.T, name, list, boot, bootID, zone string, tainted bool, nextBootID string) {
		if name == "" {
			return
		}
		node := newNode(name)
		node.Annotations = map[string]string{nodev1alpha1.SystemExtensionsAnnotation: list, nodev1alpha1.BootAnnotation: boot, "junk": list}
		node.Status.NodeInfo.BootID = bootID
		node.Labels[v1.LabelTopologyZone] = zone
		if tainted {
			withTaint(node)
		}
		obj, err := nodeutil.TransformNode(node)
		if err != nil {
			t.Fatal(err)
		}
		node = obj.(*v1.Node)
		if len(node.Annotations) > 2 || len(node.Annotations[nodev1alpha1.SystemExtensionsAnnotation]) > nodev1alpha1.MaxSystemExtensionsAnnotationBytes ||
			len(node.Annotations[nodev1alpha1.BootAnnotation]) > nodeutil.MaxBootRecordLength {
			t.Fatalf("transform kept %d annotations", len(node.Annotations))
		}
		f := newFixture(t, testOptions(), node)
		f.c.leaseChanged(nil, lease("kube-proxy", name, "holder", t0))
		_, listErr := decodeCachedList(node, testNS)
		if err := f.c.syncNode(f.ctx, name); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if listErr != nil {
			// Cannot be judged: no Node write but the condition, and the
			// gate state is kept.
			for _, a := range f.writes() {
				if a.GetSubresource() != "status" {
					t.Fatalf("wrote %s %s to a node whose list is invalid (%v)", a.GetVerb(), a.GetResource().Resource, listErr)
				}
			}
			if f.tainted(name) != tainted {
				t.Fatalf("gate state changed from tainted=%v on an invalid list", tainted)
			}
		}
		// An update event: a reboot.
		f.refresh(name)
		f.updateNode(name, func(n *v1.Node) { n.Status.NodeInfo.BootID = nextBootID })
		if err := f.c.syncNode(f.ctx, name); err != nil {
			t.Fatalf("sync after the update: %v", err)
		}
	})
}
