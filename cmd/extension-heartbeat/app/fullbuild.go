package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/probe"
	"nodehealth.io/nodehealth/pkg/process"
)

// FullBuildName is the file name of the full build of extension-heartbeat,
// the one with the grpc probe and profiling. `make release-build` builds
// extension-heartbeat without them (build tags nogrpcprobe and noprofiling:
// grpc-go is 1.5 MB of binary and about 1.1 MiB of RSS, net/http/pprof about
// 0.3 MB, paid by every sidecar whatever it probes) and this one beside it;
// an image ships both in one directory.
const FullBuildName = "extension-heartbeat-grpc"

// fullBuildNeeded says why this build cannot run the configuration itself
// and must hand over to the full build; "" when it can.
func fullBuildNeeded(grpcProbe, enableProfiling bool) string {
	switch {
	case grpcProbe && !probe.GRPCBuiltIn:
		return "the grpc probe"
	case enableProfiling && !process.ProfilingBuiltIn:
		return "profiling (debugging.enableProfiling)"
	}
	return ""
}

// execFullBuild replaces this process, which lacks what (the grpc probe or
// profiling), with the full build next to its executable, given the same
// arguments and environment: the same PID, nothing started yet, so the pod
// sees one process either way. It returns only on failure.
func execFullBuild(logger klog.Logger, what string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s is not in this build and its own path is unknown: %w", what, err)
	}
	if filepath.Base(self) == FullBuildName {
		return fmt.Errorf("%s was built without %s (nogrpcprobe or noprofiling build tag); rebuild it without those tags", self, what)
	}
	full := filepath.Join(filepath.Dir(self), FullBuildName)
	if st, err := os.Stat(full); err != nil || st.IsDir() {
		if err == nil {
			err = errors.New("is a directory")
		}
		return fmt.Errorf("%s is not in this build of extension-heartbeat (nogrpcprobe and noprofiling build tags), and the full build %s it runs for it is missing: %w", what, full, err)
	}
	logger.Info("This configuration needs the full build; executing it in this process's place", "needs", what, "path", full)
	klog.Flush()
	if err := syscall.Exec(full, append([]string{full}, os.Args[1:]...), os.Environ()); err != nil {
		return fmt.Errorf("executing the full build %s for %s: %w", full, what, err)
	}
	return nil
}
