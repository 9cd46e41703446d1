package process

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
)

// Option changes how Serve serves.
type Option func(*options)

type options struct {
	metricsTLS  *tls.Config
	wrapMetrics func(http.Handler) http.Handler
}

// WithProtectedMetrics serves the metrics address over TLS with tlsConfig,
// every request passing through wrap (authentication and authorization:
// package delegated) first; the health address stays plain. It is what
// serving.metricsAuthentication Delegated needs.
func WithProtectedMetrics(tlsConfig *tls.Config, wrap func(http.Handler) http.Handler) Option {
	return func(o *options) { o.metricsTLS, o.wrapMetrics = tlsConfig, wrap }
}

// HealthCheck reports whether the component is healthy; nil means yes.
type HealthCheck func() error

// ErrProfilingNotBuiltIn is returned by Serve when profiling is enabled in a
// build without it (the noprofiling build tag).
var ErrProfilingNotBuiltIn = errors.New("debugging.enableProfiling is true, but this build has no profiling (noprofiling build tag); use a build without that tag")

// Serve serves /metrics (with /debug/pprof when profiling is enabled) and
// /healthz, /livez, /readyz on the configured addresses until ctx is done.
// Listening happens before Serve returns, so a taken port fails the start
// instead of being logged later.
func Serve(ctx context.Context, serving config.ServingConfiguration, enableProfiling bool, registry *prometheus.Registry, healthz HealthCheck, opts ...Option) (<-chan error, error) {
	if enableProfiling && !ProfilingBuiltIn {
		return nil, ErrProfilingNotBuiltIn
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if serving.MetricsAuthentication == config.MetricsAuthenticationDelegated && o.metricsTLS == nil {
		return nil, errors.New("serving.metricsAuthentication is Delegated, which this binary does not support")
	}
	servers := handlers(serving, enableProfiling, registry, healthz, o)
	errs := make(chan error, len(servers))
	var listeners []net.Listener
	for addr, handler := range servers {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		listeners = append(listeners, l)
		var tlsConfig *tls.Config
		if addr == serving.MetricsBindAddress {
			tlsConfig = o.metricsTLS
		}
		serve(ctx, l, handler, tlsConfig, errs)
	}
	return errs, nil
}

// handlers are the handlers Serve serves, by address: the metrics (and
// profiling) on one, the health checks on the other, or all on one address
// when both are the same.
func handlers(serving config.ServingConfiguration, enableProfiling bool, registry *prometheus.Registry, healthz HealthCheck, o options) map[string]http.Handler {
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	if enableProfiling {
		registerProfiling(metricsMux)
	}
	healthMux := http.NewServeMux()
	if serving.MetricsBindAddress == serving.HealthzBindAddress {
		healthMux = metricsMux
	}
	health := func(w http.ResponseWriter, _ *http.Request) {
		if healthz != nil {
			if err := healthz(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		healthMux.HandleFunc(path, health)
	}
	var metricsHandler http.Handler = metricsMux
	if o.metricsTLS != nil {
		metricsHandler = o.wrapMetrics(metricsMux)
	}
	servers := map[string]http.Handler{serving.MetricsBindAddress: metricsHandler}
	if serving.HealthzBindAddress != serving.MetricsBindAddress {
		servers[serving.HealthzBindAddress] = healthMux
	}
	return servers
}

// serve serves handler on l (over TLS when tlsConfig is set) until ctx is
// done, then shuts the server down; a failure to serve is sent on errs.
func serve(ctx context.Context, l net.Listener, handler http.Handler, tlsConfig *tls.Config, errs chan<- error) {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig
		l = tls.NewListener(l, tlsConfig)
	}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		klog.FromContext(ctx).Info("Serving", "address", l.Addr().String())
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve on %s: %w", l.Addr(), err)
		}
	}()
}
