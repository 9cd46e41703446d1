package framework

import (
	"context"
	"fmt"
	"reflect"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// WaitFor lists and watches what lw returns until cond holds for one object and
// returns that object. It sees the current state first (so a condition that already
// holds returns at once) and then every change; it never polls or sleeps. Bound it with
// ctx; on timeout the error describes the last object seen.
//
// T is the typed object, e.g. *corev1.Node; lw must produce objects of that type
// (cache.NewListWatchFromClient with a typed clientset's RESTClient does).
func WaitFor[T runtime.Object](ctx context.Context, lw cache.ListerWatcher, cond func(T) bool) (T, error) {
	var zero, found, last T
	var seen bool
	check := func(obj any) bool {
		t, ok := obj.(T)
		if !ok {
			return false
		}
		last, seen = t, true
		if cond(t) {
			found = t
			return true
		}
		return false
	}
	precondition := func(store cache.Store) (bool, error) {
		for _, obj := range store.List() {
			if check(obj) {
				return true, nil
			}
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, newObject[T](), precondition, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, nil
		}
		return check(ev.Object), nil
	})
	if err != nil {
		if seen {
			return zero, fmt.Errorf("waiting for %T: %w; last seen: %s", zero, err, describe(last))
		}
		return zero, fmt.Errorf("waiting for %T: %w; no such object seen", zero, err)
	}
	return found, nil
}

// WaitForDeletion waits until no object lw returns is named name (in namespace, for
// namespaced resources). It returns at once when the object does not exist.
func WaitForDeletion[T runtime.Object](ctx context.Context, lw cache.ListerWatcher, namespace, name string) error {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	_, err := watchtools.UntilWithSync(ctx, lw, newObject[T](),
		func(store cache.Store) (bool, error) {
			_, exists, err := store.GetByKey(key)
			return !exists, err
		},
		func(ev watch.Event) (bool, error) {
			if ev.Type != watch.Deleted {
				return false, nil
			}
			m, err := meta.Accessor(ev.Object)
			return err == nil && m.GetName() == name, err
		})
	if err != nil {
		var zero T
		return fmt.Errorf("waiting for %T %s to be deleted: %w", zero, key, err)
	}
	return nil
}

// NamedListWatch lists and watches the single object called name, in namespace ("" for
// cluster-scoped resources), through a typed clientset's REST client, e.g.
// NamedListWatch(c.CoreV1().RESTClient(), "pods", ns, name).
func NamedListWatch(c cache.Getter, resource, namespace, name string) cache.ListerWatcher {
	return cache.NewListWatchFromClient(c, resource, namespace, fields.OneTermEqualSelector("metadata.name", name))
}

// WaitForNode waits until cond holds for the node called name.
func (e *Environment) WaitForNode(ctx context.Context, name string, cond func(*corev1.Node) bool) (*corev1.Node, error) {
	return WaitFor(ctx, NamedListWatch(e.Client.CoreV1().RESTClient(), "nodes", "", name), cond)
}

// WaitForPod waits until cond holds for the pod namespace/name.
func (e *Environment) WaitForPod(ctx context.Context, namespace, name string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	return WaitFor(ctx, NamedListWatch(e.Client.CoreV1().RESTClient(), "pods", namespace, name), cond)
}

// WaitForLease waits until cond holds for the Lease namespace/name.
func (e *Environment) WaitForLease(ctx context.Context, namespace, name string, cond func(*coordinationv1.Lease) bool) (*coordinationv1.Lease, error) {
	return WaitFor(ctx, NamedListWatch(e.Client.CoordinationV1().RESTClient(), "leases", namespace, name), cond)
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeSchedulable reports whether the node is Ready and node-lifecycle-controller has
// removed the node.kubernetes.io/not-ready taint that admission puts on every new node.
func NodeSchedulable(n *corev1.Node) bool {
	if !NodeReady(n) || n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return true
}

// PodRunning reports whether the pod is in phase Running.
func PodRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// newObject returns a new zero object of T's pointed-to type, which the reflector needs
// to know what it lists.
func newObject[T runtime.Object]() T {
	var zero T
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
}

// describe summarises an object for a timeout message: enough to see what was wrong,
// short enough to read.
func describe(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	s := fmt.Sprintf("%s (resourceVersion %s)", cache.MetaObjectToName(m), m.GetResourceVersion())
	switch o := obj.(type) {
	case *corev1.Node:
		s += fmt.Sprintf(" ready=%v taints=%v", NodeReady(o), o.Spec.Taints)
	case *corev1.Pod:
		s += fmt.Sprintf(" phase=%s node=%q conditions=%v", o.Status.Phase, o.Spec.NodeName, o.Status.Conditions)
	case *coordinationv1.Lease:
		if o.Spec.RenewTime != nil {
			s += fmt.Sprintf(" renewTime=%s", o.Spec.RenewTime.Format("15:04:05.000000"))
		}
	}
	return s
}
