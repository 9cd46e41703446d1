package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec describes a child process the Environment starts and owns.
type ProcessSpec struct {
	// Name identifies the process in errors and names its log file (<Name>.log).
	Name string
	// Path is the executable.
	Path string
	// Args are the command-line arguments, without the executable.
	Args []string
	// Env is appended to the environment the process inherits.
	Env []string
	// Dir is the working directory; the Environment's directory when empty, so that
	// a binary writing relative paths never litters the caller's working directory.
	Dir string
}

// Process is a child process started by an Environment. Its stdout and stderr go to
// LogPath.
type Process struct {
	Name    string
	LogPath string

	spec    ProcessSpec
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	waitErr error
}

// Pid returns the operating-system process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and with which error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// LogTail returns the last n lines of the process's log file.
func (p *Process) LogTail(n int) string {
	return tailFile(p.LogPath, n)
}

// Stop sends SIGTERM to the process group, waits up to grace for the process to exit,
// then sends SIGKILL. It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) error {
	defer p.logFile.Close()
	if exited, _ := p.Exited(); exited {
		return nil
	}
	// Signal the whole group (negative pid): a binary that forks helpers takes them
	// along. Errors only mean the group is already gone.
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	// A paused process (Pause) only handles the SIGTERM once it runs again.
	_ = syscall.Kill(-p.Pid(), syscall.SIGCONT)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) did not exit within %s of SIGTERM and was killed", p.Name, p.Pid(), grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.Name, p.Pid())
	}
}

// spawnRequests feeds the one goroutine that forks every child. See spawner.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

// spawner forks children from one goroutine locked to its OS thread for the life of
// the program. Pdeathsig fires when the *thread* that forked the child exits, not the
// process; the Go runtime may retire threads, so starting children from arbitrary
// goroutines could kill them early. A locked goroutine that never returns keeps its
// thread, and the signal then fires exactly when the whole program dies.
func spawner() {
	runtime.LockOSThread()
	for req := range spawnRequests {
		req.errc <- req.cmd.Start()
	}
}

func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go spawner()
	})
	errc := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

// startProcess starts spec with its output appended to logPath.
func startProcess(spec ProcessSpec, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log file for %s: %w", spec.Name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), spec.Path, strings.Join(spec.Args, " "))

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Die with us, however we die (panic, test timeout, SIGKILL).
		Pdeathsig: syscall.SIGKILL,
		// Own process group: a terminal's Ctrl-C reaches only us, so we can shut the
		// children down in order, and Stop can signal a child's whole group.
		Setpgid: true,
	}
	if err := startCmd(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, spec: spec, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitUntil polls check until it succeeds, the process exits, or ctx is done. Polling a
// health endpoint is the readiness signal these binaries offer; there is no fixed sleep.
func waitUntil(ctx context.Context, p *Process, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = check(attemptCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			return &startError{name: p.Name, msg: fmt.Sprintf("exited (%v) before %s", p.waitErr, what), p: p}
		case <-ctx.Done():
			return &startError{name: p.Name, msg: fmt.Sprintf("not %s: %v (last check: %v)", what, ctx.Err(), lastErr), p: p}
		case <-ticker.C:
		}
	}
}

// startError is a failed start; its message carries the tail of the process log,
// because that is where the actual reason (a bad flag, a port in use) is.
type startError struct {
	name string
	msg  string
	p    *Process
}

func (e *startError) Error() string {
	return fmt.Sprintf("%s %s; last lines of %s:\n%s", e.name, e.msg, e.p.LogPath, indent(e.p.LogTail(40)))
}

// portInUse reports whether a failed start was caused by a port another process took
// between our probe and the child's bind; the caller retries with fresh ports.
func portInUse(err error) bool {
	var se *startError
	return errors.As(err, &se) && strings.Contains(se.p.LogTail(200), "address already in use")
}

// freePort returns a currently free TCP port on 127.0.0.1. The port is free only at the
// time of the call; components that fail with "address already in use" are retried.
func freePort() (int, error) {
	ports, err := FreeLoopbackPorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	// Logs can be large; the tail is within the last 64 KiB for any sane n.
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
