package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
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

// procStat is a process's CPU time and memory from /proc.
type procStat struct {
	cpu   time.Duration // utime + stime
	rss   int64         // VmRSS, bytes
	hwm   int64         // VmHWM (peak RSS), bytes
	valid bool
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go runs on.
const clockTicks = 100

func readProc(pid int) procStat {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return procStat{}
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	st := procStat{cpu: time.Duration(utime+stime) * time.Second / clockTicks, valid: true}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				st.rss = kb << 10
			case "VmHWM:":
				st.hwm = kb << 10
			}
		}
	}
	return st
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// promSnapshot is the controller's /metrics: samples by their full name with labels.
type promSnapshot map[string]float64

func scrape(ctx context.Context, url string) (promSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	snap := promSnapshot{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		snap[line[:i]] = v
	}
	return snap, sc.Err()
}

// sum adds every sample of a metric (all label values).
func (s promSnapshot) sum(name string) float64 {
	total := 0.0
	for k, v := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

type bucket struct {
	le    float64
	count float64
}

// histogram returns the cumulative buckets of a histogram, minus those of base.
func (s promSnapshot) histogram(name string, base promSnapshot) []bucket {
	var out []bucket
	prefix := name + `_bucket{le="`
	for k, v := range s {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		leStr := strings.TrimSuffix(strings.TrimPrefix(k, prefix), `"}`)
		le := math.Inf(1)
		if leStr != "+Inf" {
			var err error
			if le, err = strconv.ParseFloat(leStr, 64); err != nil {
				continue
			}
		}
		out = append(out, bucket{le: le, count: v - base[k]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// quantile estimates a quantile from cumulative buckets the way PromQL's
// histogram_quantile does (linear within a bucket); NaN without observations.
func quantile(q float64, buckets []bucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].count
	rank := q * total
	lower, lowerCount := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			if b.count == lowerCount {
				return b.le
			}
			return lower + (b.le-lower)*(rank-lowerCount)/(b.count-lowerCount)
		}
		lower, lowerCount = b.le, b.count
	}
	return lower
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
