package framework

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// Fault injection on the processes of an Environment: the control plane's
// (etcd, kube-apiserver) and any started with StartProcess.

// Spec returns the command line the process was started with.
func (p *Process) Spec() ProcessSpec { return p.spec }

// Signal sends sig to the process alone (not its group).
func (p *Process) Signal(sig syscall.Signal) error {
	if exited, _ := p.Exited(); exited {
		return fmt.Errorf("%s (pid %d) has exited", p.Name, p.Pid())
	}
	return syscall.Kill(p.Pid(), sig)
}

// Pause stops the process with SIGSTOP: it keeps its sockets open but does
// nothing, like a process stuck on a dead disk or starved of CPU. Continue
// resumes it.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Continue resumes a paused process (SIGCONT).
func (p *Process) Continue() error { return p.Signal(syscall.SIGCONT) }

// Kill sends SIGKILL to the process group and waits until the process has exited.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.Pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.Name, p.Pid())
	}
}

// Process returns the newest process started under name (e.g. Etcd or
// KubeAPIServer), or nil.
func (e *Environment) Process(name string) *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.processes) - 1; i >= 0; i-- {
		if e.processes[i].Name == name {
			return e.processes[i]
		}
	}
	return nil
}

// Restart stops p if it still runs (SIGTERM, then SIGKILL after grace), starts
// the same command line again — same ports, same data directory, so clients
// reconnect to the same address and find their data — and returns the new
// process, which takes p's place in Processes (Stop order is unchanged). For
// etcd and kube-apiserver it returns once the new process is ready.
func (e *Environment) Restart(ctx context.Context, p *Process, grace time.Duration) (*Process, error) {
	if exited, _ := p.Exited(); !exited {
		if err := p.Stop(grace); err != nil {
			return nil, err
		}
	}
	np, err := startProcess(p.spec, p.LogPath)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if i := slices.Index(e.processes, p); i >= 0 {
		e.processes[i] = np
	} else {
		e.processes = append(e.processes, np)
	}
	ready := e.ready[p.Name]
	e.mu.Unlock()
	if ready != nil {
		started := time.Now()
		if err := ready(ctx, np); err != nil {
			return np, err
		}
		e.opts.logf("%s restarted and ready in %s", p.Name, time.Since(started).Round(100*time.Millisecond))
	}
	return np, nil
}

// RestartEtcd restarts etcd on its ports and data directory; see Restart.
func (e *Environment) RestartEtcd(ctx context.Context) (*Process, error) {
	return e.restartNamed(ctx, Etcd)
}

// RestartAPIServer restarts kube-apiserver on its port; see Restart. Clients
// (Client, Config) keep working once it is ready.
func (e *Environment) RestartAPIServer(ctx context.Context) (*Process, error) {
	return e.restartNamed(ctx, KubeAPIServer)
}

func (e *Environment) restartNamed(ctx context.Context, name string) (*Process, error) {
	p := e.Process(name)
	if p == nil {
		return nil, fmt.Errorf("no %s process in this environment", name)
	}
	return e.Restart(ctx, p, e.opts.stopGracePeriod)
}

// setReady records how to wait for a restarted process of this name.
func (e *Environment) setReady(name string, ready func(context.Context, *Process) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready == nil {
		e.ready = map[string]func(context.Context, *Process) error{}
	}
	e.ready[name] = ready
}
