package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestStringNamesEveryField(t *testing.T) {
	i := Info{GitVersion: "v1.2.3", GitCommit: "abc123", BuildDate: "2026-11-23T06:00:00Z", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	got := i.String()
	for _, want := range []string{"v1.2.3", "abc123", "2026-11-23T06:00:00Z", "go1.26.8", "linux/arm64"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not name %q", got, want)
		}
	}
}

func TestGetReportsThisBinary(t *testing.T) {
	i := Get()
	if i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get() = %+v, want this binary's Go version and platform", i)
	}
	if i.GitVersion == "" {
		t.Error("an unstamped build has no version; want the development default")
	}
}
