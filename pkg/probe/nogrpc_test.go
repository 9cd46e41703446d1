//go:build nogrpcprobe

package probe

import (
	"errors"
	"testing"
)

// A build without the grpc probe refuses a grpc probe with an error that
// names the full build, instead of a probe that always fails.
func TestNewRefusesGRPCWithoutIt(t *testing.T) {
	if GRPCBuiltIn {
		t.Fatal("GRPCBuiltIn true in a nogrpcprobe build")
	}
	_, err := New(Spec{GRPC: &GRPCOptions{Address: "127.0.0.1:9808"}})
	if !errors.Is(err, ErrGRPCNotBuiltIn) {
		t.Fatalf("New(grpc) = %v, want ErrGRPCNotBuiltIn", err)
	}
}
