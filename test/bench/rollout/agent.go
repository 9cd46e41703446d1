package main

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/client-go/informers/externalversions"
)

// agents plays every node's update agent and the node-health side in one
// process, as test/integration/updater does: it reports the state the operator
// asks for at once (an instant update), "reboots" into spec.version, which
// makes the node not fully ready until Monitoring begins, and returns to Idle.
type agents struct {
	shadows versioned.Interface
	nodes   kubernetes.Interface
	queue   workqueue.TypedRateLimitingInterface[string]
	lister  cache.Indexer
	errors  atomic.Int64
}

func startAgents(ctx context.Context, shadows versioned.Interface, nodes kubernetes.Interface, workers int) (*agents, error) {
	a := &agents{shadows: shadows, nodes: nodes,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	factory := externalversions.NewSharedInformerFactory(shadows, 0)
	inf := factory.Updates().V1alpha1().BottlerocketShadows().Informer()
	enqueue := func(obj any) {
		if s, ok := obj.(*updatesv1alpha1.BottlerocketShadow); ok {
			a.queue.Add(s.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }}); err != nil {
		return nil, err
	}
	a.lister = inf.GetIndexer()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	for range workers {
		go func() {
			for a.next(ctx) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
		factory.Shutdown()
	}()
	return a, nil
}

func (a *agents) next(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.act(ctx, name); err != nil && ctx.Err() == nil {
		if !apierrors.IsConflict(err) {
			a.errors.Add(1)
		}
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

func (a *agents) act(ctx context.Context, name string) error {
	obj, ok, err := a.lister.GetByKey(name)
	if err != nil || !ok {
		return err
	}
	s := obj.(*updatesv1alpha1.BottlerocketShadow).DeepCopy()
	want, st := s.Spec.State, &s.Status
	switch {
	case st.CurrentState == "":
		st.CurrentState, st.CurrentVersion, st.TargetVersion = updatesv1alpha1.StateIdle, oldVersion, newVersion
	case want == st.CurrentState:
		return nil
	case want == updatesv1alpha1.StateRebootedIntoUpdate:
		st.CurrentState, st.CurrentVersion, st.RebootFromBootID = want, s.Spec.Version, "boot-1"
	case want == updatesv1alpha1.StateIdle:
		st.CurrentState = want
		if st.CurrentVersion == st.TargetVersion {
			st.CrashCount, st.StateTransitionFailureTimestamp = 0, nil
		}
	default:
		st.CurrentState = want
	}
	// The node-health side: the reboot gates the node; its extensions are back
	// by the time Monitoring begins. Written before the status, as a real node
	// is not ready before its agent reports the reboot.
	switch st.CurrentState {
	case updatesv1alpha1.StateRebootedIntoUpdate:
		if err := setReady(ctx, a.nodes, name, false); err != nil {
			return err
		}
	case updatesv1alpha1.StateMonitoringUpdate:
		if err := setReady(ctx, a.nodes, name, true); err != nil {
			return err
		}
	}
	_, err = a.shadows.UpdatesV1alpha1().BottlerocketShadows().UpdateStatus(ctx, s, metav1.UpdateOptions{})
	return err
}

// setReady writes the node's SystemExtensionsReady condition as the
// node-health controller does.
func setReady(ctx context.Context, client kubernetes.Interface, node string, ready bool) error {
	cond := map[string]any{"type": nodev1alpha1.SystemExtensionsReadyCondition, "status": "True", "reason": nodev1alpha1.ReasonExtensionsReady,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if !ready {
		cond["status"], cond["reason"] = "False", nodev1alpha1.ReasonNodeRebooted
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	_, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
