// Package process is the runtime every nodehealth binary shares around its
// configuration (package options parses, loads and validates that): the
// Runtime a component's run function gets, signal handling (SIGTERM and SIGINT
// end the run context with ErrTerminated), serving /metrics, /healthz, /livez
// and /readyz, and the configuration-file watch that restarts a binary
// cleanly when a valid new version appears (ErrConfigChanged, after the
// OnConfigChange hooks). options.NewCommand wires them into a cobra command.
package process

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
)

var (
	// ErrConfigChanged is the cause of the run context's cancellation when a
	// valid new configuration file appeared. Components tell it apart from
	// ErrTerminated with context.Cause: the extension heartbeat must not
	// release its Lease for a restart, only for a real shutdown (docs/heartbeat.md).
	ErrConfigChanged = errors.New("configuration file changed; restarting to apply it")
	// ErrTerminated is the cause when SIGTERM or SIGINT arrived.
	ErrTerminated = errors.New("terminated by signal")
)

// ShutdownHookTimeout bounds the shutdown hooks run before a restart for a
// changed configuration, so that a stuck hook cannot keep the old
// configuration running forever.
const ShutdownHookTimeout = 30 * time.Second

// Runtime is what a component's run function gets: the validated
// configuration and the process-wide pieces around it.
type Runtime[T runtime.Object] struct {
	// Config is the validated, effective configuration.
	Config T
	// ConfigFile is --config (empty when none was given).
	ConfigFile string
	// FeatureGate has the configuration's featureGates applied.
	FeatureGate featuregate.FeatureGate
	// Registry is served at /metrics; components register their metrics
	// here. It already holds the Go and process collectors and the config
	// watcher's metrics.
	Registry *prometheus.Registry

	mu    sync.Mutex
	hooks []func(context.Context)
}

// OnConfigChange registers a hook that runs when a valid new configuration
// file appeared, before the run context is cancelled with ErrConfigChanged
// and the process exits 0 so that the pod restarts with the new file. The
// controller releases its leadership here; the heartbeat registers nothing
// (its Lease stays held across the restart).
func (r *Runtime[T]) OnConfigChange(hook func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, hook)
}

// RunConfigChangeHooks runs the OnConfigChange hooks in order, bounded by
// ShutdownHookTimeout.
func (r *Runtime[T]) RunConfigChangeHooks(ctx context.Context) {
	r.mu.Lock()
	hooks := append([]func(context.Context){}, r.hooks...)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, ShutdownHookTimeout)
	defer cancel()
	for _, hook := range hooks {
		hook(ctx)
	}
}

// CancelOnSignal cancels ctx with ErrTerminated on the first SIGTERM or
// SIGINT. The returned function stops listening.
func CancelOnSignal(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	logger := klog.FromContext(ctx)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			logger.Info("Received signal, shutting down", "signal", sig.String())
			cancel(ErrTerminated)
		case <-ctx.Done():
		case <-done:
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
	}
}
