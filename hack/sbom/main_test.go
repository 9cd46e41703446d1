package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdxlib"
)

// TestTheSBOMOfABinaryListsExactlyTheModulesItWasBuiltWith builds this command and checks its own SBOM: it validates as
// SPDX, describes the binary, and the binary contains exactly the modules of
// its build information plus stdlib, read back from the JSON.
func TestTheSBOMOfABinaryListsExactlyTheModulesItWasBuiltWith(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "sbom")
	if b, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	o := Options{Name: "sbom-test", Version: "v0.0.0-test", Namespace: "https://example.com/spdx", Supplier: "nodehealth", Created: time.Unix(0, 0), Binaries: []string{exe}}
	doc, err := Document(o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf); err != nil {
		t.Fatal(err)
	}
	back, err := spdxjson.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := spdxlib.ValidateDocument(back); err != nil {
		t.Fatalf("not valid SPDX: %v", err)
	}
	described, err := spdxlib.GetDescribedPackageIDs(back)
	if err != nil || len(described) != 1 {
		t.Fatalf("described packages: %v, %v", described, err)
	}
	byID := map[string]string{}
	for _, p := range back.Packages {
		byID[string(p.PackageSPDXIdentifier)] = p.PackageName + " " + p.PackageVersion
	}
	var got []string
	for _, r := range back.Relationships {
		if r.Relationship == "CONTAINS" && r.RefA.ElementRefID == described[0] {
			got = append(got, byID[string(r.RefB.ElementRefID)])
		}
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	// The test binary's dependencies are the command's plus the test's; the
	// built command's are read with go version -m.
	out, err := exec.Command("go", "version", "-m", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stdlib " + info.GoVersion}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[0] == "mod" || f[0] == "dep") {
			want = append(want, f[1]+" "+f[2])
		}
	}
	if strings.Join(sorted(got), "\n") != strings.Join(sorted(want), "\n") {
		t.Errorf("modules of the SBOM:\n%s\nwant (go version -m):\n%s", strings.Join(sorted(got), "\n"), strings.Join(sorted(want), "\n"))
	}
	if !strings.HasPrefix(back.DocumentNamespace, "https://example.com/spdx/sbom-test-v0.0.0-test-") {
		t.Errorf("namespace %s", back.DocumentNamespace)
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
