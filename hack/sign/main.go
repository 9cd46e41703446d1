// Command sign checks a release's images end to end: it pushes the image
// layouts of a release folder (hack/release.sh's images/) into a registry it
// serves on loopback, signs each index digest with a key it generates, as
// `cosign sign --key` would, and checks that every digest verifies with that
// key, and that none verifies with another key, nor any unsigned digest (the
// indexes' per-platform images, which are not signed). make test-release runs
// it.
//
//	go run . --release-dir=_output/release/vX.Y.Z
//
// With --hold it then keeps the registry up and writes the public key to
// --public-key, so cosign itself can be pointed at the signed images.
package main

import (
	"bufio"
	"crypto"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

func main() {
	dir := flag.String("release-dir", "", "the release folder (make release's _output/release/<version>) whose images/ to push, sign and verify")
	hold := flag.Bool("hold", false, "after the checks, keep serving the registry until interrupted")
	pubKey := flag.String("public-key", "", "write the signing key's public key (PEM, as cosign.pub) to this file")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: sign --release-dir=DIR [--public-key=FILE] [--hold]")
		os.Exit(2)
	}
	if err := run(*dir, *pubKey, *hold, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sign:", err)
		os.Exit(1)
	}
}

type image struct {
	name   string // the name the release gives it, ghcr.io/nodehealth/<binary>:<version>
	local  name.Digest
	layout string
}

func run(dir, pubKey string, hold bool, out io.Writer) error {
	images, err := readDigests(dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go func() { _ = srv.Serve(ln) }() // returns when Close closes it
	defer srv.Close()
	host := ln.Addr().String()

	var children []name.Digest
	for i := range images {
		im := &images[i]
		c, err := push(im, host)
		if err != nil {
			return err
		}
		children = append(children, c...)
		fmt.Fprintf(out, "pushed %s to %s\n", im.name, im.local)
	}

	key, _, err := signature.NewECDSASignerVerifier(elliptic.P256(), rand.Reader, crypto.SHA256)
	if err != nil {
		return err
	}
	other, _, err := signature.NewECDSASignerVerifier(elliptic.P256(), rand.Reader, crypto.SHA256)
	if err != nil {
		return err
	}
	for _, im := range images {
		if err := signDigest(im.local, key); err != nil {
			return err
		}
	}
	for _, im := range images {
		if err := verifyDigest(im.local, key); err != nil {
			return fmt.Errorf("%s, signed, does not verify: %w", im.name, err)
		}
		if err := verifyDigest(im.local, other); err == nil {
			return fmt.Errorf("%s verified with a key that did not sign it", im.name)
		}
	}
	fmt.Fprintf(out, "signed %d image indexes; each verifies with the signing key and not with another key\n", len(images))
	for _, d := range children {
		if err := verifyDigest(d, key); err == nil {
			return fmt.Errorf("%s, never signed, verified", d)
		}
	}
	fmt.Fprintf(out, "%d unsigned per-platform images fail verification\n", len(children))

	if pubKey != "" {
		pub, err := key.PublicKey()
		if err != nil {
			return err
		}
		pem, err := cryptoutils.MarshalPublicKeyToPEM(pub)
		if err != nil {
			return err
		}
		if err := os.WriteFile(pubKey, pem, 0o644); err != nil {
			return err
		}
	}
	if hold {
		fmt.Fprintf(out, "serving the registry at %s until interrupted, e.g.\n", host)
		// cosign 3 reads the .sig tag only when told to.
		fmt.Fprintf(out, "  cosign verify --key=%s --insecure-ignore-tlog=true --allow-insecure-registry %s\n", pubKey, images[0].local)
		fmt.Fprintln(out, "  (cosign 3: add --new-bundle-format=false)")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
	}
	return nil
}

// readDigests reads images/digests.txt: <name>@<index digest> per image,
// the image's layout in images/<binary>.
func readDigests(dir string) ([]image, error) {
	f, err := os.Open(filepath.Join(dir, "images", "digests.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var images []image
	s := bufio.NewScanner(f)
	for s.Scan() {
		ref, digest, ok := strings.Cut(s.Text(), "@")
		if !ok {
			return nil, fmt.Errorf("digests.txt: %q is not <name>@<digest>", s.Text())
		}
		tag, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("digests.txt: %w", err)
		}
		d, err := name.NewDigest(tag.Context().Name()+"@"+digest, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("digests.txt: %w", err)
		}
		repo := tag.RepositoryStr()
		images = append(images, image{
			name:   ref,
			local:  d, // its registry replaced in push
			layout: filepath.Join(dir, "images", repo[strings.LastIndex(repo, "/")+1:]),
		})
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, errors.New("digests.txt names no image")
	}
	return images, nil
}

// push writes the one index of im's layout as <host>/<repository>:<tag> (what
// `crane push` does), checks that the registry holds it under the digest
// digests.txt gives, and returns the digests of the images the index names.
func push(im *image, host string) ([]name.Digest, error) {
	l, err := layout.ImageIndexFromPath(im.layout)
	if err != nil {
		return nil, err
	}
	m, err := l.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: the layout holds %d manifests, want one index", im.layout, len(m.Manifests))
	}
	idx, err := l.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(im.name)
	if err != nil {
		return nil, err
	}
	local, err := name.NewTag(host + "/" + tag.RepositoryStr() + ":" + tag.TagStr())
	if err != nil {
		return nil, err
	}
	if err := remote.WriteIndex(local, idx); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", local, err)
	}
	desc, err := remote.Head(local)
	if err != nil {
		return nil, err
	}
	if desc.Digest.String() != im.local.DigestStr() {
		return nil, fmt.Errorf("the registry holds %s as %s, digests.txt says %s", local, desc.Digest, im.local.DigestStr())
	}
	im.local = local.Digest(desc.Digest.String())
	platforms, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var children []name.Digest
	for _, c := range platforms.Manifests {
		children = append(children, local.Digest(c.Digest.String()))
	}
	return children, nil
}
