// Package linkcheck checks what a package links, for the tests of the
// simulations' models: a model is valuable only while it is independent of
// the component it checks. It uses the standard library only, so that a
// model's test can import it without linking anything the model may not.
package linkcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// self is this package, which every checked test build links.
const self = "nodehealth.io/nodehealth/test/linkcheck"

// Check lists, with go list -deps, what the package in the working directory
// (the package under test, pkg) links in its build and in its test build,
// and fails t for each package forbidden rejects, with the reason it gives
// ("" allows the package). It skips in -short mode and without a go tool.
func Check(t testing.TB, pkg string, forbidden func(dep string) (why string)) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	for _, args := range [][]string{
		{"list", "-deps", "."},
		{"list", "-deps", "-test", "."},
	} {
		out, err := exec.Command(goTool, args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			d := strings.Fields(line)[0] // "p [p.test]" is p built for the test
			switch d {
			case pkg, pkg + ".test", pkg + "_test", self:
				continue
			}
			if why := forbidden(d); why != "" {
				t.Errorf("%s links %s: %s", pkg, d, why)
			}
		}
	}
}
