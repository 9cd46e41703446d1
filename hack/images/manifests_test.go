package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	imageLine  = regexp.MustCompile(`(?m)^\s*image:\s*"?(\S*nodehealth/[^"\s]+)"?\s*$`)
	appVersion = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)
)

// Every nodehealth image the manifests of deploy/ name is one `make images`
// builds, spelled ghcr.io/nodehealth/<binary>:v<appVersion> (the project's
// registry, and the tag the release of the chart's appVersion pushes; never
// latest), so that one kustomize `images:` entry (or the chart's
// image.registry) points it at a registry, and the kustomize bases of a
// release run that release's images.
func TestManifestsNameBuiltImages(t *testing.T) {
	chart, err := os.ReadFile("../../deploy/charts/nodehealth/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := appVersion.FindSubmatch(chart)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	tag := "v" + strings.TrimPrefix(string(m[1]), "v")
	seen := map[string]bool{}
	err = filepath.WalkDir("../../deploy", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || strings.Contains(path, "/charts/") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(b), -1) {
			repo, gotTag, _ := strings.Cut(m[1], ":")
			binary := strings.TrimPrefix(repo, "ghcr.io/nodehealth/")
			if !slices.Contains(DefaultBinaries, binary) {
				t.Errorf("%s: image %s is not ghcr.io/nodehealth/<binary> of a binary make images builds (%v)", path, m[1], DefaultBinaries)
			}
			if gotTag != tag {
				t.Errorf("%s: image %s, want the tag %s (v + the chart's appVersion)", path, m[1], tag)
			}
			seen[binary] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range DefaultBinaries {
		if !seen[b] {
			t.Errorf("no manifest of deploy/ runs ghcr.io/nodehealth/%s", b)
		}
	}
}

// The overlay docs/images.md shows sets the registry and tag of the images
// kustomize renders.
func TestKustomizeSetsRegistryAndTag(t *testing.T) {
	kubectl, err := filepath.Abs("../../_output/bin/kubectl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Skip("no kubectl in _output/bin (make controlplane):", err)
	}
	deploy, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range []string{"", "update-operator", "update-agent"} {
		rel, err := filepath.Rel(dir, filepath.Join(deploy, r))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("- " + rel + "\n")
	}
	b.WriteString("images:\n")
	for _, bin := range DefaultBinaries {
		b.WriteString("- name: ghcr.io/nodehealth/" + bin + "\n  newName: registry.example.com/platform/nodehealth/" + bin + "\n  newTag: v1.2.3\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	var images []string
	for _, m := range regexp.MustCompile(`(?m)^\s*image:\s*(\S+)$`).FindAllStringSubmatch(string(out), -1) {
		images = append(images, m[1])
	}
	slices.Sort(images)
	images = slices.Compact(images)
	want := []string{
		"registry.example.com/platform/nodehealth/nodehealth-controller:v1.2.3",
		"registry.example.com/platform/nodehealth/update-agent:v1.2.3",
		"registry.example.com/platform/nodehealth/update-operator:v1.2.3",
	}
	if !slices.Equal(images, want) {
		t.Errorf("rendered images %v, want %v", images, want)
	}
}
