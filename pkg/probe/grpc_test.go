//go:build !nogrpcprobe

package probe

import (
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	addr := l.Addr().String()

	check(t, "overall SERVING", GRPC(addr, "")(ctx(t)), "")
	hs.SetServingStatus("csi", healthpb.HealthCheckResponse_NOT_SERVING)
	check(t, "service NOT_SERVING", GRPC(addr, "csi")(ctx(t)), "status NOT_SERVING")
	hs.SetServingStatus("csi", healthpb.HealthCheckResponse_SERVING)
	check(t, "service SERVING", GRPC(addr, "csi")(ctx(t)), "")
	check(t, "unknown service", GRPC(addr, "nope")(ctx(t)), "NotFound")
	check(t, "nothing listening", GRPC(closedAddress(t), "")(ctx(t)), "Unavailable")
}

func TestNewGRPC(t *testing.T) {
	if !GRPCBuiltIn {
		t.Fatal("GRPCBuiltIn false in a build with the grpc probe")
	}
	p, err := New(Spec{GRPC: &GRPCOptions{Address: closedAddress(t)}})
	if err != nil || p == nil {
		t.Fatalf("New(grpc) = %v", err)
	}
	if err := p(ctx(t)); err == nil || errors.Is(err, ErrGRPCNotBuiltIn) {
		t.Errorf("probe of a closed port: %v, want a connection error", err)
	}
}
