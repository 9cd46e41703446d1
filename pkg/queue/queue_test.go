package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// recordingLimiter records what the queue asks of its rate limiter and delays
// nothing, so that a key added back rate limited is queued again at once.
type recordingLimiter struct{ limited, forgotten []string }

func (r *recordingLimiter) When(key string) time.Duration {
	r.limited = append(r.limited, key)
	return 0
}
func (r *recordingLimiter) Forget(key string)          { r.forgotten = append(r.forgotten, key) }
func (r *recordingLimiter) NumRequeues(key string) int { return 0 }

func newQueue(t *testing.T) (workqueue.TypedRateLimitingInterface[string], *recordingLimiter) {
	r := &recordingLimiter{}
	q := workqueue.NewTypedRateLimitingQueueWithConfig[string](r, workqueue.TypedRateLimitingQueueConfig[string]{Name: "test"})
	t.Cleanup(q.ShutDown)
	return q, r
}

func TestAKeyWhoseSyncFailsIsAddedBackRateLimitedAndNotForgotten(t *testing.T) {
	q, r := newQueue(t)
	q.Add("node-a")
	var synced []string
	sync := func(_ context.Context, key string) error {
		synced = append(synced, key)
		return errors.New("conflict")
	}
	if !ProcessNext(context.Background(), q, sync, "Syncing", "node") {
		t.Fatal("ProcessNext returned false on a running queue")
	}
	if !slices.Equal(synced, []string{"node-a"}) {
		t.Errorf("synced %v, want [node-a]", synced)
	}
	if !slices.Equal(r.limited, []string{"node-a"}) || len(r.forgotten) != 0 {
		t.Errorf("rate limited %v and forgot %v, want node-a rate limited and nothing forgotten", r.limited, r.forgotten)
	}
	// The rate limiter delays nothing, and the queue adds a key due now at
	// once.
	if q.Len() != 1 {
		t.Errorf("%d keys queued after a failure, want the failed one again", q.Len())
	}
}

func TestAKeyWhoseSyncSucceedsIsForgottenAndNotQueuedAgain(t *testing.T) {
	q, r := newQueue(t)
	q.Add("node-a")
	if !ProcessNext(context.Background(), q, func(context.Context, string) error { return nil }, "Syncing", "node") {
		t.Fatal("ProcessNext returned false on a running queue")
	}
	if !slices.Equal(r.forgotten, []string{"node-a"}) || len(r.limited) != 0 {
		t.Errorf("forgot %v and rate limited %v, want node-a forgotten and nothing rate limited", r.forgotten, r.limited)
	}
	if q.Len() != 0 {
		t.Errorf("%d keys queued after a success, want 0", q.Len())
	}
}

func TestAShutDownQueueEndsTheWorkerWithoutSyncing(t *testing.T) {
	q, _ := newQueue(t)
	q.ShutDown()
	synced := false
	if ProcessNext(context.Background(), q, func(context.Context, string) error { synced = true; return nil }, "Syncing", "node") {
		t.Error("ProcessNext returned true on a shut-down queue")
	}
	if synced {
		t.Error("ProcessNext synced a key of a shut-down queue")
	}
}

// A counted handler passes each kind of notification on, and counts it only
// once the handler is done: while the handler runs, the count is the one
// before.
func TestACountedHandlerCountsEachNotificationOnceItsHandlerIsDone(t *testing.T) {
	var n atomic.Int64
	var got []string
	seen := func(what string) {
		got = append(got, fmt.Sprintf("%s at count %d", what, n.Load()))
	}
	h := Counted(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { seen("add " + obj.(string)) },
		UpdateFunc: func(_, newObj interface{}) { seen("update " + newObj.(string)) },
		DeleteFunc: func(obj interface{}) { seen("delete " + obj.(string)) },
	}, &n)
	h.OnAdd("a", true)
	h.OnUpdate("a", "b")
	h.OnDelete("b")
	want := []string{"add a at count 0", "update b at count 1", "delete b at count 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("the handler saw %q, want %q", got, want)
	}
	if n.Load() != 3 {
		t.Fatalf("count after three notifications: %d, want 3", n.Load())
	}
}
