package linkcheck

import (
	"fmt"
	"testing"
)

// recorder keeps the errors Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCheckReportsAForbiddenPackage(t *testing.T) {
	r := &recorder{TB: t}
	// The package links fmt through testing, in both builds.
	Check(r, self, func(d string) string {
		if d == "fmt" {
			return "forbidden here"
		}
		return ""
	})
	if len(r.errors) != 2 {
		t.Fatalf("Check reported %q, want fmt in the build and in the test build", r.errors)
	}
}

func TestCheckAllowsWhatForbiddenAllows(t *testing.T) {
	r := &recorder{TB: t}
	Check(r, self, func(string) string { return "" })
	if len(r.errors) != 0 {
		t.Errorf("Check reported %q with nothing forbidden", r.errors)
	}
}
