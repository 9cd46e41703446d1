// Package version owns the identity of a build: the version, commit and
// build date that release builds stamp into the binaries with
// -ldflags -X (see VERSION_LDFLAGS in the Makefile) and that every binary
// prints with --version. A plain `go build` leaves the development defaults.
package version

import (
	"fmt"
	"runtime"
)

// Set with -ldflags "-X nodehealth.io/nodehealth/pkg/version.gitVersion=...".
// They stay variables (not constants) so the linker can overwrite them.
var (
	gitVersion = "v0.0.0-dev"
	gitCommit  = "unknown"
	buildDate  = "unknown" // RFC 3339, UTC
)

// Info is the identity of the running binary.
type Info struct {
	GitVersion string `json:"gitVersion"`
	GitCommit  string `json:"gitCommit"`
	BuildDate  string `json:"buildDate"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// Get returns the stamped identity of this binary.
func Get() Info {
	return Info{
		GitVersion: gitVersion,
		GitCommit:  gitCommit,
		BuildDate:  buildDate,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one line --version prints after the binary's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.GitVersion, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}
