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

// Two workers of a gate, each reading its node and writing it twice: each
// runs only until its next request, the driver decides which request is
// served next, and the writes land in the order it released them, whatever
// the goroutines' scheduling. A request made while none of them runs (the
// driver's own) passes, though the gated client holds requests meanwhile.
func TestAGateRunsItsWorkersOneRequestAtATimeInTheOrderTheDriverReleasesThem(t *testing.T) {
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
	// Each worker waits in turns of its own, as the workers of two queues
	// do, and works its node once per turn.
	turns := map[string]*Turns{"a": NewTurns(g), "b": NewTurns(g)}
	done := make(chan struct{})
	for name, tn := range turns {
		go func() {
			defer func() { done <- struct{}{} }()
			for tn.Wait() {
				if _, err := nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Error(err)
				}
				for _, x := range []string{"1", "2"} {
					if _, err := nodes.Patch(ctx, name, types.MergePatchType, mergePatch("", map[string]string{"x": x}), metav1.PatchOptions{}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	defer func() {
		for _, tn := range turns {
			tn.Stop()
		}
		<-done
		<-done
	}()
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return turns["a"].Idle() == 1 && turns["b"].Idle() == 1, nil
	}); err != nil {
		t.Fatalf("the two workers never both waited: %v", err)
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
	e.must(nil, turns["a"].Grant(ctx, "a"))
	e.must(nil, turns["b"].Grant(ctx, "b"))
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
	e.must(nil, g.Release(ctx, 1)) // a writes x=2 and waits for its next turn
	heldAre("b: patch nodes b")
	if turns["a"].Idle() != 1 || turns["b"].Idle() != 0 {
		t.Fatalf("waiting for a turn: a %d, b %d; want a alone", turns["a"].Idle(), turns["b"].Idle())
	}
	e.must(nil, g.Release(ctx, 0)) // b writes x=2 and waits
	heldAre()
	if turns["b"].Idle() != 1 {
		t.Fatal("b does not wait for a turn after its last write")
	}
	if got, want := strings.Join(stored, " "), "b=1 a=1 a=2 b=2"; got != want {
		t.Errorf("writes stored in the order %s, want the releases' %s", got, want)
	}
}

// A worker that waits for something only the driver can do neither makes a
// request nor waits again: Grant says so when its context ends, instead of
// hanging, and the gate gives no other turn while that worker runs.
func TestAGateSaysWhichWorkerNeitherMadeARequestNorWaitedAgain(t *testing.T) {
	g := NewGate()
	stuck, other := NewTurns(g), NewTurns(g)
	never := make(chan struct{})
	defer close(never)
	go func() {
		for stuck.Wait() {
			<-never
		}
	}()
	defer stuck.Stop()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return stuck.Idle() == 1, nil
	}); err != nil {
		t.Fatalf("the worker never waited for a turn: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := stuck.Grant(ctx, "stuck")
	if err == nil || !strings.Contains(err.Error(), "stuck neither made a request nor returned") {
		t.Fatalf("a grant to a worker that waits forever: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := other.Grant(ctx, "next"); err == nil || !strings.Contains(err.Error(), "while stuck runs") {
		t.Errorf("a grant while stuck still runs: %v, want an error saying stuck runs", err)
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
