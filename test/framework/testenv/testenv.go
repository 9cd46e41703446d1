// Package testenv runs one framework.Environment per test package and gives tests
// t-aware helpers around it.
//
// Use it from TestMain, naming the repository commands the tests run:
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/nodehealth-controller"}})
//	}
//
// and in tests:
//
//	env := testenv.Env(t)
//	ns := testenv.NewNamespace(t, "my-test")
//	node := testenv.CreateReadyNode(t, "my-node", nil)
//	controller := testenv.StartComponent(t, testenv.Component{Binary: "nodehealth-controller", Config: cfg})
//	testenv.WaitForNode(t, node.Name, framework.NodeServing)
//
// Tests share the control plane and isolate themselves by namespace and by object
// name; cluster-scoped objects (nodes) need names unique within the package.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodehealth.io/nodehealth/test/framework"
)

// DefaultTimeout bounds Context: generous, because two cores running a whole control
// plane plus a parallel build can be slow, and a wait that times out is a failure anyway.
const DefaultTimeout = 2 * time.Minute

var (
	env *framework.Environment
	// timeout bounds Context: DefaultTimeout unless the Suite says otherwise.
	timeout = DefaultTimeout
)

// RunTestMain starts the control plane, runs the tests and stops it, returning the
// exit code for os.Exit. When the tests fail the environment's directory (process
// logs, etcd data) is kept and its path printed. SIGINT and SIGTERM stop the control
// plane before the test binary exits; any other death of the binary (panic, test
// timeout, SIGKILL) takes the children with it through Pdeathsig.
func RunTestMain(m *testing.M, opts ...framework.Option) int {
	e, err := framework.Start(context.Background(), opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	env = e

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping the control plane\n", sig)
		e.KeepArtifacts()
		if err := e.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
		os.Exit(130)
	}()

	code := m.Run()

	signal.Stop(signals)
	close(signals)
	if code != 0 {
		e.KeepArtifacts()
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Env returns the package's Environment; it fails the test when RunTestMain did not
// start one.
func Env(t testing.TB) *framework.Environment {
	t.Helper()
	if env == nil {
		t.Fatal("testenv: no control plane; call testenv.RunTestMain from TestMain")
	}
	return env
}

// Context returns t.Context() bounded by the Suite's Timeout (DefaultTimeout
// unless set): the bound of a test's every wait.
func Context(t testing.TB) context.Context {
	return ContextWithTimeout(t, timeout)
}

// ContextWithTimeout returns t.Context() bounded by timeout.
func ContextWithTimeout(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// NewNamespace creates a namespace named prefix-<random> and deletes it when the test
// ends. It returns the name.
func NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	e := Env(t)
	ns, err := e.CreateNamespace(Context(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context() is already canceled during cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.DeleteNamespace(ctx, ns.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns.Name
}

// CreateNode creates a kwok-simulated node and deletes it when the test ends.
func CreateNode(t testing.TB, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	e := Env(t)
	n, err := e.CreateNode(Context(t), name, labels)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNode(t, e, name) })
	return n
}

// CreateReadyNode creates a kwok-simulated node, waits until it is schedulable and
// deletes it when the test ends.
func CreateReadyNode(t testing.TB, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	CreateNode(t, name, labels)
	return WaitForNode(t, name, framework.NodeSchedulable)
}

func deleteNode(t testing.TB, e *framework.Environment, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.DeleteNode(ctx, name); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// WaitForNode waits (DefaultTimeout) until cond holds for the node and returns it.
func WaitForNode(t testing.TB, name string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	n, err := Env(t).WaitForNode(Context(t), name, cond)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// WaitForPod waits (DefaultTimeout) until cond holds for the pod and returns it.
func WaitForPod(t testing.TB, namespace, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	p, err := Env(t).WaitForPod(Context(t), namespace, name, cond)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreeLoopbackAddresses returns n distinct free "127.0.0.1:<port>" addresses,
// for the serving addresses of the binaries a test starts.
func FreeLoopbackAddresses(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := framework.FreeLoopbackAddresses(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// SkipUnlessServed skips the test when the API server does not serve resource
// in groupVersion (Environment.ServesResource): for APIs newer than the oldest
// supported Kubernetes release, which make test-compat runs against. The skip
// says what is missing and which server lacks it.
func SkipUnlessServed(t testing.TB, groupVersion, resource string) {
	t.Helper()
	e := Env(t)
	served, err := e.ServesResource(Context(t), groupVersion, resource)
	if err != nil {
		t.Fatal(err)
	}
	if served {
		return
	}
	server := "this API server"
	if v, err := e.Client.Discovery().ServerVersion(); err == nil {
		server = "kube-apiserver " + v.GitVersion
	}
	t.Skipf("%s does not serve %s in %s (discovery); the feature under test needs it", server, resource, groupVersion)
}
