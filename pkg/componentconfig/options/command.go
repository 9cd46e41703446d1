package options

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/features"
	"nodehealth.io/nodehealth/pkg/process"
	"nodehealth.io/nodehealth/pkg/version"
)

// RunFunc runs a component until ctx is cancelled; context.Cause(ctx) says
// why (process.ErrTerminated or process.ErrConfigChanged). Returning nil after cancellation
// exits 0.
type RunFunc[T runtime.Object] func(ctx context.Context, rt *process.Runtime[T]) error

// CommandInfo describes a binary for cobra.
type CommandInfo struct {
	Use   string
	Short string
	Long  string
}

// NewCommand builds a binary's cobra command around o and run. Flag parsing
// is done by the machinery (cobra's would add global flags and cannot parse
// the command line twice).
func NewCommand[T runtime.Object](o *Options[T], info CommandInfo, run RunFunc[T]) *cobra.Command {
	cmd := &cobra.Command{
		Use:                info.Use,
		Short:              info.Short,
		Long:               info.Long,
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return execute(cmd, o, args, run)
		},
	}
	// Only this binary's flags, grouped; nothing from the global flag set.
	fs := cmd.Flags()
	for _, name := range o.fss.Order {
		fs.AddFlagSet(o.fss.FlagSets[name])
	}
	// Width 0: no wrapping, so --help is the same on every terminal.
	cliflag.SetUsageAndHelpFunc(cmd, o.fss, 0)
	return cmd
}

func execute[T runtime.Object](cmd *cobra.Command, o *Options[T], args []string, run RunFunc[T]) error {
	res, err := o.Parse(args)
	if errors.Is(err, ErrHelp) {
		return cmd.Help()
	}
	if errors.Is(err, ErrVersion) {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", o.component.Name, version.Get())
		return err
	}
	if err != nil {
		return err
	}
	cfg := res.Config

	if o.WriteConfigTo != "" {
		return writeConfigTo(o, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	if err := o.Validate(cfg); err != nil {
		return err
	}
	if err := o.ApplyLogging(cfg); err != nil {
		return err
	}

	rt := &process.Runtime[T]{Config: cfg, ConfigFile: o.ConfigFile, FeatureGate: o.gate, Registry: prometheus.NewRegistry()}
	metrics := RegisterCommonMetrics(rt.Registry)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	logger := klog.Background().WithName(o.component.Name)
	ctx = klog.NewContext(ctx, logger)

	defer process.CancelOnSignal(ctx, cancel)()

	if o.ConfigFile != "" && o.gate.Enabled(features.ConfigFileWatch) {
		watcher := process.NewFileWatcher(o.ConfigFile, res.ConfigData, metrics,
			func(data []byte) (bool, error) { return o.Reload(data, args, cfg) },
			func() {
				rt.RunConfigChangeHooks(ctx)
				cancel(process.ErrConfigChanged)
			})
		go watcher.Run(ctx)
	}

	err = run(ctx, rt)
	if cause := context.Cause(ctx); cause != nil {
		logger.Info("Stopped", "reason", cause.Error())
	}
	klog.Flush()
	return err
}

// RegisterCommonMetrics registers the metrics every component serves besides
// its own: the Go runtime's, the process's and the configuration watcher's.
// hack/metrics-list calls it too, to list what each binary serves.
func RegisterCommonMetrics(reg prometheus.Registerer) *process.WatchMetrics {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return process.NewWatchMetrics(reg)
}

func writeConfigTo[T runtime.Object](o *Options[T], cfg T, stdout, stderr io.Writer) error {
	data, err := WriteConfig(cfg)
	if err != nil {
		return err
	}
	if o.WriteConfigTo == "-" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
	} else if err := os.WriteFile(o.WriteConfigTo, data, 0o644); err != nil {
		return fmt.Errorf("--write-config-to: %w", err)
	}
	// The written file is a starting point: say what must still be filled
	// in, but it was written, so this is not a failure.
	if err := o.Validate(cfg); err != nil {
		fmt.Fprintf(stderr, "note: the written configuration does not start as is: %v\n", err)
	}
	return nil
}

// Run executes a binary's command and returns its exit code: 0, or 1 with
// one short "error: ..." line on standard error (no usage text, no stack).
func Run(cmd *cobra.Command) int {
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "error: %v\n", err)
		return 1
	}
	return 0
}
