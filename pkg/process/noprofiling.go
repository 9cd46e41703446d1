//go:build noprofiling

package process

import "net/http"

// ProfilingBuiltIn reports whether this build can serve /debug/pprof; see
// profiling.go.
const ProfilingBuiltIn = false

func registerProfiling(*http.ServeMux) {}
