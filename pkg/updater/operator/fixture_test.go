package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned/fake"
	"nodehealth.io/client-go/informers/externalversions"
)

const (
	idle      = updatesv1alpha1.StateIdle
	staged    = updatesv1alpha1.StateStagedAndPerformedUpdate
	rebooted  = updatesv1alpha1.StateRebootedIntoUpdate
	monitor   = updatesv1alpha1.StateMonitoringUpdate
	errReset  = updatesv1alpha1.StateErrorReset
	oldV      = "1.19.0"
	newV      = "1.20.0"
	soak      = 5 * time.Minute
	stagedDL  = 15 * time.Minute
	rebootDL  = 30 * time.Minute
	monitorDL = 20 * time.Minute
	returnDL  = 10 * time.Minute
)

// t0 is a whole second, as the API stores times.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func defaultOptions() Options {
	return Options{
		Selector:  labels.SelectorFromSet(labels.Set{updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue}),
		Deadlines: Deadlines{StagedAndPerformedUpdate: stagedDL, RebootedIntoUpdate: rebootDL, MonitoringUpdate: monitorDL, ReturnToIdle: returnDL},
		Drain:     DrainOptions{Client: &fakePods{}},
		Nodes:     &nodeStatuses{},
		// The configuration's defaults.
		LeavingNodeTaints:        sets.New(nodev1alpha1.DefaultLeavingNodeTaints()...),
		LifecycleConditionMaxAge: nodev1alpha1.DefaultLifecycleConditionMaxAge,
	}
}

type policyMod func(*updatesv1alpha1.UpdatePolicy)

// mkPolicy is a policy named name governing the nodes matching selector
// (nil: every managed node), one at a time, with a soak of soak.
func mkPolicy(name string, selector map[string]string, mods ...policyMod) *updatesv1alpha1.UpdatePolicy {
	p := &updatesv1alpha1.UpdatePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, ResourceVersion: "1"},
		Spec: updatesv1alpha1.UpdatePolicySpec{NodeSelector: &metav1.LabelSelector{MatchLabels: selector},
			MaxConcurrentUpdates: intstr.FromInt32(1), PostRebootSoak: &metav1.Duration{Duration: soak}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// fleet is the policy the fixture creates unless a test gives its own:
// every managed node, one at a time.
func fleet(mods ...policyMod) *updatesv1alpha1.UpdatePolicy { return mkPolicy("fleet", nil, mods...) }

type nodeMod func(*v1.Node)

// mkNode is a managed, healthy node listing the updater extension.
func mkNode(name string, mods ...nodeMod) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "n",
			Labels:      map[string]string{updatesv1alpha1.ManagedNodeLabel: updatesv1alpha1.ManagedNodeLabelValue},
			Annotations: map[string]string{nodev1alpha1.SystemExtensionsAnnotation: `[{"name":"bottlerocket-updater","source":"lease"},{"name":"kube-proxy"}]`}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: nodev1alpha1.SystemExtensionsReadyCondition, Status: v1.ConditionTrue,
			Reason: nodev1alpha1.ReasonExtensionsReady}, {Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func zone(z string) nodeMod { return func(n *v1.Node) { n.Labels[ZoneLabel] = z } }
func unready(reason string) nodeMod {
	return func(n *v1.Node) {
		n.Status.Conditions[0].Status = v1.ConditionFalse
		n.Status.Conditions[0].Reason = reason
	}
}
func readyReason(reason string) nodeMod {
	return func(n *v1.Node) { n.Status.Conditions[0].Reason = reason }
}
func noCondition(n *v1.Node)     { n.Status.Conditions = n.Status.Conditions[1:] }
func kubeletNotReady(n *v1.Node) { n.Status.Conditions[1].Status = v1.ConditionFalse }
func label(k, v string) nodeMod  { return func(n *v1.Node) { n.Labels[k] = v } }
func unmanaged(n *v1.Node)       { delete(n.Labels, updatesv1alpha1.ManagedNodeLabel) }
func extensions(list string) nodeMod {
	return func(n *v1.Node) { n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = list }
}

type shadowMod func(*updatesv1alpha1.BottlerocketShadow)

// mkShadow is a shadow whose agent reports oldV with newV offered.
func mkShadow(name string, spec, status updatesv1alpha1.ShadowState, mods ...shadowMod) *updatesv1alpha1.BottlerocketShadow {
	s := &updatesv1alpha1.BottlerocketShadow{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
			Annotations: map[string]string{updatesv1alpha1.NodeUIDAnnotation: "uid-" + "n"}},
		Spec:   updatesv1alpha1.BottlerocketShadowSpec{State: spec},
		Status: updatesv1alpha1.BottlerocketShadowStatus{CurrentState: status, CurrentVersion: oldV, TargetVersion: newV},
	}
	if spec != idle {
		s.Spec.Version = newV
		s.Spec.StateTransitionTimestamp = &metav1.Time{Time: t0}
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func since(d time.Duration) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) {
		s.Spec.StateTransitionTimestamp = &metav1.Time{Time: t0.Add(-d)}
	}
}
func running(v string) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) { s.Status.CurrentVersion = v }
}
func offered(v string) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) { s.Status.TargetVersion = v }
}
func annotate(k, v string) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}
func failedAt(t time.Time) shadowMod {
	return annotate(updatesv1alpha1.FailedAnnotation, t.Format(time.RFC3339))
}
func resumedAt(t time.Time) shadowMod {
	return annotate(updatesv1alpha1.ResumeAnnotation, t.Format(time.RFC3339))
}
func crashed(count int32, at time.Time) shadowMod {
	return func(s *updatesv1alpha1.BottlerocketShadow) {
		s.Status.CrashCount = count
		s.Status.StateTransitionFailureTimestamp = &metav1.Time{Time: at}
	}
}

type fixture struct {
	t      *testing.T
	ctx    context.Context
	c      *Controller
	client *fake.Clientset
	// kube serves the pods the gates list.
	kube   *kubefake.Clientset
	clock  *testingclock.FakeClock
	rec    *record.FakeRecorder
	timers map[string][]time.Duration
	// listed, when set, is what the consistent LIST returns instead of the
	// cache's content (a cache behind the API server).
	listed []*updatesv1alpha1.BottlerocketShadow
	// listedPolicies, when set, is what the consistent LIST of policies
	// returns (a policy edited after the cache was read).
	listedPolicies []*updatesv1alpha1.UpdatePolicy

	nodes, shadows, policies cache.Indexer
}

func newFixture(t *testing.T, opts Options, nodes []*v1.Node, shadows []*updatesv1alpha1.BottlerocketShadow) *fixture {
	t.Helper()
	return newPolicyFixture(t, opts, []*updatesv1alpha1.UpdatePolicy{fleet()}, nodes, shadows)
}

func newPolicyFixture(t *testing.T, opts Options, policies []*updatesv1alpha1.UpdatePolicy, nodes []*v1.Node, shadows []*updatesv1alpha1.BottlerocketShadow) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, s := range shadows {
		objs = append(objs, s.DeepCopy())
	}
	for _, p := range policies {
		objs = append(objs, p.DeepCopy())
	}
	f := &fixture{t: t, ctx: ctx, client: fake.NewSimpleClientset(objs...), clock: testingclock.NewFakeClock(t0),
		rec: record.NewFakeRecorder(100), timers: map[string][]time.Duration{}}
	f.kube = kubefake.NewClientset()
	if opts.Pods == nil {
		opts.Pods = f.kube.CoreV1()
	}
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	sf := externalversions.NewSharedInformerFactory(f.client, 0)
	c, err := NewController(Config{Client: f.client, Nodes: kf.Core().V1().Nodes(), Shadows: sf.Updates().V1alpha1().BottlerocketShadows(),
		Policies: sf.Updates().V1alpha1().UpdatePolicies(), Recorder: f.rec, Clock: f.clock, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	c.after = func(key string, d time.Duration) { f.timers[key] = append(f.timers[key], d) }
	for _, n := range nodes {
		_ = kf.Core().V1().Nodes().Informer().GetIndexer().Add(n)
	}
	for _, s := range shadows {
		_ = sf.Updates().V1alpha1().BottlerocketShadows().Informer().GetIndexer().Add(s)
	}
	for _, p := range policies {
		_ = sf.Updates().V1alpha1().UpdatePolicies().Informer().GetIndexer().Add(p)
	}
	f.client.PrependReactor("list", "bottlerocketshadows", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if rv := a.(clienttesting.ListActionImpl).ListOptions.ResourceVersion; rv != "" {
			return true, nil, fmt.Errorf("LIST with resourceVersion %q is not a consistent read", rv)
		}
		if f.listed == nil {
			return false, nil, nil
		}
		l := &updatesv1alpha1.BottlerocketShadowList{}
		for _, s := range f.listed {
			l.Items = append(l.Items, *s)
		}
		return true, l, nil
	})
	f.c = c
	f.client.PrependReactor("list", "updatepolicies", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if rv := a.(clienttesting.ListActionImpl).ListOptions.ResourceVersion; rv != "" {
			return true, nil, fmt.Errorf("LIST with resourceVersion %q is not a consistent read", rv)
		}
		if f.listedPolicies == nil {
			return false, nil, nil
		}
		l := &updatesv1alpha1.UpdatePolicyList{}
		for _, p := range f.listedPolicies {
			l.Items = append(l.Items, *p)
		}
		return true, l, nil
	})
	f.nodes = kf.Core().V1().Nodes().Informer().GetIndexer()
	f.policies = sf.Updates().V1alpha1().UpdatePolicies().Informer().GetIndexer()
	f.shadows = sf.Updates().V1alpha1().BottlerocketShadows().Informer().GetIndexer()
	f.client.ClearActions()
	return f
}

// actions renders the client's calls: "list" (shadows), "list policies",
// "status POLICY" (a policy's status written), "record-success POLICY
// TIME" (a merge patch of its lastUpdateSucceeded), or "update NAME STATE
// VERSION" plus " ignoreWaves" when spec asks for it and " failed=REASON"
// when the update records a failure.
func (f *fixture) actions() []string {
	return f.render(f.client.Actions())
}

// render renders actions as actions does.
func (f *fixture) render(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case clienttesting.ListAction:
			if a.GetResource().Resource == "updatepolicies" {
				out = append(out, "list policies")
				continue
			}
			out = append(out, "list")
		case clienttesting.PatchAction:
			if a.GetResource().Resource == "updatepolicies" && a.GetSubresource() == "status" {
				var patch struct {
					Status struct {
						LastUpdateSucceeded string `json:"lastUpdateSucceeded"`
					} `json:"status"`
				}
				if err := json.Unmarshal(a.GetPatch(), &patch); err == nil && a.GetPatchType() == types.MergePatchType {
					out = append(out, "record-success "+a.GetName()+" "+patch.Status.LastUpdateSucceeded)
					continue
				}
			}
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+string(a.GetPatch()))
		case clienttesting.UpdateAction:
			if p, ok := a.GetObject().(*updatesv1alpha1.UpdatePolicy); ok {
				out = append(out, "status "+p.Name)
				continue
			}
			s := a.GetObject().(*updatesv1alpha1.BottlerocketShadow)
			if old, ok, _ := f.shadows.GetByKey(s.Name); ok && apiequality.Semantic.DeepEqual(old.(*updatesv1alpha1.BottlerocketShadow).Spec, s.Spec) {
				// spec unchanged: a write of the soak's start
				str := fmt.Sprintf("annotate %s healthy-since=%s", s.Name, s.Annotations[updatesv1alpha1.HealthySinceAnnotation])
				for _, k := range []string{updatesv1alpha1.SoakPausedSinceAnnotation, updatesv1alpha1.SoakPausedAnnotation} {
					if v, ok := s.Annotations[k]; ok {
						str += fmt.Sprintf(" %s=%s", strings.TrimPrefix(k, "updates.nodehealth.io/"), v)
					}
				}
				out = append(out, str)
				continue
			}
			str := fmt.Sprintf("update %s %s %s", s.Name, s.Spec.State, s.Spec.Version)
			if s.Spec.IgnoreWaves {
				str += " ignoreWaves"
			}
			if a.GetSubresource() != "" {
				str += " subresource=" + a.GetSubresource()
			}
			if v, ok := s.Annotations[updatesv1alpha1.FailedAnnotation]; ok && v == f.clock.Now().UTC().Format(time.RFC3339) {
				str += " failed=" + strings.Fields(s.Annotations[updatesv1alpha1.FailureReasonAnnotation])[0]
			}
			out = append(out, strings.TrimSpace(str))
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, strings.Join(strings.Fields(e)[:2], " "))
		default:
			return out
		}
	}
}

func (f *fixture) expect(want []string) {
	f.t.Helper()
	got := f.actions()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("actions:\n  got  %q\n  want %q", got, want)
	}
	f.client.ClearActions()
}

// distinct reduces the events recorded on shadow and Node to one per reason.
func distinct(events []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range events {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}
