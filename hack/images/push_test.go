package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// What `crane push <layout> <name>` does (load the layout's one index, write
// it) lands the built index in a registry under the same digest, and a
// linux/amd64 client resolves it to the linux/amd64 image.
func TestPushedLayoutKeepsItsDigest(t *testing.T) {
	b := amd64Build(t)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()

	l, err := layout.ImageIndexFromPath(b.Layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		t.Fatalf("crane push needs one index in the layout, found %+v", m.Manifests)
	}
	idx, err := l.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/platform/nodehealth/" + testBinary + ":v1.2.3-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != b.Digest {
		t.Errorf("the registry holds %s, make images printed %s", desc.Digest, b.Digest)
	}
	img, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.Config.User != "65532:65532" {
		t.Errorf("pulled linux/amd64 image: %s, user %q", cf.Architecture, cf.Config.User)
	}
}
