package probe

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The gRPC probe is the one costly probe. Go links statically, so grpc-go is
// in every build and its package initialisation (about 70 KiB of heap) runs
// in every process; but it opens no connection and starts no goroutine
// unless a grpc probe is configured. Release builds add the grpcnotrace
// build tag, which leaves out grpc's request tracing (golang.org/x/net/trace
// and html/template: 4 MB of binary, see docs/benchmarks.md).

// GRPC returns a probe that calls grpc.health.v1.Health/Check on a plaintext
// server and succeeds when it answers SERVING. Like the kubelet's gRPC probe
// it opens a new connection per probe.
func GRPC(address, service string) Func {
	name := "grpc " + address
	if service != "" {
		name += " service " + service
	}
	return func(ctx context.Context) error {
		conn, err := grpc.NewClient("passthrough:///"+address,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUserAgent("nodehealth-extension-heartbeat"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s: status %s", name, s)
		}
		return nil
	}
}
