package framework_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"nodehealth.io/nodehealth/test/framework"
)

// These tests start their own control planes (no TestMain environment): they check
// the framework's promises about failure and teardown.

func TestStartFailureReportsLogTailAndLeavesNothingRunning(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := framework.Start(ctx,
		framework.WithoutControllerManager(), framework.WithoutScheduler(), framework.WithoutKwok(),
		framework.WithAPIServerFlags("--no-such-flag=1"),
		framework.WithLogf(t.Logf))
	if err == nil {
		t.Fatal("Start succeeded with an unknown kube-apiserver flag")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"kube-apiserver exited", "unknown flag: --no-such-flag", "artifacts kept in"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
	// The directory is kept for its logs; this test does not need it.
	if dir, _, ok := strings.Cut(strings.SplitN(msg, "artifacts kept in ", 2)[1], ")"); ok {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
}

func TestStopTerminatesEveryProcessAndRemovesDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env, err := framework.Start(ctx, framework.WithLogf(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	procs := env.Processes()
	if len(procs) != 5 {
		t.Errorf("started %d processes, want 5 (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)", len(procs))
	}
	stopped := time.Now()
	if err := env.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(stopped).Round(time.Millisecond))
	for _, p := range procs {
		if exited, _ := p.Exited(); !exited {
			t.Errorf("%s (pid %d) still running after Stop", p.Name, p.Pid())
		}
		// Signal 0 probes the process group: it must be gone too.
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s still exists (kill -0: %v)", p.Name, err)
		}
	}
	if _, err := os.Stat(env.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Stop (err %v)", env.Dir, err)
	}
	if err := env.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
