// Package inprocess runs the node-health controller and the update operator
// inside the test binary, wired by internal/setup as their binaries are, for
// tests that need several side by side or read their metrics, logs and
// Events directly.
package inprocess

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	controllersetup "nodehealth.io/nodehealth/internal/setup/controller"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/test/framework"
)

// UserAgent is the field manager of an in-process controller's writes, to
// tell them apart from kwok's and the test's own.
const UserAgent = "nodehealth-it-controller"

// stopTimeout bounds how long Stop waits for the controller's goroutines.
const stopTimeout = time.Minute

// Controller is a node-health controller running in the test binary.
type Controller struct {
	// Metrics are the controller's metrics, registered in Registry.
	Metrics  *nodehealth.Metrics
	Registry *prometheus.Registry

	t      testing.TB
	logger klog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// StartController runs the controller as cmd/nodehealth-controller does
// (internal/setup/controller) except that it sees only the nodes matching
// nodeSelector, so that tests sharing a control plane never see each other's
// nodes. It returns once both informers have synced, so that a node created
// afterwards is new to the controller, and stops it when the test ends.
func StartController(t testing.TB, config *rest.Config, nodeSelector string, opts nodehealth.Options) *Controller {
	t.Helper()
	cfg := rest.CopyConfig(config)
	cfg.UserAgent = UserAgent
	cfg.QPS, cfg.Burst = 100, 200
	clients, err := controllersetup.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Buffered as well as written to t, so that a test can assert on what
	// the controller logged.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	registry := prometheus.NewRegistry()
	metrics := nodehealth.NewMetrics(registry)
	c, err := controllersetup.New(ctx, clients, controllersetup.Config{Options: opts, Metrics: metrics, NodeSelector: nodeSelector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	run := &Controller{Metrics: metrics, Registry: registry, t: t, logger: logger, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		c.Run(ctx, 2)
	}()
	t.Cleanup(run.Stop)

	syncCtx, syncCancel := context.WithTimeout(ctx, stopTimeout)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), c.HasSynced) {
		t.Fatal("the controller's informers did not sync")
	}
	return run
}

// Stop ends the controller and waits until it has stopped. It is safe to
// call more than once.
func (c *Controller) Stop() {
	c.once.Do(func() {
		c.cancel()
		select {
		case <-c.done:
		case <-time.After(stopTimeout):
			c.t.Errorf("controller did not stop within %s", stopTimeout)
		}
	})
}

// Logs returns what the controller logged so far.
func (c *Controller) Logs() string {
	if u, ok := c.logger.GetSink().(ktesting.Underlier); ok {
		return u.GetBuffer().String()
	}
	return ""
}

// Metric sums the series of name whose labels include want
// (framework.SumMetric: a histogram counts its samples).
func (c *Controller) Metric(name string, want map[string]string) float64 {
	families, err := c.Registry.Gather()
	if err != nil {
		c.t.Errorf("gathering metrics: %v", err)
	}
	return framework.SumMetric(families, name, want)
}

// Series counts the series of the metric name.
func (c *Controller) Series(name string) int {
	families, _ := c.Registry.Gather()
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// WaitMetric waits, within ctx, until Metric(name, want) is value.
func (c *Controller) WaitMetric(t testing.TB, ctx context.Context, name string, want map[string]string, value float64) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.Metric(name, want) == value, nil
	})
	if err != nil {
		t.Fatalf("%s%v = %v, want %v", name, want, c.Metric(name, want), value)
	}
}
