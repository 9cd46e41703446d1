package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
)

// GRPCBuildName is the file name of the full build of extension-heartbeat,
// the one with the grpc probe. `make release-build` builds extension-heartbeat
// without it (build tag nogrpcprobe: grpc-go is 1.5 MB of binary and about
// 1.1 MiB of RSS, paid by every sidecar whatever it probes) and this one
// beside it; an image ships both in one directory.
const GRPCBuildName = "extension-heartbeat-grpc"

// execGRPCBuild replaces this process, which has no grpc probe, with the full
// build next to its executable, given the same arguments and environment:
// the same PID, nothing started yet, so the pod sees one process either way.
// It returns only on failure.
func execGRPCBuild(logger klog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the grpc probe is not in this build (nogrpcprobe build tag) and its own path is unknown: %w", err)
	}
	if filepath.Base(self) == GRPCBuildName {
		return fmt.Errorf("%s was built without the grpc probe (nogrpcprobe build tag); rebuild it without that tag", self)
	}
	full := filepath.Join(filepath.Dir(self), GRPCBuildName)
	if st, err := os.Stat(full); err != nil || st.IsDir() {
		if err == nil {
			err = errors.New("is a directory")
		}
		return fmt.Errorf("the grpc probe is not in this build of extension-heartbeat (nogrpcprobe build tag), and the full build %s it runs for a grpc probe is missing: %w", full, err)
	}
	logger.Info("The grpc probe is in the full build; executing it in this process's place", "path", full)
	klog.Flush()
	if err := syscall.Exec(full, append([]string{full}, os.Args[1:]...), os.Environ()); err != nil {
		return fmt.Errorf("executing the full build %s for the grpc probe: %w", full, err)
	}
	return nil
}
