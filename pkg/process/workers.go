package process

import (
	"context"
	"os"
	"sync"
)

// Workers are the goroutines of a binary's work, run under one context that
// ends with the process's, so that the process returns only once they have
// returned: a write cut off by the process exiting is what graceful shutdown
// is for.
type Workers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewWorkers returns Workers whose context derives ctx.
func NewWorkers(ctx context.Context) *Workers {
	w := &Workers{}
	w.ctx, w.cancel = context.WithCancel(ctx)
	return w
}

// Context is the workers' context, for work done before a goroutine starts.
func (w *Workers) Context() context.Context { return w.ctx }

// Go runs f in a goroutine with the workers' context.
func (w *Workers) Go(f func(ctx context.Context)) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(w.ctx)
	}()
}

// Stop ends the workers' context and waits for every goroutine to return.
func (w *Workers) Stop() {
	w.cancel()
	w.wg.Wait()
}

// RunUntilStopped waits until ctx ends or serving fails (an error on
// serveErrs, from Serve), then stops the workers; it returns the serving
// error, nil when ctx ended.
func (w *Workers) RunUntilStopped(ctx context.Context, serveErrs <-chan error) error {
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveErrs:
	}
	w.Stop()
	return serveErr
}

// PodNameEnv names the environment variable holding the pod name (downward
// API metadata.name), which the per-node binaries write as their Lease's
// holderIdentity.
const PodNameEnv = "POD_NAME"

// PodHolderIdentity is the holder identity of a per-node binary's Lease: the
// pod name, else the host name, else the component's name.
func PodHolderIdentity(component string) string {
	if name := os.Getenv(PodNameEnv); name != "" {
		return name
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		return name
	}
	return component
}
