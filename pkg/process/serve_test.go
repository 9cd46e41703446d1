package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
)

// /debug/pprof is served only when enabled, and a build without profiling
// (noprofiling tag) refuses to start with it enabled instead of silently
// serving nothing. Run under both tags: `go test -tags noprofiling`.
func TestProfilingIsServedOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("enableProfiling=%v", enabled), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := freeAddress(t)
			_, err := Serve(ctx, config.ServingConfiguration{MetricsBindAddress: addr, HealthzBindAddress: addr}, enabled, prometheus.NewRegistry(), nil)
			if enabled && !ProfilingBuiltIn {
				if !errors.Is(err, ErrProfilingNotBuiltIn) {
					t.Fatalf("Serve with profiling in a noprofiling build: %v, want ErrProfilingNotBuiltIn", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := http.StatusNotFound
			if enabled {
				want = http.StatusOK
			}
			for path, status := range map[string]int{"/debug/pprof/cmdline": want, "/metrics": http.StatusOK, "/healthz": http.StatusOK} {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != status {
					t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, status)
				}
			}
		})
	}
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
