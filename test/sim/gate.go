package sim

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// Gate runs a component's workers one at a time between their API requests,
// in an order the driver chooses: the way to make races between a
// controller's workers reachable and replayable. A real worker's evaluation
// takes microseconds and its writes milliseconds, so workers overlap at their
// requests; the gate holds every request of a gated client
// (API.InstallGated) until the driver releases it, and lets only one worker
// run between two such points.
//
// Grant (or Turns.Grant) gives a worker its turn and returns once it is held
// at a request or waits for its next turn; Release lets one held request
// through and returns likewise. So when either returns, every worker of the
// gate is held or waiting, and the driver picks the next one to release (from
// the seed, in a simulation) from Held, whose order is the order of arrival,
// itself fixed by the releases.
//
// A request that arrives while no worker of the gate runs (the driver's own,
// between two rounds) passes. A worker of the gate must make its requests
// itself: a goroutine it starts runs beside it, which the gate cannot see.
type Gate struct {
	mu sync.Mutex
	// current is the goroutine that runs (nil: all are held or done), and
	// stopped is closed when it is held or returns.
	current *gated
	stopped chan struct{}
	held    []*gated
}

type gated struct {
	name    string
	action  clienttesting.Action
	release chan struct{}
}

// HeldRequest is a goroutine of a gate held at a request.
type HeldRequest struct {
	// Name is the worker's, as given to Grant.
	Name   string
	Action clienttesting.Action
}

func (h HeldRequest) String() string {
	return fmt.Sprintf("%s: %s", h.Name, actionString(h.Action))
}

// actionString names a request: verb, resource, subresource and name.
func actionString(a clienttesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		s += "/" + sub
	}
	switch act := a.(type) {
	case interface{ GetName() string }: // get, patch, delete
		s += " " + act.GetName()
	case interface{ GetObject() runtime.Object }: // create, update
		if m, ok := act.GetObject().(interface{ GetName() string }); ok {
			s += " " + m.GetName()
		}
	case clienttesting.ListAction:
		if f := act.GetListRestrictions().Fields; f != nil && !f.Empty() {
			s += " " + f.String()
		}
	}
	return s
}

// NewGate returns a gate with no worker.
func NewGate() *Gate { return &Gate{} }

// Grant gives a turn to a worker that waits for work in a queue the driver
// controls: wake hands it its work (and returns once the worker took it),
// and Grant returns once that worker is held at a request or calls Idle.
// Call it only when no worker of the gate runs: before any, or after Grant
// or Release returned. The worker must wait for its work already, past its
// Idle: an Idle that comes after the grant ends the turn it was given. An
// error says that the worker neither made a request nor went idle before ctx
// ended (it waits for something only a held worker or the driver can do).
func (g *Gate) Grant(ctx context.Context, name string, wake func()) error {
	g.mu.Lock()
	if g.current != nil {
		defer g.mu.Unlock()
		return fmt.Errorf("sim: gate: %s given a turn while %s runs", name, g.current.name)
	}
	h := &gated{name: name}
	stopped := g.run(h)
	g.mu.Unlock()
	wake()
	return g.await(ctx, h, stopped)
}

// Idle ends the turn of the goroutine that runs, if one does: a goroutine
// Grant woke calls it when it has done its work and waits for more. Called
// by a goroutine that has no turn (one waiting for its first), it does
// nothing.
func (g *Gate) Idle() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current != nil {
		g.stop()
	}
}

// Held lists the goroutines held at a request, in the order they arrived.
func (g *Gate) Held() []HeldRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]HeldRequest, len(g.held))
	for i, h := range g.held {
		out[i] = HeldRequest{Name: h.name, Action: h.action}
	}
	return out
}

// Release lets the i-th held request (in Held's order) through and returns
// once its worker is held at its next request or waits for its next turn.
func (g *Gate) Release(ctx context.Context, i int) error {
	g.mu.Lock()
	if g.current != nil {
		g.mu.Unlock()
		return fmt.Errorf("sim: gate: a request released while %s runs", g.current.name)
	}
	if i < 0 || i >= len(g.held) {
		g.mu.Unlock()
		return fmt.Errorf("sim: gate: no held request %d of %d", i, len(g.held))
	}
	h := g.held[i]
	g.held = append(g.held[:i:i], g.held[i+1:]...)
	release := h.release
	stopped := g.run(h)
	g.mu.Unlock()
	close(release)
	return g.await(ctx, h, stopped)
}

// run makes h the goroutine that runs. Callers hold g.mu.
func (g *Gate) run(h *gated) chan struct{} {
	g.current = h
	g.stopped = make(chan struct{})
	h.action, h.release = nil, nil
	return g.stopped
}

func (g *Gate) await(ctx context.Context, h *gated, stopped chan struct{}) error {
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sim: gate: %s neither made a request nor returned: %w", h.name, ctx.Err())
	}
}

// stop ends the current goroutine's turn. Callers hold g.mu.
func (g *Gate) stop() {
	g.current = nil
	close(g.stopped)
}

// wait holds a request of a gated client until it is released; a request
// that arrives while none of the gate's goroutines runs passes.
func (g *Gate) wait(action clienttesting.Action) {
	g.mu.Lock()
	h := g.current
	if h == nil {
		g.mu.Unlock()
		return
	}
	h.action, h.release = action, make(chan struct{})
	release := h.release
	g.held = append(g.held, h)
	g.stop()
	g.mu.Unlock()
	<-release
}
