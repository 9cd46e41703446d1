package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestPushReturnsTheDigestTheRegistryAnswersForTheLayoutsIndex(t *testing.T) {
	idx, err := random.Index(64, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()

	got, err := push(strings.TrimPrefix(srv.URL, "http://"), image{layout: dir, repo: "nodehealth/x:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got != "nodehealth/x:v1@"+want.String() {
		t.Errorf("push returned %q, want nodehealth/x:v1@%s", got, want)
	}
}

func TestPushRefusesALayoutWithoutOneIndex(t *testing.T) {
	dir := t.TempDir()
	if _, err := layout.Write(dir, empty.Index); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	if _, err := push(strings.TrimPrefix(srv.URL, "http://"), image{layout: dir, repo: "nodehealth/x:v1"}); err == nil || !strings.Contains(err.Error(), "want one image index") {
		t.Errorf("push of an empty layout: %v, want an error naming the missing index", err)
	}
}

func TestTheImageFlagNeedsALayoutAndATaggedName(t *testing.T) {
	var s images
	for _, v := range []string{"", "dir", "=nodehealth/x:v1", "dir=", "dir=Not A Name"} {
		if err := s.Set(v); err == nil {
			t.Errorf("--image %q accepted", v)
		}
	}
	if err := s.Set("dir=nodehealth/x:v1"); err != nil || len(s) != 1 || s[0].layout != "dir" || s[0].repo != "nodehealth/x:v1" {
		t.Errorf("--image dir=nodehealth/x:v1: %v, %+v", err, s)
	}
}
