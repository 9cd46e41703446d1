package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultBinaries are the deployable binaries: the ones deploy/ and the Helm
// chart run. bottlerocket-api-emulator is a test tool whose reboot hook runs
// `sh -c`, which an image without a shell cannot serve.
var DefaultBinaries = []string{"nodehealth-controller", "extension-heartbeat", "update-operator", "update-agent"}

// versionPackage holds the variables -ldflags -X stamps (pkg/version).
const versionPackage = "nodehealth.io/nodehealth/pkg/version"

// Options say what to build and where to write it.
type Options struct {
	RepoRoot  string
	OutDir    string
	Binaries  []string
	Platforms []Platform
	// Tarballs are the platforms also written as docker-style tarballs.
	Tarballs []Platform
	// Registry is prefixed to nodehealth/<binary>; empty leaves the bare
	// name, as the manifests and the chart do by default.
	Registry string
	// CmdDir is the folder of the binaries' main packages, relative to
	// RepoRoot: ./cmd (the product) unless set, e.g. ./test/e2e/images for
	// the e2e tests' pause and workload images.
	CmdDir  string
	Tag     string
	Meta    Metadata
	GoFlags GoFlags
}

// GoFlags are the go build flags besides GOOS/GOARCH.
type GoFlags struct {
	Tags    string
	LDFlags string
}

// Name is the image name of a binary: [registry/]nodehealth/<binary>:<tag>,
// the naming of deploy/ and the Helm chart.
func (o Options) Name(binary string) string {
	repo := "nodehealth/" + binary
	if r := strings.TrimSuffix(o.Registry, "/"); r != "" {
		repo = r + "/" + repo
	}
	return repo + ":" + o.tag()
}

func (o Options) cmdDir() string {
	if o.CmdDir != "" {
		return o.CmdDir
	}
	return "./cmd"
}

func (o Options) tag() string {
	if o.Tag != "" {
		return o.Tag
	}
	return o.Meta.Version
}

// Built is one binary's result.
type Built struct {
	Name   string  // the image name with its tag
	Digest v1.Hash // the index's digest
	Layout string  // the OCI layout folder
	Index  v1.ImageIndex
}

// Build builds every binary for every platform and writes the layouts and
// tarballs; it logs progress to log.
func Build(ctx context.Context, o Options, log io.Writer) ([]Built, error) {
	if len(o.Binaries) == 0 || len(o.Platforms) == 0 {
		return nil, fmt.Errorf("nothing to build: %d binaries, %d platforms", len(o.Binaries), len(o.Platforms))
	}
	for _, t := range o.Tarballs {
		if !containsPlatform(o.Platforms, t) {
			return nil, fmt.Errorf("tarball platform %s is not one of the built platforms", t)
		}
	}
	ldflags := o.GoFlags.LDFlags + " " + VersionLDFlags(o.Meta)
	var out []Built
	var digests []string
	for _, b := range o.Binaries {
		ref, err := name.NewTag(o.Name(b))
		if err != nil {
			return nil, fmt.Errorf("image name of %s: %w", b, err)
		}
		var images []v1.Image
		for _, p := range o.Platforms {
			start := time.Now()
			exes, err := buildExecutables(ctx, o, b, p, ldflags)
			if err != nil {
				return nil, err
			}
			img, err := Image(b, exes, p, o.Meta)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", b, p, err)
			}
			images = append(images, img)
			fmt.Fprintf(log, "images: %s %s built in %s\n", b, p, time.Since(start).Round(100*time.Millisecond))
		}
		idx, err := Index(b, images, o.Platforms, o.Meta)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(o.OutDir, b)
		if err := WriteLayout(dir, idx, ref); err != nil {
			return nil, fmt.Errorf("%s: %w", b, err)
		}
		for _, t := range o.Tarballs {
			path := filepath.Join(o.OutDir, fmt.Sprintf("%s-%s-%s.tar", b, t.OS, t.Arch))
			img := images[platformIndex(o.Platforms, t)]
			if err := tarball.WriteToFile(path, ref, img); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, Built{Name: ref.String(), Digest: d, Layout: dir, Index: idx})
		digests = append(digests, ref.String()+"@"+d.String())
	}
	sort.Strings(digests)
	if err := os.WriteFile(filepath.Join(o.OutDir, "digests.txt"), []byte(strings.Join(digests, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

// A LeanBuild describes a binary whose image entrypoint is built without some
// features (build tags) and which executes the full build, shipped beside it,
// when its configuration needs one of them.
type LeanBuild struct {
	// Tags are added to the image's build tags for the entrypoint.
	Tags string
	// Full is the file name of the full build beside it.
	Full string
	// GCFlags are go build -gcflags arguments of the entrypoint.
	GCFlags []string
}

// LeanBuildFile holds the lean build's tags and gcflags, relative to the
// repository's root: the one place they are written (the Makefile's
// release-build reads it too).
const LeanBuildFile = "hack/heartbeat-lean.conf"

// leanBinaries are the binaries built that way, with the file name of their
// full build: extension-heartbeat leaves the grpc probe and profiling out of
// every sidecar that does not use them (cmd/extension-heartbeat/app/fullbuild.go).
var leanBinaries = map[string]string{"extension-heartbeat": "extension-heartbeat-grpc"}

// LoadLeanBuild returns how binary b is built lean, read from LeanBuildFile
// under repoRoot; ok is false for a binary that is not built lean.
func LoadLeanBuild(repoRoot, b string) (lean LeanBuild, ok bool, err error) {
	full, ok := leanBinaries[b]
	if !ok {
		return LeanBuild{}, false, nil
	}
	path := filepath.Join(repoRoot, LeanBuildFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return LeanBuild{}, false, err
	}
	lean.Full = full
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, found := strings.Cut(line, "=")
		switch {
		case !found:
			return LeanBuild{}, false, fmt.Errorf("%s:%d: want key=value, got %q", path, i+1, line)
		case key == "tags":
			lean.Tags = value
		case key == "gcflags":
			lean.GCFlags = strings.Fields(value)
		default:
			return LeanBuild{}, false, fmt.Errorf("%s:%d: unknown key %q (want tags or gcflags)", path, i+1, key)
		}
	}
	if lean.Tags == "" {
		return LeanBuild{}, false, fmt.Errorf("%s: no tags= line", path)
	}
	return lean, true, nil
}

// buildExecutables builds what the image of binary b holds for platform p:
// the binary, and for a lean build the full build beside it.
func buildExecutables(ctx context.Context, o Options, b string, p Platform, ldflags string) ([]Executable, error) {
	type target struct {
		name, tags string
		gcflags    []string
	}
	targets := []target{{b, o.GoFlags.Tags, nil}}
	lean, ok, err := LoadLeanBuild(o.RepoRoot, b)
	if err != nil {
		return nil, err
	}
	if ok {
		targets = []target{{b, joinTags(o.GoFlags.Tags, lean.Tags), lean.GCFlags}, {lean.Full, o.GoFlags.Tags, nil}}
	}
	var exes []Executable
	for _, t := range targets {
		exe := filepath.Join(o.OutDir, "bin", p.OS+"_"+p.Arch, t.name)
		if err := GoBuild(ctx, o.RepoRoot, o.cmdDir()+"/"+b, exe, p, t.tags, ldflags, t.gcflags...); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(exe)
		if err != nil {
			return nil, err
		}
		exes = append(exes, Executable{Name: t.name, Data: data})
	}
	return exes, nil
}

func joinTags(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "," + b
}

// VersionLDFlags are the -X flags that stamp pkg/version, the same as
// VERSION_LDFLAGS of the Makefile.
func VersionLDFlags(m Metadata) string {
	return strings.Join([]string{
		"-X " + versionPackage + ".gitVersion=" + m.Version,
		"-X " + versionPackage + ".gitCommit=" + m.Revision,
		"-X " + versionPackage + ".buildDate=" + m.Created.UTC().Format(time.RFC3339),
	}, " ")
}

// GoBuild builds pkg of the repository at root into out as a static binary.
// The workspace (go.work) is used as by every build of the product.
func GoBuild(ctx context.Context, root, pkg, out string, p Platform, tags, ldflags string, gcflags ...string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-tags=" + tags, "-ldflags=" + ldflags}
	for _, f := range gcflags {
		args = append(args, "-gcflags="+f)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", abs, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOWORK=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, b)
	}
	return nil
}

// WriteLayout replaces dir with an OCI image layout holding idx, named ref:
// org.opencontainers.image.ref.name is the tag (the OCI convention), and
// io.containerd.image.name the full name `ctr images import` gives it.
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return l.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ContainerdName(ref),
	}))
}

// ContainerdName is the name containerd (and so a kubelet) gives ref: a
// name without a registry is Docker Hub's, spelled docker.io.
func ContainerdName(ref name.Tag) string {
	reg := ref.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + ref.RepositoryStr() + ":" + ref.TagStr()
}

func containsPlatform(ps []Platform, p Platform) bool { return platformIndex(ps, p) >= 0 }

func platformIndex(ps []Platform, p Platform) int {
	for i, q := range ps {
		if q == p {
			return i
		}
	}
	return -1
}
