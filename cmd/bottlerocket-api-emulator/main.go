// Command bottlerocket-api-emulator serves an emulated Bottlerocket API on a
// Unix socket for tests, benchmarks and the sandbox (package
// pkg/updater/brapi/emulator). It is a test tool: plain flags, no
// configuration file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/updater/brapi/emulator"
)

const usage = `bottlerocket-api-emulator serves an emulated Bottlerocket API (GET /os,
GET /updates/status, POST /actions/{refresh,prepare,activate,deactivate}-update,
POST /actions/reboot, GET/PATCH /settings updates.version-lock and
updates.ignore-waves, POST /tx/commit_and_apply) on a Unix socket, with the real paths, JSON shapes,
status codes and update state machine, so a real update-agent runs against it.

It is a test and sandbox tool, not a product binary: it takes plain flags and
no configuration file. It stays node-local: a reboot runs --reboot-hook (with
EMULATOR_REBOOT_FROM, EMULATOR_REBOOT_TO, EMULATOR_REBOOT_NUMBER and
EMULATOR_SOCKET in its environment), drops API requests until the hook exits,
then boots the activated version.

Control API on the same socket (outside Bottlerocket's paths):
  curl --unix-socket SOCK -X POST localhost/emulator/offer -d '{"versions":["1.21.0"]}'
  curl --unix-socket SOCK -X POST localhost/emulator/publish -d '{"versions":["1.22.0"]}'
  curl --unix-socket SOCK -X PUT  localhost/emulator/faults -d '{"prepareFails":true}'
  curl --unix-socket SOCK localhost/emulator/faults
  curl --unix-socket SOCK localhost/emulator/state

Usage:
  bottlerocket-api-emulator --socket PATH [flags]

Flags:
`

type options struct {
	cfg        emulator.Config
	rebootHook string
}

func parse(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("bottlerocket-api-emulator", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		_, _ = fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	c := &o.cfg
	fs.StringVar(&c.SocketPath, "socket", "", "Unix socket to serve the API on (required; a stale socket file is replaced).")
	fs.StringVar(&c.StateFile, "state-file", "", "File keeping the host's state across emulator restarts; when it exists it wins over --version, --version-lock, --variant and --arch.")
	fs.StringVar(&c.Version, "version", "1.20.0", "Version the host runs at first start.")
	fs.StringSliceVar(&c.Offered, "offer", nil, "Versions the update repository offers (repeatable or comma-separated); more can be offered at runtime.")
	fs.StringSliceVar(&c.BeforeWave, "publish", nil, "Versions the repository publishes whose wave has not reached the host: offered only with settings.updates.ignore-waves, until --offer or /emulator/offer offers them.")
	fs.StringVar(&c.MaxVersion, "max-version", "", "The repository's max_version: nothing above it is offered; a host above it goes back to the newest version at most it.")
	fs.StringVar(&c.VersionLock, "version-lock", "latest", "Initial settings.updates.version-lock: latest or a version.")
	fs.StringVar(&c.Variant, "variant", "aws-k8s-1.33", "Variant reported by /os and in update images.")
	fs.StringVar(&c.Arch, "arch", "x86_64", "Architecture reported by /os and in update images.")
	fs.StringVar(&o.rebootHook, "reboot-hook", "", "Shell command run (sh -c) when the host reboots; the host boots when it exits.")
	fs.DurationVar(&c.Delays.Refresh, "refresh-delay", 0, "How long refresh-updates runs (the API answers 423 meanwhile).")
	fs.DurationVar(&c.Delays.Prepare, "prepare-delay", 0, "How long prepare-update runs.")
	fs.DurationVar(&c.Delays.Activate, "activate-delay", 0, "How long activate-update runs.")
	fs.DurationVar(&c.Delays.Deactivate, "deactivate-delay", 0, "How long deactivate-update runs.")
	fs.DurationVar(&c.Delays.Reboot, "reboot-delay", 0, "Time from the reboot request to the shutdown (the hook).")
	fs.DurationVar(&c.Delays.SettingsApply, "settings-apply-delay", emulator.DefaultSettingsApply, "Time from commit_and_apply to the updater seeing the settings (Bottlerocket applies them asynchronously); 0 applies them at once.")
	fs.BoolVar(&c.Faults.RefreshFails, "fail-refresh", false, "refresh-updates finishes Failed.")
	fs.BoolVar(&c.Faults.PrepareFails, "fail-prepare", false, "prepare-update finishes Failed.")
	fs.BoolVar(&c.Faults.ActivateFails, "fail-activate", false, "activate-update finishes Failed.")
	fs.BoolVar(&c.Faults.DeactivateFails, "fail-deactivate", false, "deactivate-update finishes Failed.")
	fs.BoolVar(&c.Faults.RebootHangs, "reboot-hangs", false, "The reboot is accepted but never happens.")
	fs.IntVar(&c.Faults.RefuseRebootNext, "refuse-reboots", 0, "Answer the next N reboot requests 500 without rebooting, as Bottlerocket does when its reboot command fails (a shutdown inhibitor).")
	fs.BoolVar(&c.Faults.NeverComesUp, "never-comes-up", false, "The activated version fails to boot: the host comes back on the version it ran.")
	fs.IntVar(&c.Faults.DropNext, "api-down-calls", 0, "Drop the connection of the next N API requests without an answer.")
	fs.IntVar(&c.Faults.ServerErrorNext, "server-error-calls", 0, "Answer the next N API requests 500.")
	fs.IntVar(&c.Faults.MalformedNext, "malformed-calls", 0, "Answer the next N JSON requests with truncated JSON.")
	klogFlags := goFlagSet()
	for _, name := range []string{"v", "vmodule"} {
		fs.AddGoFlag(klogFlags.Lookup(name))
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.SocketPath == "" {
		return nil, errors.New("--socket is required")
	}
	if o.rebootHook != "" {
		o.cfg.RebootHook = shellHook(o.rebootHook, c.SocketPath)
	}
	return o, nil
}

// shellHook runs command with sh -c, the reboot's facts in its environment.
func shellHook(command, socket string) emulator.RebootHook {
	return func(ctx context.Context, ev emulator.RebootEvent) error {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Env = append(os.Environ(),
			"EMULATOR_REBOOT_FROM="+ev.From,
			"EMULATOR_REBOOT_TO="+ev.To,
			"EMULATOR_REBOOT_NUMBER="+strconv.Itoa(ev.Reboot),
			"EMULATOR_SOCKET="+socket,
		)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("reboot hook %q: %w", command, err)
		}
		return nil
	}
}

func run(ctx context.Context, o *options) error {
	em, err := emulator.New(o.cfg)
	if err != nil {
		return err
	}
	if err := em.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	klog.FromContext(ctx).Info("Shutting down")
	em.Close()
	return nil
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
