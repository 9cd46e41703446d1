package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	groupLabel = "faults.nodehealth.io/group"
	taintKey   = nodev1alpha1.DefaultReadinessTaintKey
	extension  = "agent"
	leaderName = "nodehealth-controller"

	// Extension Leases last leaseDuration and are renewed every
	// renewPeriod; the controller adds renewalGrace, so a Lease expires
	// expiry after the last renewal it observed. The canary (every
	// canaryInterval, stale after 3) fires 2 s before that: 6 s < 8 s.
	leaseDuration  = 6 * time.Second
	renewPeriod    = time.Second
	renewalGrace   = 2 * time.Second
	canaryInterval = 2 * time.Second
	expiry         = leaseDuration + renewalGrace
	// evictionTimeout is short so that a wrongly kept taint also shows as
	// a wrong eviction within the test.
	evictionTimeout = 3 * time.Second

	waitTimeout = 2 * time.Minute
)

// fleet is one test's nodes, the extension Leases the test renews for them,
// a pod on each, and the record of every version of those nodes.
type fleet struct {
	t       *testing.T
	env     *framework.Environment
	group   string
	leaseNS string
	podNS   string
	nodes   []string
	client  kubernetes.Interface

	mu      sync.Mutex
	stopped map[string]bool
	// lagging are nodes whose renewals are held back for a while although
	// their extension is healthy (lag): they are not failing.
	lagging map[string]bool
	history map[string][]version
	// conditions is every SystemExtensionsReady status/reason each node's
	// watch delivered, in order, one entry per change.
	conditions map[string][]string
	marks      map[string]int
	renewErrs  int

	stopRenew chan struct{}
	renewDone chan struct{}
}

// version is one observed state of a node.
type version struct {
	at      time.Time
	rv      string
	taints  int // readiness taints (any effect): 0 or 1, never more
	tainted bool
}

// newFleet creates n nodes with a pod each, renews their Leases until the
// test ends, and waits until the controller — which the caller starts
// after — can have gated them: call settle once it runs.
func newFleet(t *testing.T, group string, n int) *fleet {
	t.Helper()
	env := testenv.Env(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "faults-test-renewer"
	cfg.QPS, cfg.Burst = 500, 1000
	// Renewals must not wait out a dead connection for long.
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, env: env, group: group, client: client,
		leaseNS: testenv.NewNamespace(t, "faults-"+group), podNS: testenv.NewNamespace(t, "faults-pods-"+group),
		stopped: map[string]bool{}, lagging: map[string]bool{}, history: map[string][]version{}, conditions: map[string][]string{}, marks: map[string]int{},
		stopRenew: make(chan struct{}), renewDone: make(chan struct{})}
	ctx := testenv.Context(t)
	// No kube-controller-manager: the pods' ServiceAccount is made here.
	if _, err := env.Client.CoreV1().ServiceAccounts(f.podNS).Create(ctx,
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	f.record(t)
	for i := range n {
		name := fmt.Sprintf("%s-%03d", group, i)
		f.nodes = append(f.nodes, name)
	}
	parallel(t, f.nodes, func(name string) error {
		node := framework.NewUnmanagedNode(name, map[string]string{groupLabel: group})
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
		t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
		_, err := env.Client.CoreV1().Pods(f.podNS).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-" + name},
			Spec: v1.PodSpec{NodeName: name, AutomountServiceAccountToken: ptr.To(false),
				Containers: []v1.Container{{Name: "app", Image: "registry.invalid/app"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		return f.renew(ctx, name)
	})
	go f.renewLoop()
	t.Cleanup(f.stop)
	return f
}

// parallel runs fn for every item, 16 at a time, and fails on the first error.
func parallel(t testing.TB, items []string, fn func(string) error) {
	t.Helper()
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(items))
	for _, it := range items {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if err := fn(it); err != nil {
				errs <- fmt.Errorf("%s: %w", it, err)
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (f *fleet) stop() {
	select {
	case <-f.stopRenew:
	default:
		close(f.stopRenew)
	}
	<-f.renewDone
}

func (f *fleet) renewLoop() {
	defer close(f.renewDone)
	ticker := time.NewTicker(renewPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-f.stopRenew:
			return
		case <-ticker.C:
		}
		f.mu.Lock()
		var live []string
		for _, n := range f.nodes {
			if !f.stopped[n] {
				live = append(live, n)
			}
		}
		f.mu.Unlock()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, n := range live {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := f.renew(context.Background(), n); err != nil {
					f.mu.Lock()
					f.renewErrs++
					f.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// renew renews the node's extension Lease, creating it the first time.
func (f *fleet) renew(ctx context.Context, node string) error {
	f.mu.Lock()
	skip := f.stopped[node] || f.lagging[node]
	f.mu.Unlock()
	if skip {
		return nil
	}
	name, err := nodev1alpha1.LeaseName(extension, node)
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(time.Now())
	seconds := int32(leaseDuration / time.Second)
	holder := node + "/" + extension
	leases := f.client.CoordinationV1().Leases(f.leaseNS)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"holderIdentity": holder, "renewTime": now}})
	_, err = leases.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodev1alpha1.LeaseLabels(extension, node)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
				RenewTime: &now, AcquireTime: &now},
		}, metav1.CreateOptions{})
	}
	return err
}

// fail stops renewing the nodes' Leases: their extension has died.
func (f *fleet) fail(nodes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		f.stopped[n] = true
	}
}

// lag holds back the renewals of healthy nodes, as an API server that
// crawls holds them back, until unlag: the nodes do not count as failing.
func (f *fleet) lag(nodes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		f.lagging[n] = true
	}
}

func (f *fleet) unlag(nodes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		delete(f.lagging, n)
	}
}

// recover renews the nodes' Leases again: their extension is back.
func (f *fleet) recover(nodes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range nodes {
		delete(f.stopped, n)
	}
}

// failing returns the nodes whose Leases are no longer renewed.
func (f *fleet) failing() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.nodes {
		if f.stopped[n] {
			out = append(out, n)
		}
	}
	return out
}

// record watches the fleet's nodes for the whole test and keeps every
// version whose readiness taint differs from the previous one. The informer
// resumes its watch from the last resourceVersion after an API server or
// etcd restart, so no committed change is missed.
func (f *fleet) record(t *testing.T) {
	lw := cache.NewFilteredListWatchFromClient(f.env.Client.CoreV1().RESTClient(), "nodes", "",
		func(o *metav1.ListOptions) { o.LabelSelector = groupLabel + "=" + f.group })
	inf := cache.NewSharedIndexInformer(lw, &v1.Node{}, 0, cache.Indexers{})
	observe := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		count := framework.ReadinessTaints(n, "")
		cond := ""
		for _, c := range n.Status.Conditions {
			if c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
				cond = string(c.Status) + "/" + c.Reason
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if cs := f.conditions[n.Name]; len(cs) == 0 || cs[len(cs)-1] != cond {
			f.conditions[n.Name] = append(cs, cond)
		}
		h := f.history[n.Name]
		if len(h) > 0 && h[len(h)-1].taints == count {
			return
		}
		f.history[n.Name] = append(h, version{at: time.Now(), rv: n.ResourceVersion, taints: count, tainted: count > 0})
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, n any) { observe(n) },
	})
	stop := make(chan struct{})
	go inf.Run(stop)
	t.Cleanup(func() { close(stop) })
	if !cache.WaitForCacheSync(testenv.Context(t).Done(), inf.HasSynced) {
		t.Fatal("node recorder did not sync")
	}
}

// conditionMark is how many conditions of node the watch delivered so far,
// for conditionsSince.
func (f *fleet) conditionMark(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conditions[node])
}

// conditionsSince returns the SystemExtensionsReady status/reason pairs the
// watch delivered for node after mark.
func (f *fleet) conditionsSince(node string, mark int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.conditions[node][mark:])
}

func (f *fleet) tainted(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.history[node]
	return len(h) > 0 && h[len(h)-1].tainted
}

// settle waits until every node is ungated (the controller saw the fresh
// renewals of the new nodes) and marks the history there: the fault's
// assertions count the transitions after it.
func (f *fleet) settle(t testing.TB) {
	t.Helper()
	f.waitAll(t, "untainted after start", f.nodes, func(n string) bool { return f.seen(n) && !f.tainted(n) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		f.marks[n] = len(f.history[n])
	}
}

func (f *fleet) seen(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.history[node]) > 0
}

// waitAll waits until cond holds for every node.
func (f *fleet) waitAll(t testing.TB, what string, nodes []string, cond func(string) bool) {
	t.Helper()
	var missing []string
	err := wait.PollUntilContextTimeout(testenv.Context(t), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		missing = slices.DeleteFunc(slices.Clone(nodes), cond)
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d nodes not %s: %v (first: %v)", len(missing), what, err, missing[:min(5, len(missing))])
	}
}

// transitions returns the versions of node since settle.
func (f *fleet) transitions(node string) []version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.history[node][f.marks[node]:])
}

// snapshot marks how many versions of each node were recorded so far, for
// versionsSince.
func (f *fleet) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, n := range f.nodes {
		out[n] = len(f.history[n])
	}
	return out
}

// versionsSince returns the versions of node recorded after snapshot s.
func (f *fleet) versionsSince(node string, s map[string]int) []version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.history[node][s[node]:])
}

// everTainted reports whether any version of node since the fleet settled
// carried the readiness taint.
func (f *fleet) everTainted(node string) bool {
	for _, v := range f.transitions(node) {
		if v.tainted {
			return true
		}
	}
	return false
}

// condition reads the node's SystemExtensionsReady condition from the API
// server (status and reason; empty when it has none).
func (f *fleet) condition(t testing.TB, node string) (v1.ConditionStatus, string) {
	t.Helper()
	n, err := f.env.Client.CoreV1().Nodes().Get(testenv.Context(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// held reports whether a guard holds the node back: its condition is False
// with reason GatingSuspended and it carries no readiness taint.
func (f *fleet) held(t testing.TB, node string) bool {
	status, reason := f.condition(t, node)
	return status == v1.ConditionFalse && reason == nodev1alpha1.ReasonGatingSuspended && !f.tainted(node)
}

// taintedOrHeld reports whether the controller acted on the node's failure:
// tainted, or held back by a guard.
func (f *fleet) taintedOrHeld(t testing.TB, node string) bool {
	return f.tainted(node) || f.held(t, node)
}

// taintedAt returns when node was last seen becoming tainted.
func (f *fleet) taintedAt(node string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.history[node]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].tainted {
			return h[i].at
		}
	}
	return time.Time{}
}

// check asserts the whole record: every failing node was tainted exactly
// once since settle and stayed tainted, every healthy node was never
// tainted, no version ever carried two readiness taints; each pod of a
// failing node was evicted exactly once (once its eviction was due), no
// healthy node's pod ever.
func (f *fleet) check(t testing.TB, wantEvictions bool) {
	t.Helper()
	failing := f.failing()
	for _, n := range f.nodes {
		tr := f.transitions(n)
		want := 0
		if slices.Contains(failing, n) {
			want = 1
		}
		if len(tr) != want || (want == 1 && !tr[0].tainted) {
			t.Errorf("node %s (failing %v): %d taint transitions since the fleet settled, want %d: %s", n, want == 1, len(tr), want, describe(tr))
		}
		f.mu.Lock()
		for _, v := range f.history[n] {
			if v.taints > 1 {
				t.Errorf("node %s carried %d readiness taints at resourceVersion %s", n, v.taints, v.rv)
			}
		}
		f.mu.Unlock()
	}
	ev := evictions(t, f.podNS)
	for _, n := range f.nodes {
		pod := "pod-" + n
		want := 0
		if wantEvictions && slices.Contains(failing, n) {
			want = 1
		}
		if got := ev[pod]; got != want {
			t.Errorf("pod %s (node failing %v): %d eviction requests, want %d", pod, slices.Contains(failing, n), got, want)
		}
	}
	f.mu.Lock()
	t.Logf("%d nodes (%d failing), %d eviction requests, %d renewal errors during the faults", len(f.nodes), len(failing), sum(ev), f.renewErrs)
	f.mu.Unlock()
}

func sum(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

func describe(vs []version) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "[%s tainted=%v rv=%s] ", v.at.Format("15:04:05.000"), v.tainted, v.rv)
	}
	return b.String()
}

// waitEvicted waits until every failing node's pod has an eviction request.
func (f *fleet) waitEvicted(t testing.TB) {
	t.Helper()
	failing := f.failing()
	err := wait.PollUntilContextTimeout(testenv.Context(t), 250*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		ev := evictions(t, f.podNS)
		for _, n := range failing {
			if ev["pod-"+n] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods of failing nodes not evicted: %v", err)
	}
}

// waitPodEvicted waits until the pod of node has an eviction the API server
// granted (201); why says in the failure what made it due.
func (f *fleet) waitPodEvicted(t testing.TB, node, why string) {
	t.Helper()
	pod := "pod-" + node
	err := wait.PollUntilContextTimeout(testenv.Context(t), 250*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return slices.Contains(evictionRequests(t, f.podNS)[pod], 201), nil
	})
	if err != nil {
		t.Fatalf("%s %s and its pod was never evicted: eviction requests %v", node, why, evictionRequests(t, f.podNS))
	}
}

// evictions counts eviction requests per pod of namespace in the audit log.
func evictions(t testing.TB, namespace string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for pod, codes := range evictionRequests(t, namespace) {
		out[pod] = len(codes)
	}
	return out
}

// evictionRequests lists, per pod of namespace, the HTTP status code of each
// eviction request in the audit log, in order: 201 for an eviction, 429 for
// one a PodDisruptionBudget refused.
func evictionRequests(t testing.TB, namespace string) map[string][]int {
	t.Helper()
	file, err := os.Open(testenv.Env(t).AuditLog)
	if err != nil {
		if os.IsNotExist(err) {
			return map[string][]int{}
		}
		t.Fatal(err)
	}
	defer file.Close()
	out := map[string][]int{}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			ObjectRef struct {
				Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		if r := ev.ObjectRef; r.Resource == "pods" && r.Subresource == "eviction" && r.Namespace == namespace {
			out[r.Name] = append(out[r.Name], ev.ResponseStatus.Code)
		}
	}
	return out
}

// quiet waits d, a window in which a flap or a late write would show: the
// assertions after it are about what did not happen.
func quiet(d time.Duration) { time.Sleep(d) }

// controllers are replicas of the real nodehealth-controller binary, each
// restarted like a kubelet restarts a container when it exits (lost
// leadership, a changed configuration).
type controllers struct {
	t        *testing.T
	env      *framework.Environment
	leaderNS string
	config   string
	reps     []*framework.Supervisor
	// metricsURLs are the replicas' /metrics, by index of reps.
	metricsURLs []string
}

// leaderElection is the leader-election section of the configuration.
type leaderElection struct{ lease, renew, retry time.Duration }

var (
	// fastElection makes takeovers quick for the failover tests.
	fastElection = leaderElection{4 * time.Second, 3 * time.Second, time.Second}
	// defaultElection is the shipped one: an outage of a few seconds
	// leaves leadership alone and the canary is the guard that fires.
	defaultElection = leaderElection{15 * time.Second, 10 * time.Second, 2 * time.Second}
)

type controllerConfig struct {
	election       leaderElection
	kubeconfig     string // the admin kubeconfig when empty
	nodesPerSecond string // eviction rate; edited by the reload test
	// clusterThreshold and zoneThreshold are the blast radius's
	// thresholds in percent; 0 means 100 (off but for a whole cluster).
	clusterThreshold, zoneThreshold int
}

func (f *fleet) configYAML(leaderNS string, c controllerConfig) string {
	if c.kubeconfig == "" {
		c.kubeconfig = f.env.Kubeconfig
	}
	if c.nodesPerSecond == "" {
		c.nodesPerSecond = "100"
	}
	if c.clusterThreshold == 0 {
		c.clusterThreshold = 100
	}
	if c.zoneThreshold == 0 {
		c.zoneThreshold = 100
	}
	// The blast radius is off (100 %) unless a test sets it: it would hide
	// a taint storm, which is what these tests must see if the own-view
	// guard fails.
	return fmt.Sprintf(`apiVersion: config.nodehealth.io/v1alpha1
kind: NodeHealthControllerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: %s
  renewDeadline: %s
  retryPeriod: %s
  resourceLock: leases
  resourceName: %s
  resourceNamespace: %s
clientConnection:
  kubeconfig: %s
leaseNamespace: %s
extensionRules:
- name: %s
  nodeSelector:
    matchLabels:
      %s: %s
  startupTimeout: 0s
renewalGrace: %s
registrationGrace: 3s
minimumLeaseDuration: %s
canaryInterval: %s
eviction:
  mode: Evict
  timeout: %s
  nodesPerSecond: %s
  force: true # the nodes' pods declare no controller
blastRadius:
  clusterThresholdPercent: %d
  zoneThresholdPercent: %d
`, c.election.lease, c.election.renew, c.election.retry, leaderName, leaderNS, c.kubeconfig, f.leaseNS,
		extension, groupLabel, f.group, renewalGrace, leaseDuration, canaryInterval, evictionTimeout, c.nodesPerSecond,
		c.clusterThreshold, c.zoneThreshold)
}

// startControllers runs n replicas with configuration c.
func (f *fleet) startControllers(t *testing.T, n int, c controllerConfig) *controllers {
	t.Helper()
	cs := &controllers{t: t, env: f.env, leaderNS: testenv.NewNamespace(t, "faults-leader-"+f.group)}
	cs.config = filepath.Join(t.TempDir(), "nodehealth-controller.yaml")
	if err := os.WriteFile(cs.config, []byte(f.configYAML(cs.leaderNS, c)), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs := testenv.FreeLoopbackAddresses(t, n)
	for i := range n {
		name := fmt.Sprintf("nodehealth-controller-%s-%d", f.group, i)
		s, err := f.env.Supervise(context.Background(), framework.ProcessSpec{
			Name: name, Path: testenv.Binary(t, "nodehealth-controller"),
			Args: []string{"--config", cs.config, "--metrics-bind-address", addrs[i], "--healthz-bind-address", addrs[i], "-v=2"},
		}, framework.SupervisorOptions{InitialBackoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, ResetAfter: 2 * time.Second,
			OnExit: func(p *framework.Process, err error, backoff time.Duration) {
				t.Logf("%s exited (%v); restarting in %s", name, err, backoff)
			}})
		if err != nil {
			t.Fatal(err)
		}
		cs.reps = append(cs.reps, s)
		cs.metricsURLs = append(cs.metricsURLs, "http://"+addrs[i]+"/metrics")
		t.Cleanup(func() {
			if err := s.Stop(10 * time.Second); err != nil {
				t.Errorf("stopping %s: %v", name, err)
			}
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", name, s.Current().LogTail(40))
			}
		})
	}
	return cs
}

// leader waits until the leader Lease names a holder for which cond holds
// and returns it.
func (cs *controllers) leader(t testing.TB, cond func(holder string) bool) string {
	t.Helper()
	l, err := cs.env.WaitForLease(testenv.Context(t), cs.leaderNS, leaderName, func(l *coordinationv1.Lease) bool {
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		return h != "" && cond(h)
	})
	if err != nil {
		t.Fatalf("waiting for a leader: %v", err)
	}
	return *l.Spec.HolderIdentity
}

// replicaOf finds the replica that logged identity at its (latest) start.
func (cs *controllers) replicaOf(t testing.TB, identity string) *framework.Supervisor {
	t.Helper()
	re := regexp.MustCompile(`identity="` + regexp.QuoteMeta(identity) + `"`)
	var found *framework.Supervisor
	err := wait.PollUntilContextTimeout(testenv.Context(t), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		for _, s := range cs.reps {
			data, err := os.ReadFile(s.Current().LogPath)
			if err == nil && re.Match(data) {
				found = s
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no replica logged identity %s: %v", identity, err)
	}
	return found
}

// leading waits until the replica that holds the lease says it leads (the
// Lease can name it a moment before it hears back) and returns it.
func (cs *controllers) leading(t testing.TB, holder string) *framework.Supervisor {
	t.Helper()
	s := cs.replicaOf(t, holder)
	// The log file is appended to across restarts: look after this
	// identity's start line only.
	started := `identity="` + holder + `"`
	err := wait.PollUntilContextTimeout(testenv.Context(t), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(s.Current().LogPath)
		if err != nil {
			return false, nil
		}
		_, after, ok := strings.Cut(string(data), started)
		return ok && strings.Contains(after, "Became the leader"), nil
	})
	if err != nil {
		t.Fatalf("%s never started leading: %v", holder, err)
	}
	return s
}

// metric returns the sum of the samples of name whose labels include want,
// scraped from replica i's /metrics (a restarted replica starts from zero).
func (cs *controllers) metric(t testing.TB, i int, name string, want map[string]string) float64 {
	t.Helper()
	return testenv.Metric(t, cs.metricsURLs[i], name, want)
}

// waitMetric waits until replica i's metric (as metric sums it) is value.
func (cs *controllers) waitMetric(t testing.TB, i int, name string, want map[string]string, value float64) {
	t.Helper()
	testenv.WaitMetric(t, cs.metricsURLs[i], name, want, value)
}
