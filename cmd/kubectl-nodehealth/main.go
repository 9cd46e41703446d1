// Command kubectl-nodehealth is the nodehealth kubectl plugin. Copy the binary
// onto your PATH as kubectl-nodehealth and run it as `kubectl nodehealth`;
// docs/kubectl-plugin.md describes every command. The logic is in
// nodehealth.io/nodehealth/pkg/kubectlplugin.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"nodehealth.io/nodehealth/pkg/kubectlplugin"
)

func main() {
	// Ctrl-C cancels requests in flight instead of leaving a half-done retry
	// loop; every write is a single guarded patch, so nothing is left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		stop()
		os.Exit(1)
	}
}
