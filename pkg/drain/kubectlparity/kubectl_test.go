package kubectlparity_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	kubectldrain "k8s.io/kubectl/pkg/drain"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/pkg/drain"
	"nodehealth.io/nodehealth/pkg/drain/clientset"
)

const (
	node = "n1"
	ns   = "apps"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// What a drain does with one pod.
type outcome string

const (
	evict outcome = "evict" // evicted (kubectl: deleted or evicted)
	skip  outcome = "skip"  // left alone, as it should be (kubectl: skipped or a warning)
	// refuse: kubectl drain refuses the whole node with an error naming the
	// pod until a flag allows it. A drain here leaves only that pod, names
	// it (Overrides.LeftBy) and evicts the others; leftNamed is that.
	refuse    outcome = "refuse"
	leftNamed outcome = "left, named"
)

// The four combinations of the overrides, in the order of the tables below.
var overrideCombinations = [4]drain.Overrides{
	{},
	{Force: true},
	{DeleteEmptyDirData: true},
	{Force: true, DeleteEmptyDirData: true},
}

func newPod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func controlledBy(kind, name string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
}

func withEmptyDir(p *v1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
}

func mirrorPod(p *v1.Pod) { p.Annotations = map[string]string{drain.MirrorPodAnnotation: "x"} }
func finished(p *v1.Pod)  { p.Status.Phase = v1.PodSucceeded }
func failed(p *v1.Pod)    { p.Status.Phase = v1.PodFailed }

// TestFiltersDecideAsKubectlDrain runs kubectl drain's pod selection
// (k8s.io/kubectl/pkg/drain, Helper.GetPodsForDeletion with
// --ignore-daemonsets and each combination of --force and
// --delete-emptydir-data) and the escalation's drain (drain.SkipDaemonSetAndMirrorPods
// and drain.SkipUnmanagedAndLocalData with the same overrides, through a Drainer)
// on the same pods, and requires the same decision, pod by pod. Where the
// drain deliberately departs from kubectl, the case says why:
//
//   - kubectl refuses the whole node while a pod it must not delete without a
//     flag is on it; the drain leaves only that pod, names it, and evicts the
//     others (refuse ↔ left, named: the same decision about the pod);
//   - DaemonSet pods are never evicted, even orphaned ones kubectl deletes
//     with --force: the drain cannot tell an orphan (it lists pods only, no
//     DaemonSets) and an evicted DaemonSet pod would come straight back;
//   - finished pods are never evicted: kubectl deletes them whatever the
//     flags (they hold nothing), the Eviction API has nothing to stop.
func TestFiltersDecideAsKubectlDrain(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ds"}}
	tests := []struct {
		name    string
		pod     *v1.Pod
		objects []runtime.Object // beside the pod
		// Decisions for each of overrideCombinations: none, force,
		// deleteEmptyDirData, both.
		kubectl, ours [4]outcome
		// why ours departs from kubectl beyond refuse ↔ left, named.
		why string
	}{
		{
			name: "DaemonSet pod", pod: newPod("p", controlledBy("DaemonSet", "ds")), objects: []runtime.Object{ds},
			kubectl: [4]outcome{skip, skip, skip, skip},
			ours:    [4]outcome{skip, skip, skip, skip},
		},
		{
			name: "orphaned DaemonSet pod", pod: newPod("p", controlledBy("DaemonSet", "gone")),
			kubectl: [4]outcome{refuse, evict, refuse, evict},
			ours:    [4]outcome{skip, skip, skip, skip},
			why:     "DaemonSet pods are never evicted; the drain lists pods only and cannot tell an orphan",
		},
		{
			name: "mirror pod", pod: newPod("p", mirrorPod),
			kubectl: [4]outcome{skip, skip, skip, skip},
			ours:    [4]outcome{skip, skip, skip, skip},
		},
		{
			name: "mirror pod owned by its node", pod: newPod("p", mirrorPod, func(p *v1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, Controller: ptr.To(true)}}
			}),
			kubectl: [4]outcome{skip, skip, skip, skip},
			ours:    [4]outcome{skip, skip, skip, skip},
		},
		{
			name: "bare pod (no controller)", pod: newPod("p"),
			kubectl: [4]outcome{refuse, evict, refuse, evict},
			ours:    [4]outcome{leftNamed, evict, leftNamed, evict},
		},
		{
			name: "owned but not controlled", pod: newPod("p", func(p *v1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}}
			}),
			kubectl: [4]outcome{refuse, evict, refuse, evict},
			ours:    [4]outcome{leftNamed, evict, leftNamed, evict},
		},
		{
			name: "ReplicaSet pod", pod: newPod("p", controlledBy("ReplicaSet", "rs")),
			kubectl: [4]outcome{evict, evict, evict, evict},
			ours:    [4]outcome{evict, evict, evict, evict},
		},
		{
			name: "StatefulSet pod", pod: newPod("p", controlledBy("StatefulSet", "sts")),
			kubectl: [4]outcome{evict, evict, evict, evict},
			ours:    [4]outcome{evict, evict, evict, evict},
		},
		{
			name: "ReplicaSet pod with emptyDir", pod: newPod("p", controlledBy("ReplicaSet", "rs"), withEmptyDir),
			kubectl: [4]outcome{refuse, refuse, evict, evict},
			ours:    [4]outcome{leftNamed, leftNamed, evict, evict},
		},
		{
			name: "bare pod with emptyDir (local storage and no controller)", pod: newPod("p", withEmptyDir),
			kubectl: [4]outcome{refuse, refuse, refuse, evict},
			ours:    [4]outcome{leftNamed, leftNamed, leftNamed, evict},
		},
		{
			name: "finished bare pod", pod: newPod("p", finished),
			kubectl: [4]outcome{evict, evict, evict, evict},
			ours:    [4]outcome{skip, skip, skip, skip},
			why:     "finished pods are never evicted: they hold nothing",
		},
		{
			name: "failed pod with emptyDir", pod: newPod("p", failed, withEmptyDir),
			kubectl: [4]outcome{evict, evict, evict, evict},
			ours:    [4]outcome{skip, skip, skip, skip},
			why:     "finished pods are never evicted: they hold nothing",
		},
		{
			name: "finished DaemonSet pod", pod: newPod("p", finished, controlledBy("DaemonSet", "ds")), objects: []runtime.Object{ds},
			kubectl: [4]outcome{evict, evict, evict, evict},
			ours:    [4]outcome{skip, skip, skip, skip},
			why:     "DaemonSet pods and finished pods are never evicted",
		},
	}
	for _, tc := range tests {
		for i, o := range overrideCombinations {
			t.Run(fmt.Sprintf("%s/force=%v,deleteEmptyDirData=%v", tc.name, o.Force, o.DeleteEmptyDirData), func(t *testing.T) {
				k := kubectlDecides(t, o, tc.pod, tc.objects...)
				if k != tc.kubectl[i] {
					t.Errorf("kubectl drain: %s, the table says %s (did k8s.io/kubectl change?)", k, tc.kubectl[i])
				}
				got := weDecide(t, o, tc.pod)
				if got != tc.ours[i] {
					t.Errorf("the drain: %s, want %s", got, tc.ours[i])
				}
				same := got == k || (k == refuse && got == leftNamed)
				if !same && tc.why == "" {
					t.Errorf("the drain decides %s where kubectl drain decides %s, and the table does not say why", got, k)
				}
				if same && tc.why != "" {
					t.Errorf("the table says the drain departs from kubectl (%s), but both decide %s", tc.why, k)
				}
			})
		}
	}
}

// kubectlDecides asks kubectl drain's Helper what it would do with the pod,
// alone on the node beside objects.
func kubectlDecides(t *testing.T, o drain.Overrides, pod *v1.Pod, objects ...runtime.Object) outcome {
	t.Helper()
	client := fake.NewClientset(append([]runtime.Object{pod.DeepCopy()}, objects...)...)
	h := &kubectldrain.Helper{
		Ctx:                 context.Background(),
		Client:              client,
		Force:               o.Force,
		DeleteEmptyDirData:  o.DeleteEmptyDirData,
		IgnoreAllDaemonSets: true,
	}
	list, errs := h.GetPodsForDeletion(node)
	if list == nil {
		t.Fatalf("GetPodsForDeletion: %v", errs)
	}
	for _, p := range list.Pods() {
		if p.Name == pod.Name {
			return evict
		}
	}
	if len(errs) > 0 {
		return refuse
	}
	return skip
}

// weDecide asks a Drainer with the escalation's filters (less the
// readiness-taint toleration, which kubectl does not know) whether it would
// evict the pod, alone on the node, and whether it names the pod it leaves.
func weDecide(t *testing.T, o drain.Overrides, pod *v1.Pod) outcome {
	t.Helper()
	client := fake.NewClientset(pod.DeepCopy())
	d := drain.New(clientset.New(client.CoreV1(), client.PolicyV1()), node, testingclock.NewFakeClock(t0), drain.Options{
		Filter: drain.All(drain.SkipDaemonSetAndMirrorPods, drain.SkipUnmanagedAndLocalData(o)),
	})
	pods, err := d.Admitted(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Name == pod.Name {
			return evict
		}
	}
	if drain.SkipDaemonSetAndMirrorPods(pod) && o.LeftBy(pod) != "" {
		return leftNamed
	}
	return skip
}
