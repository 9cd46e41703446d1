package framework

import (
	"fmt"
	"os"
)

// ComponentSpec describes one of nodehealth's own binaries to run. They all
// share the same command line: --config, and the --kubeconfig,
// --metrics-bind-address and --healthz-bind-address flags that override the
// file, so a test's configuration only says what the test is about.
type ComponentSpec struct {
	// Name names the process, its log and its configuration file.
	Name string
	// Path is the executable.
	Path string
	// Config is the content of the configuration file (YAML). Its
	// clientConnection.kubeconfig and serving addresses are overridden.
	Config string
	// Kubeconfig is what the component authenticates with; the admin
	// kubeconfig when empty.
	Kubeconfig string
	// Args are appended to the command line (after -v=2, so a -v here wins).
	Args []string
}

// Component is a running nodehealth binary.
type Component struct {
	*Process
	// Addr is the loopback address serving /metrics and /healthz.
	Addr string
	// ConfigPath is the configuration file it was started with.
	ConfigPath string
}

// MetricsURL is the component's /metrics endpoint, for ScrapeMetric.
func (c *Component) MetricsURL() string { return "http://" + c.Addr + "/metrics" }

// StartComponent writes spec's configuration into the Environment's directory,
// picks a free serving address and starts the binary as an Environment
// process (its log in LogDir, stopped by Stop at the latest).
func (e *Environment) StartComponent(spec ComponentSpec) (*Component, error) {
	addrs, err := FreeLoopbackAddresses(1)
	if err != nil {
		return nil, err
	}
	configPath, err := e.writeConfig(spec.Name, spec.Config)
	if err != nil {
		return nil, fmt.Errorf("writing the configuration of %s: %w", spec.Name, err)
	}
	kubeconfig := spec.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = e.Kubeconfig
	}
	args := append([]string{
		"--config", configPath,
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", addrs[0],
		"--healthz-bind-address", addrs[0],
		"-v=2",
	}, spec.Args...)
	p, err := e.StartProcess(ProcessSpec{Name: spec.Name, Path: spec.Path, Args: args})
	if err != nil {
		return nil, err
	}
	return &Component{Process: p, Addr: addrs[0], ConfigPath: configPath}, nil
}

// writeConfig writes a configuration file under configs/, never over another
// one: two tests may start components of the same name.
func (e *Environment) writeConfig(name, content string) (string, error) {
	dir := e.path("configs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, name+"-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
