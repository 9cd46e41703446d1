//go:build !nogrpcprobe

package probe

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The gRPC probe is the one costly probe: grpc-go is 1.5 MB of a 17 MB
// release binary and about 1.1 MiB of its RSS, whether or not a grpc probe
// runs, because Go links statically and its packages' initialisation runs
// in every process. Builds with the nogrpcprobe tag leave it out (see
// nogrpc.go); `make release-build` ships such a build as extension-heartbeat
// and a full one, extension-heartbeat-grpc, which the lean one executes in
// its place when the configuration names a grpc probe. Release builds also
// add the grpcnotrace tag, which leaves out grpc's request tracing
// (golang.org/x/net/trace and html/template: 4 MB of binary, see
// docs/benchmarks.md).

// GRPCBuiltIn reports whether this build has the grpc probe.
const GRPCBuiltIn = true

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
