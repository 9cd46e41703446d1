package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultControllers are the kube-controller-manager controllers an Environment runs:
// the ones nodehealth's behaviour depends on, plus the workload controllers that make
// Deployments and DaemonSets usable. Everything else stays off to keep start-up fast
// and logs readable.
var DefaultControllers = []string{
	"serviceaccount-controller",                // the "default" ServiceAccount of every namespace
	"root-ca-certificate-publisher-controller", // kube-root-ca.crt, mounted by every pod's projected token volume
	"namespace-controller",                     // namespaces finish deleting
	"garbage-collector-controller",             // ownerReferences (e.g. objects owned by a Node) are honoured
	"disruption-controller",                    // PodDisruptionBudget status; without it every eviction is a 429
	"node-lifecycle-controller",                // removes the node.kubernetes.io/not-ready taint from Ready nodes
	"taint-eviction-controller",                // evicts pods from NoExecute-tainted nodes
	"pod-garbage-collector-controller",         // deletes pods bound to deleted nodes
	"deployment-controller",
	"replicaset-controller",
	"daemonset-controller",
	"validatingadmissionpolicy-status-controller", // type-checks ValidatingAdmissionPolicies
}

// Option configures Start.
type Option func(*options)

type options struct {
	binDir            string
	dir               string
	keepArtifacts     bool
	logf              func(format string, args ...any)
	withoutKCM        bool
	withoutScheduler  bool
	withoutKwok       bool
	controllers       []string
	apiServerFlags    []string
	kcmFlags          []string
	startTimeout      time.Duration
	stopGracePeriod   time.Duration
	serviceClusterIPs string
	installCRDs       bool
	auditPolicy       string
}

// WithCRDs installs the repository's CustomResourceDefinitions (deploy/crds) once
// the control plane is up, and waits until they are served.
func WithCRDs() Option { return func(o *options) { o.installCRDs = true } }

// WithAuditPolicy makes kube-apiserver write an audit log of what policy (an
// audit.k8s.io/v1 Policy) selects to Environment.AuditLog, as JSON lines and
// before it answers each request (blocking mode), so a test can count exactly
// the requests it cares about.
func WithAuditPolicy(policy string) Option { return func(o *options) { o.auditPolicy = policy } }

// WithBinDir takes the control-plane binaries from dir instead of BinDir().
func WithBinDir(dir string) Option { return func(o *options) { o.binDir = dir } }

// WithDir runs the Environment in dir (created if needed) instead of a fresh temporary
// directory. The caller owns dir: Stop never deletes it.
func WithDir(dir string) Option { return func(o *options) { o.dir = dir } }

// WithKeepArtifacts keeps the temporary directory after Stop. The
// NODEHEALTH_KEEP_ARTIFACTS=1 environment variable does the same.
func WithKeepArtifacts() Option { return func(o *options) { o.keepArtifacts = true } }

// WithLogf sends progress messages ("kube-apiserver ready on ...") to logf instead of
// standard error.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) { o.logf = logf }
}

// WithoutControllerManager does not start kube-controller-manager. Namespaces then
// never finish deleting, nothing is garbage-collected, new nodes keep their
// not-ready taint and namespaces get no default ServiceAccount.
func WithoutControllerManager() Option { return func(o *options) { o.withoutKCM = true } }

// WithoutScheduler does not start kube-scheduler: pods stay Pending unless they name a node.
func WithoutScheduler() Option { return func(o *options) { o.withoutScheduler = true } }

// WithoutKwok does not start kwok: no node is simulated, CreateNode's nodes never become Ready.
func WithoutKwok() Option { return func(o *options) { o.withoutKwok = true } }

// WithControllers replaces DefaultControllers as kube-controller-manager's --controllers.
func WithControllers(names ...string) Option {
	return func(o *options) { o.controllers = slices.Clone(names) }
}

// WithAPIServerFlags appends flags to kube-apiserver's command line; a later flag
// overrides an earlier one, so this can also change a default (e.g. --feature-gates=...).
func WithAPIServerFlags(flags ...string) Option {
	return func(o *options) { o.apiServerFlags = append(o.apiServerFlags, flags...) }
}

// WithControllerManagerFlags appends flags to kube-controller-manager's command line.
func WithControllerManagerFlags(flags ...string) Option {
	return func(o *options) { o.kcmFlags = append(o.kcmFlags, flags...) }
}

// WithStartTimeout bounds how long Start waits for the whole control plane (default 3m).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// Environment is a running control plane. Create it with Start; always Stop it.
type Environment struct {
	// Dir holds everything the Environment writes: pki/, etcd/, logs/, kubeconfigs.
	Dir string
	// BinDir holds the control-plane binaries.
	BinDir string
	// LogDir holds one <process>.log per process.
	LogDir string
	// Kubeconfig is the path of an admin kubeconfig (user in group system:masters)
	// with the certificates embedded, so it can be copied anywhere.
	Kubeconfig string
	// Config authenticates as the admin user. Copy it before changing it (rest.CopyConfig).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// CAFile is the PEM file of the CA that signed the apiserver's serving certificate
	// and every client certificate.
	CAFile string
	// ServiceAccountIssuer is --service-account-issuer, the "iss" of every token.
	ServiceAccountIssuer string
	// AuditLog is the API server's audit log (JSON lines) with WithAuditPolicy;
	// empty without.
	AuditLog string

	opts      options
	ca        *ca
	admin     *keyPair
	ownsDir   bool
	keep      atomic.Bool // set from signal handlers too
	mu        sync.Mutex
	processes []*Process
	// ready waits until a restarted process of that name is usable.
	ready    map[string]func(context.Context, *Process) error
	stopOnce sync.Once
	stopErr  error
}

// Start brings up etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok on free loopback ports and returns once they are ready to use: the apiserver
// answers /readyz, the "default" ServiceAccount exists (kube-controller-manager works),
// and the scheduler and kwok report healthy. On error nothing is left running.
func Start(ctx context.Context, opts ...Option) (_ *Environment, err error) {
	o := options{
		controllers:       DefaultControllers,
		startTimeout:      3 * time.Minute,
		stopGracePeriod:   10 * time.Second,
		serviceClusterIPs: "10.96.0.0/16",
		keepArtifacts:     os.Getenv(KeepArtifactsEnv) == "1" || os.Getenv(KeepArtifactsEnv) == "true",
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logf == nil {
		o.logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "framework: "+format+"\n", args...) }
	}
	if o.binDir == "" {
		if o.binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	need := []string{Etcd, KubeAPIServer, Kubectl}
	if !o.withoutKCM {
		need = append(need, KubeControllerManager)
	}
	if !o.withoutScheduler {
		need = append(need, KubeScheduler)
	}
	if !o.withoutKwok {
		need = append(need, Kwok)
	}
	if err := checkBinaries(o.binDir, need...); err != nil {
		return nil, err
	}

	e := &Environment{BinDir: o.binDir, opts: o}
	e.keep.Store(o.keepArtifacts)
	if o.dir != "" {
		e.Dir, err = filepath.Abs(o.dir)
		if err == nil {
			err = os.MkdirAll(e.Dir, 0o755)
		}
	} else {
		e.ownsDir = true
		e.Dir, err = os.MkdirTemp("", "nodehealth-env-")
	}
	if err != nil {
		return nil, fmt.Errorf("creating the environment directory: %w", err)
	}
	e.LogDir = filepath.Join(e.Dir, "logs")
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return nil, err
	}
	if o.auditPolicy != "" {
		if err := e.enableAudit(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			// Keep the logs of a failed start: they are the only way to see why.
			e.keep.Store(true)
			_ = e.Stop()
			err = fmt.Errorf("starting the control plane (artifacts kept in %s): %w", e.Dir, err)
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, o.startTimeout)
	defer cancel()
	started := time.Now()
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	if o.installCRDs {
		if err := e.InstallCRDs(ctx); err != nil {
			return nil, err
		}
	}
	o.logf("control plane ready in %s: %s (kubeconfig %s)", time.Since(started).Round(100*time.Millisecond), e.APIServerURL, e.Kubeconfig)
	return e, nil
}

// Stop terminates every process in reverse start order (SIGTERM, then SIGKILL after a
// grace period) and removes the temporary directory unless artifacts are kept. It is
// safe to call more than once and from several goroutines.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		procs := slices.Clone(e.processes)
		e.mu.Unlock()
		var errs []error
		for i := len(procs) - 1; i >= 0; i-- {
			if err := procs[i].Stop(e.opts.stopGracePeriod); err != nil {
				errs = append(errs, err)
			}
		}
		switch {
		case !e.ownsDir:
		case e.keep.Load():
			e.opts.logf("artifacts kept in %s", e.Dir)
		default:
			if err := os.RemoveAll(e.Dir); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", e.Dir, err))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// KeepArtifacts makes Stop keep the Environment's directory, e.g. because a test failed.
func (e *Environment) KeepArtifacts() { e.keep.Store(true) }

// Logf prints a progress message the way the Environment does.
func (e *Environment) Logf(format string, args ...any) { e.opts.logf(format, args...) }

// StartProcess starts a process the Environment owns: its output goes to
// LogDir/<Name>.log and Stop terminates it (processes started later stop earlier).
// Use it for components under test, e.g. the node-health controller binary.
func (e *Environment) StartProcess(spec ProcessSpec) (*Process, error) {
	if spec.Dir == "" {
		spec.Dir = e.Dir
	}
	p, err := startProcess(spec, filepath.Join(e.LogDir, spec.Name+".log"))
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.processes = append(e.processes, p)
	e.mu.Unlock()
	return p, nil
}

// Processes returns the processes started so far, in start order.
func (e *Environment) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.processes)
}

// Binary returns the path of a control-plane binary, e.g. Binary(Kubectl).
func (e *Environment) Binary(name string) string { return filepath.Join(e.BinDir, name) }

// LogTail returns the last n lines of a process's log (e.g. "kube-apiserver").
func (e *Environment) LogTail(process string, n int) string {
	return tailFile(filepath.Join(e.LogDir, process+".log"), n)
}

// enableAudit writes the audit policy and points kube-apiserver at it.
func (e *Environment) enableAudit() error {
	policy := e.path("audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(e.opts.auditPolicy), 0o644); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	e.AuditLog = e.path("audit.log")
	e.opts.apiServerFlags = append(e.opts.apiServerFlags, "--audit-policy-file="+policy, "--audit-log-path="+e.AuditLog,
		"--audit-log-mode=blocking", "--audit-log-format=json")
	return nil
}
