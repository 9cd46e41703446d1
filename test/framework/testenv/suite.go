package testenv

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"nodehealth.io/nodehealth/test/framework"
)

// CommandsDirEnv names a directory of prebuilt repository commands; when set,
// a Suite's Commands are taken from it instead of being built.
const CommandsDirEnv = "NODEHEALTH_COMMANDS_DIR"

// buildTimeout bounds building a Suite's Commands: a cold build on two shared
// cores beside a control plane is slow.
const buildTimeout = 10 * time.Minute

// Suite is what one integration test package needs: the control plane's
// options and the repository's commands its tests run. Its TestMain is
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, testenv.Suite{Commands: []string{"./cmd/nodehealth-controller"}})
//	}
type Suite struct {
	// ControlPlane configures the package's Environment.
	ControlPlane []framework.Option
	// Commands are repository commands (e.g. "./cmd/update-agent") the tests
	// run. They are built from the working tree while the control plane
	// starts, so a stale build can never make a test pass; Binary returns one
	// once the build is done. Only CommandsDirEnv replaces the build: make
	// test-integration points it at the binaries make build made just before.
	Commands []string
	// Parallel replaces -test.parallel's default (GOMAXPROCS) unless the
	// command line sets it: for packages whose tests spend their time waiting
	// for Lease expiries, so that far more of them than cores share the machine.
	Parallel int
	// Timeout replaces DefaultTimeout as the bound of Context.
	Timeout time.Duration
}

// Main runs the package's tests against one control plane and exits.
func Main(m *testing.M, s Suite) { os.Exit(s.Run(m)) }

// Run is Main without the exit: it returns the exit code.
func (s Suite) Run(m *testing.M) int {
	if s.Parallel > 0 {
		setParallelDefault(s.Parallel)
	}
	if s.Timeout > 0 {
		timeout = s.Timeout
	}
	build, cleanup := s.startBuild()
	defer cleanup()
	commands = build
	code := RunTestMain(m, s.ControlPlane...)
	// A test that never asked for a binary must not leave a build running
	// into the removal of its directory.
	<-build.done
	return code
}

func setParallelDefault(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// commandBuild is the background build of a Suite's Commands.
type commandBuild struct {
	dir  string
	done chan struct{}
	err  error
}

var commands *commandBuild

func (s Suite) startBuild() (*commandBuild, func()) {
	b := &commandBuild{done: make(chan struct{})}
	if dir := os.Getenv(CommandsDirEnv); dir != "" || len(s.Commands) == 0 {
		b.dir = dir
		close(b.done)
		return b, func() {}
	}
	dir, err := os.MkdirTemp("", "nodehealth-commands-")
	if err != nil {
		b.err = err
		close(b.done)
		return b, func() {}
	}
	b.dir = dir
	go func() {
		defer close(b.done)
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		b.err = framework.BuildCommands(ctx, dir, s.Commands...)
	}()
	return b, func() { _ = os.RemoveAll(dir) }
}

// Binary returns the path of a command the Suite built (its last path
// element, e.g. "nodehealth-controller"), waiting for the build.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if commands == nil {
		t.Fatal("testenv: no commands built; run the package with testenv.Main and Suite.Commands")
	}
	<-commands.done
	if commands.err != nil {
		t.Fatal(commands.err)
	}
	if commands.dir == "" {
		t.Fatalf("testenv: %s was not built; add it to the package's Suite.Commands", name)
	}
	path := filepath.Join(commands.dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("testenv: %v (is ./cmd/%s in the package's Suite.Commands, or in $%s?)", err, name, CommandsDirEnv)
	}
	return path
}
