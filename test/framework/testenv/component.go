package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"nodehealth.io/nodehealth/test/framework"
)

const (
	// componentStopGrace is how long a component gets to exit on SIGTERM.
	componentStopGrace = 20 * time.Second
	// failedLogLines is how much of a component's log a failed test prints.
	failedLogLines = 60
)

// Component is one of nodehealth's binaries for StartComponent to run.
type Component struct {
	// Binary is the command's name, one of the Suite's Commands, e.g.
	// "nodehealth-controller".
	Binary string
	// Name names the process and its log; Binary-<test name> when empty.
	Name string
	// Config is the configuration file's content. The kubeconfig and the
	// serving addresses are passed as flags, so it need not name them.
	Config string
	// Kubeconfig is what the component authenticates with; the admin
	// kubeconfig when empty.
	Kubeconfig string
	// Args are appended to the command line.
	Args []string
}

// StartComponent runs c for the rest of the test: stopped when the test
// ends, the tail of its log printed when the test failed.
func StartComponent(t testing.TB, c Component) *framework.Component {
	t.Helper()
	p, err := StartComponentFor(t, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(componentStopGrace); err != nil {
			t.Errorf("stopping %s: %v", p.Name, err)
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.Name, p.LogTail(failedLogLines))
		}
	})
	return p
}

// StartComponentFor starts c without tying it to t: for a component the
// whole package shares, which the Environment stops at the end. t only
// names the binary's build.
func StartComponentFor(t testing.TB, c Component) (*framework.Component, error) {
	t.Helper()
	name := c.Name
	if name == "" {
		name = c.Binary + "-" + strings.ReplaceAll(t.Name(), "/", "-")
	}
	return Env(t).StartComponent(framework.ComponentSpec{
		Name: name, Path: Binary(t, c.Binary), Config: c.Config, Kubeconfig: c.Kubeconfig, Args: c.Args,
	})
}

// Metric scrapes url (a /metrics endpoint) and returns the sum of the series
// of name whose labels include labels (framework.SumMetric).
func Metric(t testing.TB, url, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := framework.ScrapeMetric(Context(t), url, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// WaitMetric waits until Metric(url, name, labels) is value.
func WaitMetric(t testing.TB, url, name string, labels map[string]string, value float64) {
	t.Helper()
	var last float64
	var lastErr error
	err := wait.PollUntilContextCancel(Context(t), 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last, lastErr = framework.ScrapeMetric(ctx, url, name, labels)
		return lastErr == nil && last == value, nil
	})
	if err != nil {
		t.Fatalf("%s%v = %v (%v), want %v: %v", name, labels, last, lastErr, value, err)
	}
}
