package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// nodeWatch records, from a watch of every Node, when the readiness taint appeared
// and disappeared on each node, and every update that changed what a Node write of
// the controller changes (taints, annotations, the SystemExtensionsReady condition).
type nodeWatch struct {
	taintKey string

	mu        sync.Mutex
	tainted   map[string]bool
	addedAt   map[string]time.Time
	removedAt map[string]time.Time
	// writes are updates that changed the spec, the annotations or the
	// SystemExtensionsReady condition (any writer: node-lifecycle-controller removes
	// its not-ready taint from new nodes, for one); ownWrites those that changed what
	// nodehealth owns: its taint, nodehealth.io/ annotations, its condition.
	writes    []time.Time
	ownWrites []time.Time
	// ownByNode counts ownWrites per node; transitions counts taint additions
	// and removals per node.
	ownByNode   map[string]int
	transitions map[string]int
}

func startNodeWatch(ctx context.Context, client kubernetes.Interface, taintKey string) (*nodeWatch, error) {
	w := &nodeWatch{taintKey: taintKey, tainted: map[string]bool{}, addedAt: map[string]time.Time{}, removedAt: map[string]time.Time{},
		ownByNode: map[string]int{}, transitions: map[string]int{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			n := obj.(*corev1.Node)
			w.mu.Lock()
			w.tainted[n.Name] = w.hasTaint(n)
			w.mu.Unlock()
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			now := time.Now()
			o, n := oldObj.(*corev1.Node), newObj.(*corev1.Node)
			w.mu.Lock()
			defer w.mu.Unlock()
			was, is := w.hasTaint(o), w.hasTaint(n)
			w.tainted[n.Name] = is
			switch {
			case is && !was:
				w.addedAt[n.Name] = now
				w.transitions[n.Name]++
			case was && !is:
				w.removedAt[n.Name] = now
				w.transitions[n.Name]++
			}
			ours := was != is || !reflect.DeepEqual(ownAnnotations(o), ownAnnotations(n)) || !reflect.DeepEqual(condition(o), condition(n))
			if ours {
				w.ownWrites = append(w.ownWrites, now)
				w.ownByNode[n.Name]++
			}
			if ours || !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Annotations, n.Annotations) {
				w.writes = append(w.writes, now)
			}
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("node watch did not sync")
	}
	return w, nil
}

func ownAnnotations(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, nodev1alpha1.Domain+"/") {
			out[k] = v
		}
	}
	return out
}

func condition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodev1alpha1.SystemExtensionsReadyCondition {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (w *nodeWatch) hasTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == w.taintKey {
			return true
		}
	}
	return false
}

// counts returns how many known nodes are tainted and how many are known.
func (w *nodeWatch) counts() (tainted, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.tainted {
		if t {
			tainted++
		}
	}
	return tainted, len(w.tainted)
}

func (w *nodeWatch) isTainted(node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tainted[node]
}

func (w *nodeWatch) taintAdded(node string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.addedAt[node]
}

func (w *nodeWatch) taintRemoved(node string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.removedAt[node]
}

// writesBetween counts the recorded Node writes in [from, to): all, and those that
// changed what nodehealth owns.
func (w *nodeWatch) writesBetween(from, to time.Time) (all, own int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	count := func(ts []time.Time) int {
		n := 0
		for _, t := range ts {
			if !t.Before(from) && t.Before(to) {
				n++
			}
		}
		return n
	}
	return count(w.writes), count(w.ownWrites)
}

// lastOwnWrite is when a write that changed what nodehealth owns was last seen.
func (w *nodeWatch) lastOwnWrite() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ownWrites) == 0 {
		return time.Time{}
	}
	return w.ownWrites[len(w.ownWrites)-1]
}

// ownWritesWhere adds the writes of nodehealth's fields and the taint transitions on
// the nodes for which in reports true.
func (w *nodeWatch) ownWritesWhere(in func(node string) bool) (writes, transitions int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, k := range w.ownByNode {
		if in(n) {
			writes += k
		}
	}
	for n, k := range w.transitions {
		if in(n) {
			transitions += k
		}
	}
	return writes, transitions
}
