// Package options is the command-line and configuration-file machinery every
// nodehealth binary shares. A binary describes its configuration Kind once (a
// Component) and gets, unchanged from every other binary:
//
//   - one --config flag taking a file with a config.nodehealth.io Kind,
//     decoded strictly, defaulted, converted and path-resolved;
//   - flags that mirror fields of the file (--kubeconfig, leader election,
//     serving addresses, logging, --feature-gates) which win over the file
//     only when they are set explicitly; --feature-gates merges per key;
//   - feature gates set from the merged configuration, logging validated and
//     applied, and the whole configuration validated before anything starts;
//   - --write-config-to FILE|- printing the effective configuration;
//   - --help listing only this binary's flags, grouped;
//   - NewCommand, which runs the binary with package server's runtime
//     (signals, serving, and a watch on the configuration file that restarts
//     the binary cleanly when a valid new version appears).
package options

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/loader"
)

// Flag section names, in the order --help prints them.
const (
	SectionMisc           = "Misc"
	SectionInstance       = "Instance"
	SectionConnection     = "Connection"
	SectionServing        = "Serving"
	SectionLeaderElection = "Leader election"
	SectionFeatureGate    = "Feature gate"
	SectionLogging        = "Logging"
)

// Common points into the parts of a configuration that every Kind shares, so
// that the machinery can bind flags to them and apply them.
type Common struct {
	ClientConnection *componentbaseconfig.ClientConnectionConfiguration
	// LeaderElection is nil for Kinds without leader election (per-node
	// binaries).
	LeaderElection *componentbaseconfig.LeaderElectionConfiguration
	Debugging      *componentbaseconfig.DebuggingConfiguration
	Logging        *logsapi.LoggingConfiguration
	FeatureGates   *map[string]bool
	Serving        *config.ServingConfiguration
}

// Component describes one binary's configuration to the machinery.
type Component[T runtime.Object] struct {
	// Name is the binary's name, used in --help and messages.
	Name string
	// Kind names the configuration Kind and its path fields.
	Kind loader.Kind[T]
	// Default returns a defaulted internal configuration (see package
	// latest).
	Default func() (T, error)
	// Common returns the shared parts of cfg.
	Common func(cfg T) Common
	// Validate validates everything but logging.
	Validate func(cfg T) field.ErrorList
	// BindFlags optionally registers further flags that mirror fields of the
	// file, bound to cfg. Like the common ones they are parsed twice: over
	// the defaults, and again over the loaded file, so that only flags the
	// user set explicitly override the file.
	BindFlags func(cfg T, fss *cliflag.NamedFlagSets)
	// NewFeatureGate returns a fresh gate with every feature the binary
	// knows.
	NewFeatureGate func() featuregate.MutableVersionedFeatureGate
}

// Options holds the values of a binary's command line.
type Options[T runtime.Object] struct {
	component Component[T]

	// ConfigFile is --config.
	ConfigFile string
	// WriteConfigTo is --write-config-to.
	WriteConfigTo string
	// PrintVersion is --version.
	PrintVersion bool

	// instanceFlags are registered by the binary for values that stay flags
	// because they differ per instance (e.g. --node-name). They are parsed
	// once and never touch the configuration.
	instanceFlags func(fs *pflag.FlagSet)

	// flagConfig is the defaulted configuration the first parse writes
	// into; it is the effective configuration when there is no --config.
	flagConfig T
	fss        cliflag.NamedFlagSets
	gate       featuregate.MutableVersionedFeatureGate
}

// New returns options seeded with the component's defaults and with every
// flag registered.
func New[T runtime.Object](c Component[T]) (*Options[T], error) {
	return NewWithInstanceFlags(c, nil)
}

// NewWithInstanceFlags is New for binaries with instance flags (flags that
// are not part of the configuration file).
func NewWithInstanceFlags[T runtime.Object](c Component[T], instanceFlags func(fs *pflag.FlagSet)) (*Options[T], error) {
	cfg, err := c.Default()
	if err != nil {
		return nil, fmt.Errorf("default configuration: %w", err)
	}
	o := &Options[T]{component: c, instanceFlags: instanceFlags, flagConfig: cfg, gate: c.NewFeatureGate()}
	o.fss = o.namedFlagSets(cfg, false)
	return o, nil
}

// Flags returns the binary's flags, grouped for --help.
func (o *Options[T]) Flags() *cliflag.NamedFlagSets { return &o.fss }

// FeatureGate is the gate the configuration's featureGates were applied to.
func (o *Options[T]) FeatureGate() featuregate.FeatureGate { return o.gate }

// namedFlagSets registers every flag. Flags that mirror the configuration are
// bound to cfg; options-only and instance flags are bound to o, or to no-ops
// when noopOptions is set (the second parse, over the loaded file).
func (o *Options[T]) namedFlagSets(cfg T, noopOptions bool) cliflag.NamedFlagSets {
	fss := cliflag.NamedFlagSets{}
	misc := fss.FlagSet(SectionMisc)
	if noopOptions {
		misc.Var(cliflag.NoOp{}, "config", "")
		misc.Var(cliflag.NoOp{}, "write-config-to", "")
		misc.Var(cliflag.NoOp{}, "version", "")
		misc.Lookup("version").NoOptDefVal = "true"
	} else {
		misc.StringVar(&o.ConfigFile, "config", o.ConfigFile,
			"The path to the configuration file, holding a "+o.component.Kind.Name+" of config.nodehealth.io/v1alpha1. Flags set explicitly on the command line override values from this file.")
		misc.StringVar(&o.WriteConfigTo, "write-config-to", o.WriteConfigTo,
			"If set, write the effective configuration (defaults, file and flags merged) to this file, or to standard output for '-', and exit.")
		misc.BoolVar(&o.PrintVersion, "version", o.PrintVersion,
			"Print the version, commit and build date of this binary and exit.")
	}
	if o.instanceFlags != nil {
		instance := fss.FlagSet(SectionInstance)
		if noopOptions {
			// Copies of the registered flags: registering them again
			// would reset the bound values to their defaults.
			o.fss.FlagSet(SectionInstance).VisitAll(func(f *pflag.Flag) { addNoOp(instance, f) })
		} else {
			o.instanceFlags(instance)
		}
	}

	common := o.component.Common(cfg)
	conn := fss.FlagSet(SectionConnection)
	conn.StringVar(&common.ClientConnection.Kubeconfig, "kubeconfig", common.ClientConnection.Kubeconfig,
		"Path to a kubeconfig file. Empty means in-cluster configuration. Overrides clientConnection.kubeconfig.")

	serving := fss.FlagSet(SectionServing)
	serving.Var((*hostPort)(&common.Serving.MetricsBindAddress), "metrics-bind-address",
		"The host:port to serve /metrics on; an IPv6 host may come without brackets (--metrics-bind-address=$(POD_IP):10370 in a DaemonSet). Overrides serving.metricsBindAddress.")
	serving.Var((*hostPort)(&common.Serving.HealthzBindAddress), "healthz-bind-address",
		"The host:port to serve /healthz on; an IPv6 host may come without brackets. Overrides serving.healthzBindAddress.")

	if common.LeaderElection != nil {
		componentbaseoptions.BindLeaderElectionFlags(common.LeaderElection, fss.FlagSet(SectionLeaderElection))
	}

	fss.FlagSet(SectionFeatureGate).Var(cliflag.NewMapStringBool(common.FeatureGates), "feature-gates",
		"A set of key=value pairs that describe feature gates for alpha/experimental features. Merged per key over the featureGates of the configuration file. Options are:\n"+
			strings.Join(o.gate.KnownFeatures(), "\n"))

	logsapi.AddFlags(common.Logging, fss.FlagSet(SectionLogging))

	if o.component.BindFlags != nil {
		o.component.BindFlags(cfg, &fss)
	}
	return fss
}

func addNoOp(fs *pflag.FlagSet, f *pflag.Flag) {
	fs.VarP(cliflag.NoOp{}, f.Name, f.Shorthand, f.Usage)
	// Keep boolean flags boolean, so that "--flag" without a value parses.
	fs.Lookup(f.Name).NoOptDefVal = f.NoOptDefVal
}

// flagSet merges named flag sets into one for parsing.
func flagSet(name string, fss cliflag.NamedFlagSets) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(discard{})
	for _, section := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[section])
	}
	return fs
}

// ParseResult is what Parse returns besides errors.
type ParseResult[T runtime.Object] struct {
	// Config is the effective configuration: defaults, then the file, then
	// explicitly set flags.
	Config T
	// ConfigData is the content of the configuration file that was loaded
	// (nil without --config); the file watcher compares against it.
	ConfigData []byte
}

// ErrHelp is returned by Parse when --help was given.
var ErrHelp = pflag.ErrHelp

// ErrVersion is returned by Parse when --version was given; nothing else
// (not even --config) was looked at.
var ErrVersion = errors.New("version requested")

// Parse parses the command line and, when --config is set, loads the file and
// re-applies the explicitly set flags over it. It then sets the feature gates
// from the configuration. It does not validate; see Validate.
func (o *Options[T]) Parse(args []string) (*ParseResult[T], error) {
	fs := flagSet(o.component.Name, o.fss)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: %s takes flags only", fs.Args(), o.component.Name)
	}
	if o.PrintVersion {
		return nil, ErrVersion
	}
	cfg := o.flagConfig
	var data []byte
	if o.ConfigFile != "" {
		fileCfg, fileData, err := o.loadAndMerge(o.ConfigFile, nil, args)
		if err != nil {
			return nil, err
		}
		cfg, data = fileCfg, fileData
	}
	if err := o.gate.SetFromMap(*o.component.Common(cfg).FeatureGates); err != nil {
		return nil, fmt.Errorf("featureGates: %w", err)
	}
	return &ParseResult[T]{Config: cfg, ConfigData: data}, nil
}

// loadAndMerge loads the file (or decodes data, when given) and parses args
// again over it, so that flags the user set explicitly win. Parsing the whole
// command line again (the kubelet's technique) instead of copying "changed"
// flags one by one means a new flag can never be forgotten.
func (o *Options[T]) loadAndMerge(path string, data []byte, args []string) (T, []byte, error) {
	var zero T
	var cfg T
	var err error
	if data == nil {
		cfg, data, err = loader.LoadFile(o.component.Kind, path)
	} else {
		cfg, err = loader.LoadData(o.component.Kind, path, data)
	}
	if err != nil {
		return zero, data, err
	}
	featureGates := o.component.Common(cfg).FeatureGates
	fromFile := *featureGates
	fs := flagSet(o.component.Name, o.namedFlagSets(cfg, true))
	if err := fs.Parse(args); err != nil {
		return zero, data, err
	}
	// --feature-gates replaced the map; put back the file's keys the flag
	// did not mention.
	if len(fromFile) > 0 && fs.Changed("feature-gates") {
		for k, v := range fromFile {
			if _, set := (*featureGates)[k]; !set {
				(*featureGates)[k] = v
			}
		}
	}
	return cfg, data, nil
}

// Validate validates logging (against the feature gate) and then the whole
// configuration. All problems are reported together.
func (o *Options[T]) Validate(cfg T) error {
	common := o.component.Common(cfg)
	errs := logsapi.Validate(common.Logging, o.gate, field.NewPath("logging"))
	errs = append(errs, o.component.Validate(cfg)...)
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	where := "flags"
	if o.ConfigFile != "" {
		where = fmt.Sprintf("config file %q and flags", o.ConfigFile)
	}
	return fmt.Errorf("invalid configuration (%s): %s", where, strings.Join(msgs, "; "))
}

// ApplyLogging configures klog from the configuration. It may only be called
// once per process (component-base refuses to change logging afterwards).
func (o *Options[T]) ApplyLogging(cfg T) error {
	return logsapi.ValidateAndApplyAsField(o.component.Common(cfg).Logging, o.gate, field.NewPath("logging"))
}

// Reload decodes new content of the configuration file with the same command
// line, exactly as at start, and validates it. changed is false when the
// result equals current (a comment or formatting edit), so no restart is
// needed.
func (o *Options[T]) Reload(data []byte, args []string, current T) (changed bool, err error) {
	// A fresh Options: the running one's gate is already set and flag
	// values must not leak from one attempt into the next.
	// Instance flags are parsed into no-ops: their values are the running
	// process's and must not change under it.
	instance := o.fss.FlagSet(SectionInstance)
	fresh, err := NewWithInstanceFlags(o.component, func(fs *pflag.FlagSet) {
		instance.VisitAll(func(f *pflag.Flag) { addNoOp(fs, f) })
	})
	if err != nil {
		return false, err
	}
	fresh.ConfigFile = o.ConfigFile
	if err := flagSet(o.component.Name, fresh.fss).Parse(args); err != nil {
		return false, err
	}
	if len(data) == 0 {
		data = []byte{}
	}
	cfg, _, err := fresh.loadAndMerge(o.ConfigFile, data, args)
	if err != nil {
		return false, err
	}
	if err := fresh.gate.SetFromMap(*fresh.component.Common(cfg).FeatureGates); err != nil {
		return false, fmt.Errorf("featureGates: %w", err)
	}
	if err := fresh.Validate(cfg); err != nil {
		return false, err
	}
	return !apiequality.Semantic.DeepEqual(cfg, current), nil
}

// WriteConfig encodes cfg as a complete v1alpha1 file.
func WriteConfig(cfg runtime.Object) ([]byte, error) {
	data, err := loader.EncodeYAML(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode configuration: %w", err)
	}
	return data, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// hostPort is a bind-address flag. A DaemonSet binds a per-node binary to
// its pod's IP with $(POD_IP):port, and the kubelet substitutes an IPv6 pod
// IP without brackets: the last colon is then the port's.
type hostPort string

func (h *hostPort) String() string { return string(*h) }

func (h *hostPort) Set(v string) error {
	if strings.Count(v, ":") > 1 && !strings.HasPrefix(v, "[") {
		i := strings.LastIndex(v, ":")
		v = "[" + v[:i] + "]" + v[i:]
	}
	*h = hostPort(v)
	return nil
}

func (h *hostPort) Type() string { return "host:port" }
