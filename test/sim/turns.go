package sim

import (
	"context"
	"sync"
)

// Turns lets a component's own workers, which run on goroutines of their
// own and take their work from a queue, take it only when the driver says
// so: a worker calls Wait before it takes an item (in the queue's Get), and
// the driver gives one waiting worker its turn with Grant. Together with a
// Gate that holds the workers' requests, the driver runs the component as
// its Run starts it and still orders every step.
type Turns struct {
	gate   *Gate
	grants chan struct{}
	quit   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	idle   int
}

// NewTurns returns the turns of one queue's workers on gate.
func NewTurns(gate *Gate) *Turns {
	return &Turns{gate: gate, grants: make(chan struct{}), quit: make(chan struct{})}
}

// Wait ends the calling worker's turn (Gate.Idle) and waits for its next
// one. It reports false once Stop was called: the queue is shutting down.
func (t *Turns) Wait() bool {
	t.gate.Idle()
	t.mu.Lock()
	t.idle++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.idle--
		t.mu.Unlock()
	}()
	select {
	case <-t.grants:
		return true
	case <-t.quit:
		return false
	}
}

// Grant gives one waiting worker its turn (Gate.Grant) and returns once it
// is held at a request or waits again. With no worker to take the turn it
// returns ctx's error once ctx ends.
func (t *Turns) Grant(ctx context.Context, name string) error {
	return t.gate.Grant(ctx, name, func() {
		select {
		case t.grants <- struct{}{}:
		case <-ctx.Done():
		}
	})
}

// Idle is how many workers wait for a turn.
func (t *Turns) Idle() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idle
}

// Stop ends every wait, now and later.
func (t *Turns) Stop() { t.once.Do(func() { close(t.quit) }) }
