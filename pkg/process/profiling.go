//go:build !noprofiling

package process

import (
	"net/http"
	"net/http/pprof"
)

// ProfilingBuiltIn reports whether this build can serve /debug/pprof. Builds
// with the noprofiling tag leave net/http/pprof and runtime/pprof out (about
// 0.3 MB of binary, paid in RSS by every per-node process whether profiling
// is enabled or not); `make release-build` uses it for extension-heartbeat,
// whose full build, extension-heartbeat-grpc, keeps it.
const ProfilingBuiltIn = true

func registerProfiling(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
