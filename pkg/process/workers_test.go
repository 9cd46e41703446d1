package process

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
)

// A process that stops (its context ends) returns only once every worker,
// including one started later, has returned.
func TestRunUntilStoppedWaitsForEveryWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWorkers(ctx)
	var returned atomic.Int32
	for range 2 {
		w.Go(func(ctx context.Context) {
			<-ctx.Done()
			returned.Add(1)
		})
	}
	cancel()
	if err := w.RunUntilStopped(ctx, nil); err != nil {
		t.Fatalf("RunUntilStopped = %v after the context ended, want nil", err)
	}
	if got := returned.Load(); got != 2 {
		t.Fatalf("%d of 2 workers had returned when RunUntilStopped did", got)
	}
}

// Serving failing stops the workers although the process's context lives
// on, and its error is what the process returns.
func TestRunUntilStoppedStopsTheWorkersWhenServingFails(t *testing.T) {
	w := NewWorkers(context.Background())
	stopped := make(chan struct{})
	w.Go(func(ctx context.Context) {
		<-ctx.Done()
		close(stopped)
	})
	serveErrs := make(chan error, 1)
	failed := errors.New("listener closed")
	serveErrs <- failed
	if err := w.RunUntilStopped(context.Background(), serveErrs); !errors.Is(err, failed) {
		t.Fatalf("RunUntilStopped = %v, want the serving error", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the worker was still running when RunUntilStopped returned")
	}
}

func TestPodHolderIdentityPrefersThePodName(t *testing.T) {
	t.Setenv(PodNameEnv, "kube-proxy-x7k2p")
	if got := PodHolderIdentity("extension-heartbeat"); got != "kube-proxy-x7k2p" {
		t.Errorf("PodHolderIdentity = %q with POD_NAME set", got)
	}
	t.Setenv(PodNameEnv, "")
	if host, _ := os.Hostname(); PodHolderIdentity("extension-heartbeat") != host {
		t.Errorf("PodHolderIdentity = %q, want the host name %q", PodHolderIdentity("extension-heartbeat"), host)
	}
}
