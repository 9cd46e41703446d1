package nodeutil

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

var nodesResource = v1.SchemeGroupVersion.WithResource("nodes")

// apiServer makes a fake clientset apply Node merge patches as the API
// server does: a patch carrying a stale metadata.resourceVersion is rejected
// with 409, and every write bumps the resourceVersion. beforePatch runs
// first, to play a concurrent writer.
type apiServer struct {
	*fake.Clientset
	mu          sync.Mutex
	beforePatch func(attempt int)
	patches     []string
}

func newAPIServer(nodes ...*v1.Node) *apiServer {
	s := &apiServer{Clientset: fake.NewClientset()}
	for _, n := range nodes {
		if err := s.Tracker().Add(n); err != nil {
			panic(err)
		}
	}
	s.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p := action.(core.PatchAction)
		s.patches = append(s.patches, string(p.GetPatch()))
		if s.beforePatch != nil {
			s.beforePatch(len(s.patches))
		}
		cur := s.node(p.GetName())
		var meta struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &meta); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if meta.Metadata.ResourceVersion != "" && meta.Metadata.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(nodesResource.GroupResource(), cur.Name, errors.New("the object has been modified"))
		}
		curJSON, _ := json.Marshal(cur)
		merged, err := jsonpatch.MergePatch(curJSON, p.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		next := &v1.Node{}
		if err := json.Unmarshal(merged, next); err != nil {
			return true, nil, err
		}
		next.Status = cur.Status
		s.write(next)
		return true, next, nil
	})
	return s
}

func (s *apiServer) node(name string) *v1.Node {
	obj, err := s.Tracker().Get(nodesResource, "", name)
	if err != nil {
		panic(err)
	}
	return obj.(*v1.Node).DeepCopy()
}

// write stores n with the next resourceVersion (a writer other than the code
// under test).
func (s *apiServer) write(n *v1.Node) {
	rv, _ := strconv.Atoi(n.ResourceVersion)
	n.ResourceVersion = strconv.Itoa(rv + 1)
	if err := s.Tracker().Update(nodesResource, n, ""); err != nil {
		panic(err)
	}
}

func (s *apiServer) verbs() []string {
	var out []string
	for _, a := range s.Actions() {
		out = append(out, a.GetVerb())
	}
	s.ClearActions()
	return out
}

func testNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{"keep": "x", "drop": "y"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "mine", Effect: v1.TaintEffectNoSchedule}, {Key: "cordon", Effect: v1.TaintEffectNoSchedule}}},
	}
}

func taintKeys(n *v1.Node) string {
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key+":"+string(t.Effect))
	}
	return strings.Join(keys, ",")
}

// A writer that adds a taint between PatchNode's read and its patch: the
// patch conflicts, mutate runs again on the fresh Node, and neither write is
// lost (docs/controller.md: other taints are never lost).
func TestPatchNodeRecomputesFromAFreshNodeOnConflict(t *testing.T) {
	s := newAPIServer(testNode())
	s.beforePatch = func(attempt int) {
		if attempt == 1 {
			n := s.node("n1")
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "autoscaler", Effect: v1.TaintEffectNoSchedule})
			s.write(n)
		}
	}
	var seen []string
	got, patched, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "n1", PatchOptions{FieldManager: "test"}, func(n *v1.Node) error {
		seen = append(seen, n.ResourceVersion+":"+taintKeys(n))
		n.Spec.Taints, _ = RemoveTaints(n.Spec.Taints, "mine")
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "mine", Effect: v1.TaintEffectNoExecute})
		delete(n.Annotations, "drop")
		return nil
	})
	if err != nil || !patched {
		t.Fatalf("PatchNode: patched %v, %v", patched, err)
	}
	wantSeen := []string{"1:mine:NoSchedule,cordon:NoSchedule", "2:mine:NoSchedule,cordon:NoSchedule,autoscaler:NoSchedule"}
	if diff := cmp.Diff(wantSeen, seen); diff != "" {
		t.Errorf("mutate saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"get", "patch", "get", "patch"}, s.verbs()); diff != "" {
		t.Errorf("API verbs (-want +got):\n%s", diff)
	}
	if want := "cordon:NoSchedule,autoscaler:NoSchedule,mine:NoExecute"; taintKeys(got) != want || taintKeys(s.node("n1")) != want {
		t.Errorf("taints %q (stored %q), want %q", taintKeys(got), taintKeys(s.node("n1")), want)
	}
	if diff := cmp.Diff(map[string]string{"keep": "x"}, s.node("n1").Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	for _, p := range s.patches {
		if !strings.Contains(p, `"resourceVersion"`) {
			t.Errorf("patch %s does not carry the resourceVersion read", p)
		}
	}
}

// A writer holding an informer's copy (Start) patches without reading; a
// stale copy costs one 409 and a GET; a dry run reads and writes nothing;
// OnPatch sees every patch sent and whether PatchNode tries again.
func TestPatchNodeFromAStartingCopy(t *testing.T) {
	stale := testNode()
	stale.ResourceVersion = "0"
	tests := []struct {
		name        string
		start       *v1.Node
		dryRun      bool
		steps       int
		concurrent  bool // another writer changes the Node before every patch
		wantVerbs   []string
		wantPatched bool
		wantOnPatch []string
		wantErr     bool
	}{
		{name: "a current copy costs one patch", start: testNode(),
			wantVerbs: []string{"patch"}, wantPatched: true, wantOnPatch: []string{"written"}},
		{name: "a stale copy costs a 409, a GET and a patch", start: stale,
			wantVerbs: []string{"patch", "get", "patch"}, wantPatched: true, wantOnPatch: []string{"conflict, retrying", "written"}},
		{name: "without a copy the Node is read first", start: nil,
			wantVerbs: []string{"get", "patch"}, wantPatched: true, wantOnPatch: []string{"written"}},
		{name: "a dry run on a copy sends nothing", start: testNode(), dryRun: true,
			wantVerbs: nil, wantPatched: false, wantOnPatch: nil},
		{name: "a dry run without a copy only reads", start: nil, dryRun: true,
			wantVerbs: []string{"get"}, wantPatched: false, wantOnPatch: nil},
		{name: "the last conflict is not retried", start: testNode(), steps: 2, concurrent: true,
			wantVerbs: []string{"patch", "get", "patch"}, wantOnPatch: []string{"conflict, retrying", "conflict, giving up"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(testNode())
			if tc.concurrent {
				s.beforePatch = func(int) { s.write(s.node("n1")) }
			}
			var onPatch []string
			opts := PatchOptions{Start: tc.start, DryRun: tc.dryRun, Backoff: wait.Backoff{Steps: tc.steps},
				OnPatch: func(err error, retrying bool) {
					switch {
					case err == nil:
						onPatch = append(onPatch, "written")
					case retrying:
						onPatch = append(onPatch, "conflict, retrying")
					default:
						onPatch = append(onPatch, "conflict, giving up")
					}
				}}
			got, patched, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "n1", opts, func(n *v1.Node) error {
				n.Annotations["new"] = "v"
				return nil
			})
			if (err != nil) != tc.wantErr || patched != tc.wantPatched {
				t.Fatalf("PatchNode: patched %v, err %v; want patched %v, error %v", patched, err, tc.wantPatched, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantVerbs, s.verbs()); diff != "" {
				t.Errorf("API verbs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOnPatch, onPatch); diff != "" {
				t.Errorf("OnPatch calls (-want +got):\n%s", diff)
			}
			if tc.dryRun {
				if got.Annotations["new"] != "v" {
					t.Errorf("a dry run returns the Node as it would be written; annotations %v", got.Annotations)
				}
				if _, ok := s.node("n1").Annotations["new"]; ok {
					t.Error("a dry run wrote the Node")
				}
			}
		})
	}
}

func TestPatchNodeWithoutChangeDoesNotWrite(t *testing.T) {
	s := newAPIServer(testNode())
	_, patched, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "n1", PatchOptions{}, func(n *v1.Node) error {
		n.Status.Phase = v1.NodeRunning // status is not this patch's business
		return nil
	})
	if err != nil || patched {
		t.Fatalf("patched %v, %v; want no write", patched, err)
	}
	if diff := cmp.Diff([]string{"get"}, s.verbs()); diff != "" {
		t.Errorf("API verbs (-want +got):\n%s", diff)
	}
}

func TestPatchNodeGivesUpOnEndlessConflicts(t *testing.T) {
	s := newAPIServer(testNode())
	s.beforePatch = func(int) { s.write(s.node("n1")) }
	calls := 0
	_, _, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "n1",
		PatchOptions{Backoff: wait.Backoff{Steps: 3}}, func(n *v1.Node) error {
			calls++
			n.Annotations["new"] = "v"
			return nil
		})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "node n1 kept changing; gave up after 3 attempts") {
		t.Fatalf("err = %v, want the conflict after 3 attempts", err)
	}
	if calls != 3 {
		t.Errorf("mutate ran %d times, want 3", calls)
	}
}

func TestPatchNodeMutateErrorAborts(t *testing.T) {
	s := newAPIServer(testNode())
	refused := errors.New("refused")
	_, patched, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "n1", PatchOptions{}, func(*v1.Node) error { return refused })
	if !errors.Is(err, refused) || patched {
		t.Fatalf("patched %v, err %v; want the mutate error, no write", patched, err)
	}
	if diff := cmp.Diff([]string{"get"}, s.verbs()); diff != "" {
		t.Errorf("API verbs (-want +got):\n%s", diff)
	}
	if _, _, err := PatchNode(context.Background(), s.CoreV1().Nodes(), "gone", PatchOptions{}, func(*v1.Node) error { return nil }); !apierrors.IsNotFound(err) {
		t.Errorf("missing node: err = %v, want NotFound", err)
	}
}

func TestTheMergePatchCarriesOnlyMetadataAndSpecChangesAndTaintsWhole(t *testing.T) {
	old := testNode()
	tests := []struct {
		name   string
		mutate func(*v1.Node)
		want   string
	}{
		{"nothing", func(*v1.Node) {}, ""},
		{"status only", func(n *v1.Node) { n.Status.Phase = v1.NodeRunning }, ""},
		{"remove an annotation", func(n *v1.Node) { delete(n.Annotations, "drop") },
			`{"metadata":{"annotations":{"drop":null},"resourceVersion":"1"}}`},
		{"taints are sent whole", func(n *v1.Node) { n.Spec.Taints = n.Spec.Taints[1:] },
			`{"metadata":{"resourceVersion":"1"},"spec":{"taints":[{"effect":"NoSchedule","key":"cordon"}]}}`},
		{"removing the last taint sends no taints", func(n *v1.Node) { n.Spec.Taints, _ = RemoveTaints(nil, "x") },
			`{"metadata":{"resourceVersion":"1"},"spec":{"taints":null}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := old.DeepCopy()
			tc.mutate(next)
			got, err := MergePatch(old, next)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTaintAndConditionChecks(t *testing.T) {
	n := testNode()
	n.Status.Conditions = []v1.NodeCondition{{Type: "SystemExtensionsReady", Status: v1.ConditionFalse, Reason: "ExtensionsNotReady"}}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"taint with effect", HasTaint(n, "mine", v1.TaintEffectNoSchedule), true},
		{"taint, other effect", HasTaint(n, "mine", v1.TaintEffectNoExecute), false},
		{"taint, any effect", HasTaint(n, "cordon", ""), true},
		{"missing taint", HasTaint(n, "absent", ""), false},
		{"condition, status and reason", HasCondition(n, "SystemExtensionsReady", v1.ConditionFalse, "ExtensionsNotReady"), true},
		{"condition, any status and reason", HasCondition(n, "SystemExtensionsReady", "", ""), true},
		{"condition, other status", HasCondition(n, "SystemExtensionsReady", v1.ConditionTrue, ""), false},
		{"condition, other reason", HasCondition(n, "SystemExtensionsReady", "", "ExtensionsReady"), false},
		{"missing condition", HasCondition(n, v1.NodeReady, "", ""), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "mine", Effect: v1.TaintEffectNoExecute})
	for key, want := range map[string]int{"mine": 2, "cordon": 1, "absent": 0} {
		if got := CountTaints(n, key); got != want {
			t.Errorf("CountTaints(%s) = %d, want %d", key, got, want)
		}
	}
	if taints, removed := RemoveTaints(n.Spec.Taints, "mine"); removed != 2 || len(taints) != 1 || taints[0].Key != "cordon" {
		t.Errorf("RemoveTaints = %v, %d", taints, removed)
	}
}

func TestConditionChangedIgnoresHeartbeatsAndMessages(t *testing.T) {
	with := func(status v1.ConditionStatus, reason, message string) *v1.Node {
		n := testNode()
		n.Status.Conditions = []v1.NodeCondition{{Type: "SystemExtensionsReady", Status: status, Reason: reason, Message: message,
			LastHeartbeatTime: metav1.Now()}}
		return n
	}
	tests := []struct {
		name string
		a, b *v1.Node
		want bool
	}{
		{"neither has it", testNode(), testNode(), false},
		{"appeared", testNode(), with(v1.ConditionTrue, "ExtensionsReady", ""), true},
		{"disappeared", with(v1.ConditionTrue, "ExtensionsReady", ""), testNode(), true},
		{"status changed", with(v1.ConditionTrue, "ExtensionsReady", ""), with(v1.ConditionFalse, "ExtensionsReady", ""), true},
		{"reason changed", with(v1.ConditionFalse, "NodeRebooted", ""), with(v1.ConditionFalse, "ExtensionsNotReady", ""), true},
		{"only the message and heartbeat changed", with(v1.ConditionFalse, "NodeRebooted", "a"), with(v1.ConditionFalse, "NodeRebooted", "b"), false},
	}
	for _, tc := range tests {
		if got := ConditionChanged(tc.a, tc.b, "SystemExtensionsReady"); got != tc.want {
			t.Errorf("%s: ConditionChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
