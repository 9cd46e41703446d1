package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The smallest deployable binary keeps the test's builds cheap; every image
// is assembled by the same code.
const testBinary = "extension-heartbeat"

var testMeta = Metadata{
	Version:  "v1.2.3-test",
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Source:   "https://example.com/nodehealth",
	Created:  time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC),
}

var (
	amd64 = Platform{OS: "linux", Arch: "amd64"}
	arm64 = Platform{OS: "linux", Arch: "arm64"}
)

// -cross: the multi-platform test builds linux/arm64 beside linux/amd64.
// Off in make test: a cold build cache compiles the binary's whole
// dependency tree once more for arm64, minutes on two cores, to check what
// make release checks again (make test-images-cross runs it).
var cross = flag.Bool("cross", true, "also build and check the linux/arm64 image (make test-images-cross)")

// testPlatforms are the platforms of the multi-platform test.
func testPlatforms() []Platform {
	if *cross {
		return []Platform{amd64, arm64}
	}
	return []Platform{amd64}
}

func testOptions(out string, platforms ...Platform) Options {
	return Options{
		RepoRoot:  "../..",
		OutDir:    out,
		Binaries:  []string{testBinary},
		Platforms: platforms,
		Tarballs:  []Platform{platforms[0]},
		Registry:  "registry.example.com/platform",
		Tag:       "v1.2.3-test",
		Meta:      testMeta,
		GoFlags:   GoFlags{Tags: "grpcnotrace", LDFlags: "-s -w"},
	}
}

func build(t *testing.T, o Options) Built {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool:", err)
	}
	built, err := Build(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != 1 {
		t.Fatalf("built %d images, want 1", len(built))
	}
	return built[0]
}

// amd64Build is one linux/amd64 build shared by the tests that need one
// (each build links and compresses the binary again).
var amd64Once struct {
	sync.Once
	built []Built
	err   error
}

// firstImage is the image of the index's first platform (linux/amd64 in
// amd64Build).
func firstImage(t *testing.T, b Built) v1.Image {
	t.Helper()
	idx, err := b.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := b.Index.Image(idx.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func amd64Build(t *testing.T) Built {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool:", err)
	}
	amd64Once.Do(func() {
		amd64Once.built, amd64Once.err = Build(context.Background(), testOptions(sharedDir, amd64), io.Discard)
	})
	if amd64Once.err != nil {
		t.Fatal(amd64Once.err)
	}
	if len(amd64Once.built) != 1 {
		t.Fatalf("built %d images, want 1", len(amd64Once.built))
	}
	return amd64Once.built[0]
}

var sharedDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "images-test-")
	if err != nil {
		panic(err)
	}
	sharedDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Two builds of the same sources give the same digests, whatever the build
// folder and the binaries' file times.
func TestBuildsAreReproducible(t *testing.T) {
	first := amd64Build(t)
	// The second build writes its binary anew, later and elsewhere, so its
	// file time and path differ; nothing in the image may depend on them.
	second := build(t, testOptions(t.TempDir(), amd64))
	if first.Digest != second.Digest {
		t.Fatalf("two builds differ: %s and %s", first.Digest, second.Digest)
	}
	// What is on disk is what was computed.
	for _, b := range []Built{first, second} {
		idx, err := layout.ImageIndexFromPath(b.Layout)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Digest != first.Digest {
			t.Errorf("%s/index.json: %+v, want the one index %s", b.Layout, m.Manifests, first.Digest)
		}
		if got := m.Manifests[0].Annotations["io.containerd.image.name"]; got != "registry.example.com/platform/nodehealth/extension-heartbeat:v1.2.3-test" {
			t.Errorf("io.containerd.image.name = %q", got)
		}
	}
}

// Each platform's image (linux/amd64 and, with -cross, linux/arm64): the
// config (user, entrypoint, labels, platform), the index's platforms, the
// files (no shell, a CA bundle, the user), and that each holds a binary of
// its own architecture.
func TestImageConfigOfEachPlatform(t *testing.T) {
	out := t.TempDir()
	platforms := testPlatforms()
	b := build(t, testOptions(out, platforms...))
	idx, err := layout.ImageIndexFromPath(b.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	index, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index media type %q", im.MediaType)
	}
	if im.Annotations["org.opencontainers.image.version"] != testMeta.Version {
		t.Errorf("index annotations %v lack the version", im.Annotations)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    testBinary,
		"org.opencontainers.image.version":  "v1.2.3-test",
		"org.opencontainers.image.revision": testMeta.Revision,
		"org.opencontainers.image.source":   "https://example.com/nodehealth",
		"org.opencontainers.image.created":  "2026-11-23T06:00:00Z",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("index has %d manifests, want %d (%v)", len(im.Manifests), len(platforms), platforms)
	}
	for i, p := range platforms {
		desc := im.Manifests[i]
		if desc.Platform == nil || desc.Platform.OS != p.OS || desc.Platform.Architecture != p.Arch {
			t.Errorf("manifest %d platform %+v, want %s", i, desc.Platform, p)
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Arch {
			t.Errorf("%s: config platform %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
		}
		if want := []string{"/usr/local/bin/" + testBinary}; !reflect.DeepEqual(cf.Config.Entrypoint, want) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want %q and no cmd", p, cf.Config.Entrypoint, cf.Config.Cmd, want)
		}
		if !reflect.DeepEqual(cf.Config.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", p, cf.Config.Labels, wantLabels)
		}
		if !cf.Created.Equal(testMeta.Created) {
			t.Errorf("%s: created %s, want %s", p, cf.Created, testMeta.Created)
		}
		files := imageFiles(t, img)
		for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
			if _, ok := files[shell]; ok {
				t.Errorf("%s: the image has %s", p, shell)
			}
		}
		if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
			t.Errorf("%s: /etc/passwd lacks the non-root user:\n%s", p, files["etc/passwd"].data)
		}
		checkCABundle(t, files["etc/ssl/certs/ca-certificates.crt"].data)
		if tmp := files["tmp"]; tmp.mode != 0o1777 {
			t.Errorf("%s: /tmp mode %o", p, tmp.mode)
		}
		exe := files["usr/local/bin/"+testBinary]
		if exe.mode != 0o755 {
			t.Errorf("%s: binary mode %o", p, exe.mode)
		}
		f, err := elf.NewFile(strings.NewReader(string(exe.data)))
		if err != nil {
			t.Fatalf("%s: the entrypoint is not an ELF binary: %v", p, err)
		}
		if f.Machine != wantMachine[p.Arch] {
			t.Errorf("%s: the binary is for %s", p, f.Machine)
		}
		if f.Section(".interp") != nil {
			t.Errorf("%s: the binary is dynamically linked; want static (CGO_ENABLED=0)", p)
		}
	}
	// The tarball holds the first platform under its name: the same config
	// and layers (its manifest is Docker's, so its digest differs).
	tag, err := name.NewTag("registry.example.com/platform/nodehealth/extension-heartbeat:v1.2.3-test")
	if err != nil {
		t.Fatal(err)
	}
	timg, err := tarball.ImageFromPath(filepath.Join(out, "extension-heartbeat-linux-amd64.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	first, err := index.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := configName(t, timg), configName(t, first); got != want {
		t.Errorf("the tarball's image has config %s, the index's linux/amd64 image %s", got, want)
	}
	if got, want := diffIDs(t, timg), diffIDs(t, first); !reflect.DeepEqual(got, want) {
		t.Errorf("the tarball's layers %v, the index's linux/amd64 image's %v", got, want)
	}
}

// The linux/amd64 entrypoint, taken out of the image, runs and reports the
// stamped version.
func TestEntrypointRunsVersion(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("runs a linux/amd64 binary")
	}
	img := firstImage(t, amd64Build(t))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	entry := strings.TrimPrefix(cf.Config.Entrypoint[0], "/")
	exe := filepath.Join(t.TempDir(), filepath.Base(entry))
	if err := os.WriteFile(exe, imageFiles(t, img)[entry].data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--version")
	cmd.Env = []string{} // nothing from the test's environment
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", entry, err, out)
	}
	want := testBinary + " v1.2.3-test (commit " + testMeta.Revision + ", built 2026-11-23T06:00:00Z, "
	if !strings.HasPrefix(string(out), want) || !strings.HasSuffix(string(out), " linux/amd64)\n") {
		t.Errorf("--version printed %q, want %q... linux/amd64)", out, want)
	}
}

// The extension-heartbeat image runs the lean build and ships the full build
// beside it, which the lean one executes for a grpc probe or profiling: an
// image without it could not run those configurations at all.
func TestLeanBuildShipsFullBuild(t *testing.T) {
	lean, ok, err := LoadLeanBuild("../..", testBinary)
	if err != nil || !ok {
		t.Fatalf("%s is not a lean build (%v)", testBinary, err)
	}
	img := firstImage(t, amd64Build(t))
	files := imageFiles(t, img)
	tagsOf := func(name string) string {
		t.Helper()
		f, ok := files["usr/local/bin/"+name]
		if !ok {
			t.Fatalf("the image has no /usr/local/bin/%s", name)
		}
		info, err := buildinfo.Read(bytes.NewReader(f.data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range info.Settings {
			if s.Key == "-tags" {
				return s.Value
			}
		}
		return ""
	}
	if got, want := tagsOf(testBinary), "grpcnotrace,"+lean.Tags; got != want {
		t.Errorf("the entrypoint %s was built with tags %q, want %q", testBinary, got, want)
	}
	if got, want := tagsOf(lean.Full), "grpcnotrace"; got != want {
		t.Errorf("the full build %s was built with tags %q, want %q", lean.Full, got, want)
	}
}

func TestAnImageIsNamedByRegistryComponentAndTag(t *testing.T) {
	for _, tc := range []struct{ registry, tag, want string }{
		{"", "", "nodehealth/update-agent:v1.0.0"},
		{"registry.example.com/platform/", "", "registry.example.com/platform/nodehealth/update-agent:v1.0.0"},
		{"localhost:5000", "dev", "localhost:5000/nodehealth/update-agent:dev"},
		{"ghcr.io", "", "ghcr.io/nodehealth/update-agent:v1.0.0"},
	} {
		o := Options{Registry: tc.registry, Tag: tc.tag, Meta: Metadata{Version: "v1.0.0"}}
		if got := o.Name("update-agent"); got != tc.want {
			t.Errorf("registry %q tag %q: %q, want %q", tc.registry, tc.tag, got, tc.want)
		}
	}
	for ref, want := range map[string]string{
		"nodehealth/update-agent:v1":                        "docker.io/nodehealth/update-agent:v1",
		"localhost:5000/nodehealth/update-agent:v1":         "localhost:5000/nodehealth/update-agent:v1",
		"localhost/nodehealth/update-agent:e2e":             "localhost/nodehealth/update-agent:e2e",
		"ghcr.io/nodehealth/update-agent:v1":                "ghcr.io/nodehealth/update-agent:v1",
		"registry.example.com/x/nodehealth/update-agent:v1": "registry.example.com/x/nodehealth/update-agent:v1",
	} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := ContainerdName(tag); got != want {
			t.Errorf("ContainerdName(%s) = %s, want %s", ref, got, want)
		}
	}
}

func TestBadPlatformsTarballsAndTagsAreRefused(t *testing.T) {
	for _, s := range []string{"linux", "linux/", "/amd64", "linux/arm/v7"} {
		if _, err := ParsePlatform(s); err == nil {
			t.Errorf("ParsePlatform(%q) accepted", s)
		}
	}
	o := testOptions(t.TempDir(), amd64)
	o.Tarballs = []Platform{arm64}
	if _, err := Build(context.Background(), o, io.Discard); err == nil || !strings.Contains(err.Error(), "not one of the built platforms") {
		t.Errorf("a tarball of an unbuilt platform: %v", err)
	}
	o = testOptions(t.TempDir(), amd64)
	o.Tag = "not a tag"
	if _, err := Build(context.Background(), o, io.Discard); err == nil {
		t.Error("an invalid tag was accepted")
	}
}

type imageFile struct {
	mode int64
	data []byte
}

// imageFiles reads every file of every layer of img.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]imageFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("%s: modification time %s, want the epoch", h.Name, h.ModTime)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = imageFile{mode: h.Mode, data: data}
		}
		_ = rc.Close()
	}
	return files
}

func checkCABundle(t *testing.T, data []byte) {
	t.Helper()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("CA bundle: %v", err)
		}
		n++
	}
	// NSS holds about 150 roots; far fewer means the bundle is broken.
	if n < 100 {
		t.Errorf("CA bundle holds %d certificates", n)
	}
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func diffIDs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.RootFS.DiffIDs
}

// The update operator evaluates UpdatePolicy windows in IANA time zones, and
// the images have no zoneinfo: the image of update-operator carries no
// /usr/share/zoneinfo, and its binary embeds the time zone database
// (time/tzdata), which time.LoadLocation falls back to — the names of zones
// no code of ours mentions are in it. pkg/updater/window's tests show a
// window in Europe/Berlin opening at its local time.
func TestTheUpdateOperatorImageEmbedsTheTimeZoneDatabase(t *testing.T) {
	o := testOptions(t.TempDir(), amd64)
	o.Binaries = []string{"update-operator"}
	img := firstImage(t, build(t, o))
	files := imageFiles(t, img)
	var bin []byte
	for name, f := range files {
		if strings.Contains(name, "zoneinfo") {
			t.Errorf("the image has %s: this test no longer proves the embedded database is what is used", name)
		}
		if strings.HasSuffix(name, "/update-operator") {
			bin = f.data
		}
	}
	if bin == nil {
		t.Fatal("the image has no update-operator binary")
	}
	for _, zone := range []string{"Europe/Berlin", "America/Argentina/ComodRivadavia", "Pacific/Chatham"} {
		if !bytes.Contains(bin, []byte(zone)) {
			t.Errorf("the update-operator binary does not embed the time zone %s (is time/tzdata still imported?)", zone)
		}
	}
}
