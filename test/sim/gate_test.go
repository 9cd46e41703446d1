package sim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// Two goroutines of a gate, each reading its node and writing it twice:
// each runs only until its next request, the driver decides which request is
// served next, and the writes land in the order it released them, whatever
// the goroutines' scheduling. A request made while none of them runs (the
// driver's own) passes, though the gated client holds requests meanwhile.
func TestAGateRunsItsGoroutinesOneRequestAtATimeInTheOrderTheDriverReleasesThem(t *testing.T) {
	e := newEnv(t, 13)
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		e.must(e.client.CoreV1().Nodes().Create(ctx, node(name), metav1.CreateOptions{}))
	}
	var stored []string
	e.api.OnStore = func(_ schema.GroupVersionResource, obj, _ runtime.Object) {
		n := obj.(*corev1.Node)
		stored = append(stored, n.Name+"="+n.Labels["x"])
	}
	gated := fake.NewSimpleClientset()
	g := NewGate()
	e.api.InstallGated(&gated.Fake, g)
	nodes := gated.CoreV1().Nodes()
	worker := func(name string) func() {
		return func() {
			if _, err := nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Error(err)
			}
			for _, x := range []string{"1", "2"} {
				if _, err := nodes.Patch(ctx, name, types.MergePatchType, mergePatch("", map[string]string{"x": x}), metav1.PatchOptions{}); err != nil {
					t.Error(err)
				}
			}
		}
	}
	heldAre := func(want ...string) {
		t.Helper()
		var got []string
		for _, h := range g.Held() {
			got = append(got, h.String())
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("held: %q, want %q", got, want)
		}
	}
	e.must(nil, g.Go(ctx, "a", worker("a")))
	e.must(nil, g.Go(ctx, "b", worker("b")))
	heldAre("a: get nodes a", "b: get nodes b")
	// The driver's own request, through the gated client, while both are
	// held: it passes.
	e.must(nodes.Get(ctx, "a", metav1.GetOptions{}))

	e.must(nil, g.Release(ctx, 1)) // b reads
	heldAre("a: get nodes a", "b: patch nodes b")
	e.must(nil, g.Release(ctx, 1)) // b writes x=1
	e.must(nil, g.Release(ctx, 0)) // a reads
	heldAre("b: patch nodes b", "a: patch nodes a")
	e.must(nil, g.Release(ctx, 1)) // a writes x=1
	e.must(nil, g.Release(ctx, 1)) // a writes x=2 and returns
	heldAre("b: patch nodes b")
	if g.Running() != 1 {
		t.Fatalf("%d goroutines running, want b alone", g.Running())
	}
	e.must(nil, g.Release(ctx, 0)) // b writes x=2 and returns
	heldAre()
	if g.Running() != 0 {
		t.Fatalf("%d goroutines running after both returned", g.Running())
	}
	if got, want := strings.Join(stored, " "), "b=1 a=1 a=2 b=2"; got != want {
		t.Errorf("writes stored in the order %s, want the releases' %s", got, want)
	}
}

// A goroutine that waits for something only the driver can do neither makes
// a request nor returns: Go says so when its context ends, instead of
// hanging.
func TestAGateSaysWhichGoroutineNeitherMadeARequestNorReturned(t *testing.T) {
	g := NewGate()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	never := make(chan struct{})
	defer close(never)
	err := g.Go(ctx, "stuck", func() { <-never })
	if err == nil || !strings.Contains(err.Error(), "stuck neither made a request nor returned") {
		t.Fatalf("Go of a goroutine that waits forever: %v", err)
	}
	if err := g.Go(context.Background(), "next", func() {}); err == nil {
		t.Errorf("Go while stuck still runs: no error")
	}
}

// A long-lived worker that waits for its work outside the gate (in a queue)
// takes a turn from Grant: it runs until its request is held, and its turn
// ends when it calls Idle to wait for more, so the driver orders its
// requests with everyone else's and knows when it is done.
func TestAGrantedWorkerRunsUntilItsRequestIsHeldAndItsTurnEndsWhenItIsIdle(t *testing.T) {
	e := newEnv(t, 13)
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	e.must(e.client.CoreV1().Nodes().Create(ctx, node("a"), metav1.CreateOptions{}))
	gated := fake.NewSimpleClientset()
	g := NewGate()
	e.api.InstallGated(&gated.Fake, g)
	work, idle := make(chan string), make(chan struct{}, 1)
	done := make(chan struct{})
	var patched []string
	go func() {
		defer close(done)
		for {
			g.Idle()
			idle <- struct{}{}
			name, ok := <-work
			if !ok {
				return
			}
			if _, err := gated.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, mergePatch("", map[string]string{"x": "1"}), metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
			patched = append(patched, name)
		}
	}()
	<-idle // waiting for work: a grant before would be ended by its Idle
	e.must(nil, g.Grant(ctx, "worker", func() { work <- "a" }))
	if held := g.Held(); len(held) != 1 || held[0].String() != "worker: patch nodes a" {
		t.Fatalf("held after the grant: %v, want the worker's patch", held)
	}
	if len(patched) != 0 {
		t.Fatal("the worker's patch went through before the driver released it")
	}
	e.must(nil, g.Release(ctx, 0))
	<-idle
	if len(g.Held()) != 0 || len(patched) != 1 {
		t.Fatalf("after the release: held %v, patched %v: want the worker idle with its patch made", g.Held(), patched)
	}
	close(work)
	<-done
}

// A queue's workers wait in Turns until the driver grants one a turn: the
// driver sees how many wait, a grant runs one worker until it waits again,
// and Stop (the queue shutting down) ends every wait.
func TestTurnsRunOneWaitingWorkerPerGrantAndStopEndsEveryWait(t *testing.T) {
	turns := NewTurns(NewGate())
	var mu sync.Mutex
	ran := 0
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for turns.Wait() {
				mu.Lock()
				ran++
				mu.Unlock()
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return turns.Idle() == 2, nil
	}); err != nil {
		t.Fatalf("the two workers never both waited: %v", err)
	}
	for i := 1; i <= 3; i++ {
		if err := turns.Grant(ctx, "worker"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := ran
		mu.Unlock()
		if got != i {
			t.Fatalf("after grant %d the workers ran %d times, want one run per grant", i, got)
		}
	}
	turns.Stop()
	<-done
	<-done
	if turns.Wait() {
		t.Error("a wait after Stop got a turn")
	}
}
