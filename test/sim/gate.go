package sim

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// Gate runs goroutines one at a time between their API requests, in an order
// the driver chooses: the way to make races between a controller's workers
// reachable and replayable. A real worker's evaluation takes microseconds and
// its writes milliseconds, so workers overlap at their requests; the gate
// holds every request of a gated client (API.InstallGated) until the driver
// releases it, and lets only one goroutine run between two such points.
//
// Go starts a goroutine and returns once it is held at a request or has
// returned; Release lets one held request through and returns likewise. So
// when either returns, every goroutine of the gate is held or done, and the
// driver picks the next one to release (from the seed, in a simulation) from
// Held, whose order is the order of arrival, itself fixed by the releases.
//
// A request that arrives while no goroutine of the gate runs (the driver's
// own, between two rounds) passes. A goroutine of the gate must make its
// requests itself: one it starts runs beside it, which the gate cannot see.
type Gate struct {
	mu sync.Mutex
	// current is the goroutine that runs (nil: all are held or done), and
	// stopped is closed when it is held or returns.
	current *gated
	stopped chan struct{}
	held    []*gated
	running int
}

type gated struct {
	name    string
	action  clienttesting.Action
	release chan struct{}
}

// HeldRequest is a goroutine of a gate held at a request.
type HeldRequest struct {
	// Name is the goroutine's, as given to Go.
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

// NewGate returns a gate with no goroutine.
func NewGate() *Gate { return &Gate{} }

// Go runs fn on a goroutine of its own and returns once that goroutine is
// held at a request or fn has returned. It must be called only when no
// goroutine of the gate runs: before any, or after Go or Release returned.
// An error says that fn neither made a request nor returned before ctx
// ended (it waits for something only a held goroutine or the driver can do).
func (g *Gate) Go(ctx context.Context, name string, fn func()) error {
	h, stopped, err := g.turn(name, true)
	if err != nil {
		return err
	}
	go func() {
		defer g.done(h)
		fn()
	}()
	return g.await(ctx, h, stopped)
}

// Grant gives a turn to a goroutine that runs outside the gate's Go, such as
// a component's worker that waits for work in a queue the driver controls:
// wake hands it its work (and returns once the goroutine took it), and Grant
// returns once that goroutine is held at a request or calls Idle. The same
// rules as for Go apply: only when no goroutine of the gate runs. The
// goroutine must wait for its work already, past its Idle: an Idle that
// comes after the grant ends the turn it was given.
func (g *Gate) Grant(ctx context.Context, name string, wake func()) error {
	h, stopped, err := g.turn(name, false)
	if err != nil {
		return err
	}
	wake()
	return g.await(ctx, h, stopped)
}

// turn makes name the goroutine that runs, one Go starts (started) or one
// Grant wakes, unless another runs.
func (g *Gate) turn(name string, started bool) (*gated, chan struct{}, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current != nil {
		return nil, nil, fmt.Errorf("sim: gate: %s given a turn while %s runs", name, g.current.name)
	}
	if started {
		g.running++
	}
	h := &gated{name: name}
	return h, g.run(h), nil
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

// Running is how many goroutines Go started that have not returned.
func (g *Gate) Running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

// Release lets the i-th held request (in Held's order) through and returns
// once its goroutine is held at its next request or has returned.
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

func (g *Gate) done(h *gated) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.current == h {
		g.stop()
	}
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
