package inprocess

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	operatorsetup "nodehealth.io/nodehealth/internal/setup/operator"
	"nodehealth.io/nodehealth/pkg/updater/operator"
)

// Operator is an update operator running in the test binary.
type Operator struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	recorded []string
}

// StartOperator runs the update operator as cmd/update-operator does
// (internal/setup/operator), with clients' identity and workers per
// controller, except that its Events are kept for Events instead of being
// sent to the API server. It stops the operator when the test ends.
func StartOperator(t testing.TB, clients operatorsetup.Clients, opts operator.Options, workers int) *Operator {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	o := &Operator{t: t, cancel: cancel, done: make(chan struct{})}
	recorder := record.NewFakeRecorder(1000)
	go func() {
		for {
			select {
			case e := <-recorder.Events:
				o.mu.Lock()
				o.recorded = append(o.recorded, e)
				o.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	op, err := operatorsetup.New(ctx, clients, operatorsetup.Config{Options: opts, Recorder: recorder})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(o.done)
		op.Run(ctx, workers)
	}()
	t.Cleanup(o.Stop)
	return o
}

// Stop kills the operator and waits until none of its goroutines can write.
// It is safe to call more than once.
func (o *Operator) Stop() {
	o.once.Do(func() {
		o.cancel()
		select {
		case <-o.done:
		case <-time.After(stopTimeout):
			o.t.Errorf("operator did not stop within %s", stopTimeout)
		}
	})
}

// Events are the Events the operator recorded so far ("Type Reason
// message"), in order.
func (o *Operator) Events() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.recorded...)
}
