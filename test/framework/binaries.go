package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// BinDirEnv overrides where the control-plane binaries are looked up.
	BinDirEnv = "NODEHEALTH_BIN_DIR"
	// KeepArtifactsEnv keeps an Environment's directory (logs, PKI, etcd data) after Stop.
	KeepArtifactsEnv = "NODEHEALTH_KEEP_ARTIFACTS"

	modulePath = "nodehealth.io/nodehealth"
	// stampFile is written by hack/build-controlplane.sh after a complete build and
	// removed when a rebuild starts, so a half-written binary is never used.
	stampFile = ".controlplane-stamp"
)

// Names of the binaries hack/build-controlplane.sh builds.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"
)

// RepoRoot returns the root of the nodehealth.io/nodehealth module: the first
// directory, walking up from the working directory, whose go.mod declares it.
// Tests run in their package directory and the sandbox in the repository root, so
// the working directory is the reliable starting point.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if declaresModule(filepath.Join(d, "go.mod"), modulePath) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod declaring module %s in %s or any parent directory", modulePath, dir)
		}
	}
}

func declaresModule(goMod, module string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}

// BinDir returns the directory holding the control-plane binaries:
// $NODEHEALTH_BIN_DIR if set, else <repo root>/_output/bin.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating the control-plane binaries (set %s to override): %w", BinDirEnv, err)
	}
	return filepath.Join(root, "_output", "bin"), nil
}

// checkBinaries verifies every named binary exists in dir before anything starts, so
// a missing build is one clear error instead of a half-started control plane.
func checkBinaries(dir string, names ...string) error {
	const howto = "build them with `make controlplane` (or hack/build-controlplane.sh), or point " + BinDirEnv + " at a directory holding them"
	var missing []string
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries missing from %s: %s; %s", dir, strings.Join(missing, ", "), howto)
	}
	// Only the build script's own output directory has a stamp; a directory given via
	// the environment variable is trusted as is.
	if os.Getenv(BinDirEnv) == "" {
		if _, err := os.Stat(filepath.Join(dir, stampFile)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("control-plane build in %s is incomplete or in progress (no %s); %s", dir, stampFile, howto)
		}
	}
	return nil
}
