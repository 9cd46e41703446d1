package framework

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildCommands builds the repository's commands (paths relative to the
// repository root, e.g. "./cmd/update-agent") from the working tree into dir,
// so that a stale _output/bin can never make a test pass. The Go build cache
// makes a repeated build cheap.
func BuildCommands(ctx context.Context, dir string, cmds ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, cmds...)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", cmds, err, out)
	}
	return nil
}
