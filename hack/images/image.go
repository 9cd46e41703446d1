package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's user: distroless's "nonroot", so a Pod's runAsNonRoot and
// runAsUser: 65532 agree with the image.
const (
	nonRootUID = 65532
	binDir     = "/usr/local/bin"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
)

// Metadata is what the OCI labels and annotations say about an image.
type Metadata struct {
	Version  string    // org.opencontainers.image.version
	Revision string    // org.opencontainers.image.revision: the commit
	Source   string    // org.opencontainers.image.source: where the code lives
	Created  time.Time // org.opencontainers.image.created, and the config's created
}

// labels are the OCI annotation keys, as labels of the config and as
// annotations of the manifest and index.
func (m Metadata) labels(binary string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    binary,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.created":  m.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Platform is one os/arch an image is built for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

func (p Platform) v1() v1.Platform {
	pl := v1.Platform{OS: p.OS, Architecture: p.Arch}
	if p.Arch == "arm64" {
		// What every arm64 Go image declares; runtimes match it with or
		// without the variant.
		pl.Variant = "v8"
	}
	return pl
}

// ParsePlatform reads "os/arch".
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/arm64", s)
	}
	return Platform{OS: os, Arch: arch}, nil
}

// file is one entry of a layer.
type file struct {
	name     string // without a leading slash
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// layer is a gzip'd tar of files with every header field that could vary
// between builds fixed: modification times at the Unix epoch (so layers that
// hold the same bytes have the same digest whatever the commit), no user or
// group names, USTAR format (no access or change times).
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: time.Unix(0, 0),
			Format:  tar.FormatUSTAR,
		}
		if f.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// baseFiles are what a static Go binary needs around it: the users (so
// tools show "nonroot", and os/user works), a writable /tmp, the non-root
// user's home and the CA bundle for TLS to anything outside the cluster.
// There is no shell and no other program.
func baseFiles() ([]file, error) {
	ca, err := caBundlePEM()
	if err != nil {
		return nil, err
	}
	nr := nonRootUID
	return []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nr))},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nr, nr))},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: strings.TrimPrefix(caBundle, "/"), mode: 0o644, data: ca},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: nr, gid: nr},
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "usr", dir: true, mode: 0o755},
		{name: "usr/local", dir: true, mode: 0o755},
		{name: "usr/local/bin", dir: true, mode: 0o755},
	}, nil
}

// caBundlePEM is the Mozilla NSS root store as the Go project publishes it
// (golang.org/x/crypto/x509roots/fallback/bundle), pinned by go.sum, so the
// bundle changes only when the module is updated and never with the build
// machine. Roots that NSS trusts only with a distrust-after date are left
// out: a PEM file cannot carry that constraint.
func caBundlePEM() ([]byte, error) {
	var buf bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the CA bundle module holds no unconstrained roots")
	}
	return buf.Bytes(), nil
}

// An Executable is a file of an image's binary layer, in binDir.
type Executable struct {
	Name string
	Data []byte
}

// Image assembles the single-platform image of one binary: the shared base
// layer and a layer holding only the executables (the binary, the
// entrypoint, first; for a lean build the full build beside it), run as the
// non-root user.
func Image(binary string, exes []Executable, p Platform, m Metadata) (v1.Image, error) {
	if len(exes) == 0 || exes[0].Name != binary {
		return nil, fmt.Errorf("the first executable of the %s image must be %s", binary, binary)
	}
	files, err := baseFiles()
	if err != nil {
		return nil, err
	}
	base, err := layer(files)
	if err != nil {
		return nil, err
	}
	var binFiles []file
	for _, e := range exes {
		binFiles = append(binFiles, file{name: strings.TrimPrefix(path.Join(binDir, e.Name), "/"), mode: 0o755, data: e.Data})
	}
	bin, err := layer(binFiles)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "hack/images: users, CA bundle, /tmp", Comment: "CA bundle: Mozilla NSS roots from golang.org/x/crypto/x509roots/fallback"}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "hack/images: " + path.Join(binDir, binary)}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	pl := p.v1()
	cf.OS, cf.Architecture, cf.Variant = pl.OS, pl.Architecture, pl.Variant
	cf.Created = created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRootUID, nonRootUID),
		Entrypoint: []string{path.Join(binDir, binary)},
		Env:        []string{"PATH=" + binDir},
		WorkingDir: "/",
		Labels:     m.labels(binary),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, m.labels(binary)).(v1.Image), nil
}

// Index is the multi-platform index of one binary's images, in the order
// of platforms.
func Index(binary string, images []v1.Image, platforms []Platform, m Metadata) (v1.ImageIndex, error) {
	if len(images) != len(platforms) {
		return nil, fmt.Errorf("%d images for %d platforms", len(images), len(platforms))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		pl := platforms[i].v1()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	return mutate.Annotations(idx, m.labels(binary)).(v1.ImageIndex), nil
}
