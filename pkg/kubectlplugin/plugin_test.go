package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

const ns = nodev1alpha1.DefaultLeaseNamespace

var now = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func node(name, list string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: map[string]string{}}}
	if list != "" {
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = list
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func tainted(effects ...corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, e := range effects {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: e})
		}
	}
}

func condition(status corev1.ConditionStatus, reason, message string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: status, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Minute)),
		})
	}
}

// lease returns an extension Lease renewed age ago (nil age: never renewed).
func lease(name, holder string, age *time.Duration, annotations map[string]string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](40),
		},
	}
	if age != nil {
		l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-*age)}
	}
	return l
}

func ago(d time.Duration) *time.Duration { return &d }

func testOptions(client kubernetes.Interface) (*Options, *bytes.Buffer) {
	out := &bytes.Buffer{}
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: out})
	o.NewClient = func() (kubernetes.Interface, error) { return client, nil }
	o.Clock = clocktesting.NewFakePassiveClock(now)
	return o, out
}

func run(t *testing.T, client kubernetes.Interface, args ...string) (string, error) {
	t.Helper()
	o, out := testOptions(client)
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestEvaluateLeaseGivesEachLeaseItsStateReasonAndClockSkew(t *testing.T) {
	s := evalSettings{leaseNamespace: ns, taintKey: nodev1alpha1.DefaultReadinessTaintKey, renewalGrace: 10 * time.Second, now: now}
	noDuration := lease("x.n1", "pod", ago(45*time.Second), nil)
	noDuration.Spec.LeaseDurationSeconds = nil
	tests := []struct {
		name    string
		lease   *coordinationv1.Lease
		state   string
		reason  string
		message string
		age     *int64
		skew    bool
	}{
		{name: "missing", lease: nil, state: StateLeaseMissing, message: "the Lease does not exist"},
		{name: "ready", lease: lease("x.n1", "pod", ago(5*time.Second), nil), state: StateReady, age: ptr.To[int64](5)},
		{name: "ready until duration plus grace", lease: lease("x.n1", "pod", ago(49*time.Second), nil), state: StateReady, age: ptr.To[int64](49)},
		{name: "expired after duration plus grace", lease: lease("x.n1", "pod", ago(50*time.Second), nil), state: StateLeaseExpired, age: ptr.To[int64](50),
			message: "last renewal 50s ago, more than the lease duration 40s + grace 10s"},
		{name: "default duration", lease: noDuration, state: StateReady, age: ptr.To[int64](45)},
		{name: "never renewed", lease: lease("x.n1", "pod", nil, nil), state: StateNeverRenewed, message: "the Lease has no renewTime"},
		{name: "released with reason", lease: lease("x.n1", "", ago(time.Second),
			map[string]string{nodev1alpha1.ReasonAnnotation: "ProbeFailed", nodev1alpha1.MessageAnnotation: "GET /healthz: 503"}),
			state: StateLeaseReleased, reason: "ProbeFailed", message: "GET /healthz: 503", age: ptr.To[int64](1)},
		{name: "released wins over a fresh renewTime", lease: lease("x.n1", "", ago(0), nil), state: StateLeaseReleased, age: ptr.To[int64](0)},
		{name: "small clock skew is not flagged", lease: lease("x.n1", "pod", ago(-time.Second), nil), state: StateReady, age: ptr.To[int64](0)},
		{name: "clock skew is flagged", lease: lease("x.n1", "pod", ago(-time.Minute), nil), state: StateReady, age: ptr.To[int64](-60), skew: true,
			message: "renewTime is 1m0s ahead of this machine's clock (clock skew)"},
		{name: "stale reason of a ready extension is not shown", lease: lease("x.n1", "pod", ago(time.Second),
			map[string]string{nodev1alpha1.ReasonAnnotation: "ProbeFailed"}), state: StateReady, age: ptr.To[int64](1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var es ExtensionStatus
			evaluateLease(&es, tc.lease, s)
			if es.State != tc.state || es.Reason != tc.reason || es.Message != tc.message || es.ClockSkew != tc.skew {
				t.Errorf("got state=%s reason=%q message=%q skew=%v, want %s %q %q %v", es.State, es.Reason, es.Message, es.ClockSkew, tc.state, tc.reason, tc.message, tc.skew)
			}
			if diff := cmp.Diff(tc.age, es.LastRenewalSeconds); diff != "" {
				t.Errorf("LastRenewalSeconds (-want +got):\n%s", diff)
			}
		})
	}
}

func statusFixture() *fake.Clientset {
	return fake.NewClientset(
		node("n1", `[{"name":"gpu","affectsReadiness":false},{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"csi","lease":{"namespace":"node-extension-lease","name":"ebs.n1"}}]`,
			tainted(corev1.TaintEffectNoSchedule), condition(corev1.ConditionFalse, "ExtensionsNotReady", "A required system extension is not ready.")),
		node("n2", `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`, condition(corev1.ConditionTrue, "ExtensionsReady", "Every required system extension is ready.")),
		node("n3", `{"name":"broken"}`),
		node("n4", ""),
		lease("kube-proxy.n1", "", ago(3*time.Second), map[string]string{nodev1alpha1.ReasonAnnotation: "ProbeFailed"}),
		lease("ebs.n1", "ebs-csi-node-abc", ago(2*time.Minute), nil),
		lease("kube-proxy.n2", "kube-proxy-xyz", ago(4*time.Second), nil),
	)
}

func TestStatusJSON(t *testing.T) {
	out, err := run(t, statusFixture(), "status", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var report StatusReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if report.APIVersion != ReportAPIVersion || report.Kind != "NodeStatusReport" {
		t.Errorf("apiVersion %q, kind %q", report.APIVersion, report.Kind)
	}
	if report.Note != Estimated || !report.Time.Time.Equal(now) {
		t.Errorf("note %q time %s", report.Note, report.Time)
	}
	type row struct{ Node, Ext, Source, Lease, State string }
	var got []row
	gated := map[string]bool{}
	for _, n := range report.Nodes {
		gated[n.Node] = n.Gated
		for _, e := range n.Extensions {
			got = append(got, row{n.Node, e.Name, e.Source, e.Lease, e.State})
		}
	}
	want := []row{
		{"n1", "csi", "manual", "node-extension-lease/ebs.n1", StateLeaseExpired},
		{"n1", "gpu", "manual", "node-extension-lease/gpu.n1", StateLeaseMissing},
		{"n1", "kube-proxy", "rule/kube-proxy", "node-extension-lease/kube-proxy.n1", StateLeaseReleased},
		{"n2", "kube-proxy", "rule/kube-proxy", "node-extension-lease/kube-proxy.n2", StateReady},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("extensions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"n1": true, "n2": false, "n3": false, "n4": false}, gated); diff != "" {
		t.Errorf("gated (-want +got):\n%s", diff)
	}
	if report.Nodes[2].ListError == "" || !strings.Contains(report.Nodes[2].ListError, "JSON array") {
		t.Errorf("n3 ListError = %q, want a parse error", report.Nodes[2].ListError)
	}
}

func TestStatusPrintsATableOfExtensionsPerNamedNode(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{
			name: "default",
			args: []string{"status", "n1", "n3"},
			want: []string{
				"node/n1: gated (taint nodehealth.io/not-ready:NoSchedule); SystemExtensionsReady=False (ExtensionsNotReady)",
				"EXTENSION    AFFECTS READINESS   SOURCE            LEASE           HOLDER             LAST RENEWAL   STATE           REASON",
				"csi          true                manual            ebs.n1          ebs-csi-node-abc   2m             LeaseExpired    <none>",
				"gpu          false               manual            gpu.n1          <none>             <none>         LeaseMissing    <none>",
				"kube-proxy   true                rule/kube-proxy   kube-proxy.n1   <none>             3s             LeaseReleased   ProbeFailed",
				"node/n3: not gated; no SystemExtensionsReady condition\n  extension list cannot be parsed: annotation nodehealth.io/system-extensions must hold a JSON array",
			},
			not: []string{"n2", "MESSAGE"},
		},
		{
			name: "wide",
			args: []string{"status", "n2", "-o", "wide"},
			want: []string{
				"LEASE DURATION   RENEW TIME             MESSAGE",
				"node-extension-lease/kube-proxy.n2   kube-proxy-xyz   4s             Ready   <none>   40s              2026-07-01T11:59:56Z   <none>",
			},
		},
		{
			name: "node without extensions",
			args: []string{"status", "n4"},
			want: []string{"node/n4: not gated; no SystemExtensionsReady condition\n  no system extensions\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, statusFixture(), tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output contains %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestStatusRefusesAnUnknownNodeAndAnUnsupportedOutput(t *testing.T) {
	if _, err := run(t, statusFixture(), "status", "nope"); !apierrors.IsNotFound(err) {
		t.Errorf("unknown node: got %v, want NotFound", err)
	}
	if _, err := run(t, statusFixture(), "status", "-o", "name"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("-o name: got %v", err)
	}
}

func TestExplainSaysWhyANodeIsOrIsNotGated(t *testing.T) {
	skewed := lease("kube-proxy.n5", "kube-proxy-s", ago(-time.Minute), nil)
	tests := []struct {
		name string
		objs []runtime.Object
		node string
		want []string
	}{
		{
			name: "gated by a released and a missing lease",
			node: "n1",
			want: []string{
				"Node n1 is gated: it carries the readiness taint nodehealth.io/not-ready:NoSchedule",
				"SystemExtensionsReady is False since 3m ago, reason ExtensionsNotReady: a required extension stopped being ready",
				"It requires 2 extensions that affect readiness: csi (registered by hand), kube-proxy (from rule kube-proxy).",
				"1 more extension is tracked but never gates the node: gpu (registered by hand).",
				"kube-proxy (from rule kube-proxy) is not ready: its Lease node-extension-lease/kube-proxy.n1 was released with reason ProbeFailed",
				"gpu (registered by hand) is not ready: its Lease node-extension-lease/gpu.n1 does not exist",
				"; it does not affect readiness.",
				"csi (registered by hand) is not ready: its Lease node-extension-lease/ebs.n1 was last renewed 2m ago by ebs-csi-node-abc, longer than its duration 40s plus the controller's grace 10s; this keeps the node gated.",
			},
		},
		{
			name: "ready",
			node: "n2",
			want: []string{
				"Node n2 is not gated: it does not carry the readiness taint nodehealth.io/not-ready.",
				"reason ExtensionsReady: every required extension is ready.",
				"Every extension looks ready from here (last renewals: kube-proxy 4s ago).",
			},
		},
		{
			name: "unparsable list",
			node: "n3",
			want: []string{
				"cannot be parsed",
				"The controller never rewrites a list it cannot parse",
				"kubectl annotate node n3 nodehealth.io/system-extensions-",
			},
		},
		{
			name: "no extensions",
			node: "n4",
			want: []string{"The node lists no system extensions, so the controller never gates it"},
		},
		{
			name: "gated, all ready, clock skew, escalated",
			objs: []runtime.Object{
				node("n5", `[{"name":"kube-proxy"}]`, tainted(corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute),
					condition(corev1.ConditionFalse, "NodeRebooted", "")),
				skewed,
			},
			node: "n5",
			want: []string{
				"nodehealth.io/not-ready:NoSchedule and nodehealth.io/not-ready:NoExecute",
				"The NoExecute variant is on as well",
				"the node rebooted",
				"Every extension looks ready from here (last renewals: kube-proxy -60s ago).",
				"A gated node is ungated once the controller has observed a renewal",
				"Some renewTime is ahead of this machine's clock",
			},
		},
		{
			name: "leaving",
			objs: []runtime.Object{node("n7", `[{"name":"kube-proxy"}]`, tainted(corev1.TaintEffectNoSchedule),
				condition(corev1.ConditionFalse, nodev1alpha1.ReasonNodeLeaving, "The node is leaving (taint ToBeDeletedByClusterAutoscaler): it is not counted in the blast radius and never escalated.")),
				lease("kube-proxy.n7", "", ago(20*time.Second), map[string]string{nodev1alpha1.ReasonAnnotation: "ProbeFailed"})},
			node: "n7",
			want: []string{
				"reason NodeLeaving: the node is leaving the cluster or under someone else's maintenance",
				"never escalated to eviction, and counted on neither side of the blast radius",
				`Its message: "The node is leaving (taint ToBeDeletedByClusterAutoscaler)`,
			},
		},
		{
			name: "tainted before the controller saw it",
			objs: []runtime.Object{node("n6", `[{"name":"kube-proxy"}]`, tainted(corev1.TaintEffectNoSchedule))},
			node: "n6",
			want: []string{"the taint was probably placed at creation", "kube-proxy (registered by hand) is not ready: its Lease node-extension-lease/kube-proxy.n6 does not exist"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := statusFixture()
			for _, o := range tc.objs {
				if err := c.Tracker().Add(o); err != nil {
					t.Fatal(err)
				}
			}
			out, err := run(t, c, "explain", tc.node)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// apiServer makes a fake clientset behave like the API server for merge
// patches of Nodes: resourceVersion is bumped on every write, and a patch
// carrying a stale metadata.resourceVersion is rejected with 409 Conflict.
// The fake's own object tracker enforces neither.
type apiServer struct {
	*fake.Clientset
	mu sync.Mutex
	// beforePatch runs before a patch is applied, e.g. to simulate a
	// concurrent writer.
	beforePatch func(attempt int)
	patches     []string
}

func newAPIServer(objs ...runtime.Object) *apiServer {
	s := &apiServer{Clientset: fake.NewClientset(objs...)}
	s.PrependReactor("patch", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p := action.(clienttesting.PatchAction)
		s.patches = append(s.patches, string(p.GetPatch()))
		if s.beforePatch != nil {
			s.beforePatch(len(s.patches))
		}
		var patch struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		n, err := s.getNode(p.GetName())
		if err != nil {
			return true, nil, err
		}
		if patch.Metadata.ResourceVersion != n.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, n.Name, errors.New("the object has been modified"))
		}
		// Apply it as the API server does (a null removes a key, or the
		// whole map).
		current, err := json.Marshal(n)
		if err != nil {
			return true, nil, err
		}
		merged, err := jsonpatch.MergePatch(current, p.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		n = &corev1.Node{}
		if err := json.Unmarshal(merged, n); err != nil {
			return true, nil, err
		}
		return true, n, s.write(n)
	})
	return s
}

func (s *apiServer) getNode(name string) (*corev1.Node, error) {
	obj, err := s.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", name)
	if err != nil {
		return nil, err
	}
	n := obj.(*corev1.Node).DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	return n, nil
}

// write stores n with the next resourceVersion.
func (s *apiServer) write(n *corev1.Node) error {
	rv, _ := strconv.Atoi(n.ResourceVersion)
	n.ResourceVersion = strconv.Itoa(rv + 1)
	return s.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, n, "")
}

func (s *apiServer) annotation(t *testing.T, name string) string {
	t.Helper()
	n, err := s.getNode(name)
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
}

func TestRegisterAndUnregister(t *testing.T) {
	const (
		manual  = `[{"name":"kube-proxy"}]`
		withGPU = `[{"name":"gpu","affectsReadiness":false},{"name":"kube-proxy"}]`
		rule    = `[{"name":"kube-proxy","source":"rule/kube-proxy"}]`
		lease   = `[{"name":"agent","source":"lease"}]`
		broken  = `[{"name":"kube-proxy","bogus":true}]`
	)
	tests := []struct {
		name    string
		list    string
		args    []string
		want    string // the annotation afterwards ("" = none)
		out     string
		err     string
		patched bool
	}{
		{name: "register into an empty list", list: "", args: []string{"register", "n1", "kube-proxy"},
			want: manual, out: `node/n1: extension "kube-proxy" registered`, patched: true},
		{name: "register keeps other entries, sorted", list: manual, args: []string{"register", "n1", "gpu", "--affects-readiness=false"},
			want: withGPU, out: `node/n1: extension "gpu" registered`, patched: true},
		{name: "register is idempotent", list: withGPU, args: []string{"register", "n1", "gpu", "--affects-readiness=false"},
			want: withGPU, out: `node/n1: extension "gpu" already registered (no change)`},
		{name: "register with the default lease spelled out is idempotent", list: manual, args: []string{"register", "n1", "kube-proxy", "--lease", "node-extension-lease/kube-proxy.n1"},
			want: manual, out: "already registered (no change)"},
		{name: "register updates a manual entry", list: withGPU, args: []string{"register", "n1", "gpu"},
			want: `[{"name":"gpu"},{"name":"kube-proxy"}]`, out: `node/n1: extension "gpu" updated`, patched: true},
		{name: "register with a lease name", list: "", args: []string{"register", "n1", "cni", "--lease", "cilium.n1"},
			want: `[{"name":"cni","lease":{"namespace":"node-extension-lease","name":"cilium.n1"}}]`, out: "registered", patched: true},
		{name: "register refuses a lease in another namespace", list: "", args: []string{"register", "n1", "cni", "--lease", "kube-system/cilium.n1"},
			err: "the Lease must be in the extension namespace node-extension-lease"},
		{name: "register refuses an invalid extension name", list: "", args: []string{"register", "n1", "kube.proxy"},
			err: `invalid extension name "kube.proxy"`},
		{name: "register refuses a rule entry", list: rule, args: []string{"register", "n1", "kube-proxy"},
			want: rule, err: `refused: node/n1: extension "kube-proxy" is managed by the controller's rule "kube-proxy" (source rule/kube-proxy); use --force`},
		{name: "register --force replaces a rule entry", list: rule, args: []string{"register", "n1", "kube-proxy", "--force"},
			want: manual, out: "registered by hand, replacing the entry managed by the controller's rule", patched: true},
		{name: "register refuses a list it cannot parse", list: broken, args: []string{"register", "n1", "gpu"},
			want: broken, err: `refused: node n1: annotation nodehealth.io/system-extensions: unknown field "[0].bogus"; refusing to rewrite`},
		{name: "register --force still refuses a list it cannot parse", list: broken, args: []string{"register", "n1", "gpu", "--force"},
			want: broken, err: "refusing to rewrite an annotation that cannot be parsed"},
		{name: "register on a missing node", args: []string{"register", "nope", "gpu"}, err: "node nope not found"},
		{name: "unregister", list: withGPU, args: []string{"unregister", "n1", "gpu"},
			want: manual, out: `node/n1: extension "gpu" unregistered`, patched: true},
		{name: "unregister the last entry removes the annotation", list: manual, args: []string{"unregister", "n1", "kube-proxy"},
			want: "", out: "unregistered", patched: true},
		{name: "unregister is idempotent", list: manual, args: []string{"unregister", "n1", "gpu"},
			want: manual, out: `node/n1: extension "gpu" not registered (no change)`},
		{name: "unregister refuses a rule entry", list: rule, args: []string{"unregister", "n1", "kube-proxy"},
			want: rule, err: `change rule "kube-proxy" in the controller's configuration or the node's labels, or use --force`},
		{name: "unregister refuses a lease entry", list: lease, args: []string{"unregister", "n1", "agent"},
			want: lease, err: "self-registered by its Lease node-extension-lease/agent.n1 (source lease), and the controller would add it back; delete the Lease node-extension-lease/agent.n1 or remove its label nodehealth.io/register"},
		{name: "unregister --force removes a lease entry", list: lease, args: []string{"unregister", "n1", "agent", "--force"},
			want: "", out: "the controller adds it back unless you delete the Lease", patched: true},
		{name: "unregister refuses a list it cannot parse", list: broken, args: []string{"unregister", "n1", "kube-proxy"},
			want: broken, err: "refusing to rewrite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(node("n1", tc.list))
			out, err := run(t, s, tc.args...)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error = %v, want one containing %q", err, tc.err)
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("output %q lacks %q", out, tc.out)
			}
			if tc.err != "" && strings.Contains(tc.err, "refus") && !errors.Is(err, ErrRefused) {
				t.Errorf("error %v does not wrap ErrRefused", err)
			}
			if tc.args[1] == "n1" {
				if got := s.annotation(t, "n1"); got != tc.want {
					t.Errorf("annotation = %s, want %s", got, tc.want)
				}
			}
			if got := len(s.patches) > 0; got != tc.patched {
				t.Errorf("patched = %v, want %v (patches: %v)", got, tc.patched, s.patches)
			}
			for _, p := range s.patches {
				if !strings.Contains(p, `"resourceVersion":"1"`) {
					t.Errorf("patch %s does not carry the resourceVersion read", p)
				}
			}
		})
	}
}

// A writer that changes the node between our GET and our patch must not lose
// its entry: the patch conflicts, and the retry starts from a fresh GET.
func TestRegisterRetriesOnConflict(t *testing.T) {
	s := newAPIServer(node("n1", `[{"name":"kube-proxy"}]`))
	s.beforePatch = func(attempt int) {
		if attempt != 1 {
			return
		}
		n, err := s.getNode("n1")
		if err != nil {
			t.Error(err)
			return
		}
		n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = `[{"name":"csi"},{"name":"kube-proxy"}]`
		if err := s.write(n); err != nil {
			t.Error(err)
		}
	}
	out, err := run(t, s, "register", "n1", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"csi"},{"name":"gpu"},{"name":"kube-proxy"}]`; s.annotation(t, "n1") != want {
		t.Errorf("annotation = %s, want %s", s.annotation(t, "n1"), want)
	}
	if len(s.patches) != 2 || !strings.Contains(s.patches[1], `"resourceVersion":"2"`) {
		t.Errorf("want a second patch from a fresh read (resourceVersion 2), got %v", s.patches)
	}
	if !strings.Contains(out, "registered") {
		t.Errorf("output %q", out)
	}
}

// The retry is bounded: a node that changes before every patch is given up
// with an error that says so.
func TestRegisterGivesUpAfterBoundedConflicts(t *testing.T) {
	s := newAPIServer(node("n1", ""))
	s.beforePatch = func(int) {
		n, err := s.getNode("n1")
		if err == nil {
			err = s.write(n)
		}
		if err != nil {
			t.Error(err)
		}
	}
	_, err := run(t, s, "register", "n1", "gpu")
	if err == nil || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), fmt.Sprintf("gave up after %d attempts", conflictBackoff.Steps)) {
		t.Fatalf("got %v, want a conflict after %d attempts", err, conflictBackoff.Steps)
	}
}

// Many concurrent registers on one node: every entry survives.
func TestConcurrentRegistersOnOneNodeKeepEveryEntry(t *testing.T) {
	s := newAPIServer(node("n1", ""))
	const writers = 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := run(t, s, "register", "n1", fmt.Sprintf("ext-%d", i))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(s.annotation(t, "n1"), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != writers {
		t.Errorf("got %d entries, want %d: %v", len(list), writers, list)
	}
}
