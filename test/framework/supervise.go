package framework

import (
	"context"
	"sync"
	"time"
)

// SupervisorOptions is the restart back-off of a Supervisor.
type SupervisorOptions struct {
	// InitialBackoff is the wait before the first restart (default 1s; a
	// kubelet waits 10s), doubled after every exit up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait (default 30s; a kubelet's is 5m).
	MaxBackoff time.Duration
	// ResetAfter is how long a process must run for the back-off to start
	// over at InitialBackoff (default 10s; a kubelet's is 10m).
	ResetAfter time.Duration
	// OnExit is called after each exit with the exit error and the back-off
	// before the next start, e.g. to say so in a sandbox's output.
	OnExit func(p *Process, err error, backoff time.Duration)
}

// Supervisor keeps a process running as a kubelet keeps a container with
// restartPolicy Always: when the process exits, for whatever reason, it is
// started again with the same command line after a back-off.
type Supervisor struct {
	env  *Environment
	spec ProcessSpec
	opts SupervisorOptions

	mu       sync.Mutex
	current  *Process
	restarts int
	changed  chan struct{} // closed and replaced at every start
	cancel   context.CancelFunc
	done     chan struct{}
}

// Supervise starts spec and keeps it running until ctx ends or Stop is called.
func (e *Environment) Supervise(ctx context.Context, spec ProcessSpec, opts SupervisorOptions) (*Supervisor, error) {
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.ResetAfter <= 0 {
		opts.ResetAfter = 10 * time.Second
	}
	p, err := e.StartProcess(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Supervisor{env: e, spec: spec, opts: opts, current: p, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go s.loop(ctx)
	return s, nil
}

// Current returns the process running now (or the last one, between exit
// and restart).
func (s *Supervisor) Current() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Restarts returns how many times the process was started again.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Started returns a channel closed at the next (re)start.
func (s *Supervisor) Started() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Stop ends supervision and stops the current process (SIGTERM, then SIGKILL
// after grace).
func (s *Supervisor) Stop(grace time.Duration) error {
	s.Detach()
	return s.Current().Stop(grace)
}

// Detach ends supervision and leaves the current process running; the
// Environment's Stop still stops it.
func (s *Supervisor) Detach() {
	s.cancel()
	<-s.done
}

func (s *Supervisor) loop(ctx context.Context) {
	defer close(s.done)
	backoff := s.opts.InitialBackoff
	for {
		p := s.Current()
		started := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-p.Done():
		}
		if time.Since(started) >= s.opts.ResetAfter {
			backoff = s.opts.InitialBackoff
		}
		_, err := p.Exited()
		if s.opts.OnExit != nil {
			s.opts.OnExit(p, err, backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
		np, err := s.env.StartProcess(s.spec)
		for err != nil {
			s.env.Logf("restarting %s: %v", s.spec.Name, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			np, err = s.env.StartProcess(s.spec)
		}
		s.mu.Lock()
		s.current = np
		s.restarts++
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}
