// Command e2e-registry serves image layouts from go-containerregistry's
// in-memory registry on loopback, for the real-node e2e tests (test/e2e),
// which install the chart from it by digest through a containerd mirror
// entry. It pushes each layout's index under the name given, reads the
// digest back from the registry (what a client pulling by that digest gets)
// and writes the pinned names to --digests, then serves until interrupted,
// logging every request ("GET /v2/<name>/manifests/<digest>?ns=ghcr.io"
// for a pull through a mirror of ghcr.io) after the line Ready.
//
// It lives in hack/images' module because go-containerregistry never
// enters the product's go.mod (docs/development.md, "Modules"), and the e2e
// tests are the product module's: they run it as a process that
// hack/realnode-prereqs.sh builds into _output/bin.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Ready is the line logged once every image is pushed: the requests logged
// after it are the clients'.
const Ready = "e2e-registry: ready"

// images collects the repeated --image flags.
type images []image

type image struct {
	layout string
	// repo is the repository and tag, without the registry (nodehealth/x:v1).
	repo string
}

func (s *images) String() string { return fmt.Sprint(*s) }

func (s *images) Set(v string) error {
	dir, repo, ok := strings.Cut(v, "=")
	if !ok || dir == "" || repo == "" {
		return fmt.Errorf("want LAYOUT=REPOSITORY:TAG, got %q", v)
	}
	if _, err := name.NewTag(repo); err != nil {
		return fmt.Errorf("%q: %w", repo, err)
	}
	*s = append(*s, image{layout: dir, repo: repo})
	return nil
}

func main() {
	var imgs images
	addr := flag.String("addr", "127.0.0.1:0", "address to serve on (loopback: the registry has no authentication)")
	digests := flag.String("digests", "", "file to write REPOSITORY:TAG@DIGEST of each pushed image to, one a line, once all are pushed")
	flag.Var(&imgs, "image", "LAYOUT=REPOSITORY:TAG: push the one index of the OCI layout LAYOUT (hack/images' output) as REPOSITORY:TAG; repeatable")
	flag.Parse()
	if len(imgs) == 0 || *digests == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: e2e-registry --digests FILE --image LAYOUT=REPOSITORY:TAG [--image ...] [--addr 127.0.0.1:PORT]")
		os.Exit(2)
	}
	if err := run(*addr, *digests, imgs); err != nil {
		fmt.Fprintf(os.Stderr, "e2e-registry: %v\n", err)
		os.Exit(1)
	}
}

func run(addr, digests string, imgs images) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	srv := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	host := l.Addr().String()
	logger.Printf("e2e-registry: serving on %s", host)

	var lines []string
	for _, im := range imgs {
		pinned, err := push(host, im)
		if err != nil {
			return err
		}
		logger.Printf("e2e-registry: pushed %s", pinned)
		lines = append(lines, pinned)
	}
	// Written whole, then renamed: a reader never sees part of it.
	tmp := digests + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, digests); err != nil {
		return err
	}
	logger.Print(Ready)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// push writes the layout's index as host/im.repo and returns
// im.repo@<digest> with the digest the registry answers for the tag, after
// checking it is the layout's.
func push(host string, im image) (string, error) {
	l, err := layout.ImageIndexFromPath(im.layout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", im.layout, err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		return "", fmt.Errorf("%s: %w", im.layout, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return "", fmt.Errorf("%s: want one image index in the layout (hack/images' output), found %d entries", im.layout, len(m.Manifests))
	}
	idx, err := l.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return "", fmt.Errorf("%s: %w", im.layout, err)
	}
	ref, err := name.NewTag(host+"/"+im.repo, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		return "", fmt.Errorf("pushing %s: %w", filepath.Base(im.layout), err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		return "", fmt.Errorf("reading back %s: %w", ref, err)
	}
	if desc.Digest != m.Manifests[0].Digest {
		return "", fmt.Errorf("the registry holds %s as %s, the layout %s", ref, desc.Digest, m.Manifests[0].Digest)
	}
	return im.repo + "@" + desc.Digest.String(), nil
}
