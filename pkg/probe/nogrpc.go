//go:build nogrpcprobe

package probe

import "context"

// GRPCBuiltIn reports whether this build has the grpc probe; see grpc.go.
const GRPCBuiltIn = false

// GRPC returns a probe that always fails with ErrGRPCNotBuiltIn; New refuses
// grpc probes in this build before it comes to that.
func GRPC(address, service string) Func {
	return func(context.Context) error { return ErrGRPCNotBuiltIn }
}
