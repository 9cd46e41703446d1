// Command images builds nodehealth's container images without a container
// runtime: for each binary and platform it builds the static binary
// (CGO_ENABLED=0, -trimpath, the version stamped with -ldflags -X), puts it
// on a minimal base (non-root user 65532, CA bundle, no shell) and writes, per
// binary, an OCI image layout holding the multi-platform index, plus a
// docker-style tarball of one platform for `kind load image-archive` and
// `ctr images import`. Run by `make images`; docs/images.md says how to push
// and load the results.
//
// Everything that goes into an image is fixed by the sources: file times are
// the Unix epoch, the created time is the commit's (SOURCE_DATE_EPOCH), and
// the CA bundle comes from a pinned Go module, so two builds of one commit
// give the same digests.
//
// It is its own Go module (run with GOWORK=off) so go-containerregistry's
// dependencies never reach the product's modules.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	var (
		o          Options
		binaries   = flag.String("binaries", strings.Join(DefaultBinaries, ","), "comma-separated binaries of --cmd-dir to build images of")
		platforms  = flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch of the image index")
		tarballs   = flag.String("tarballs", "linux/amd64", "comma-separated platforms to also write as docker-style tarballs (empty: none)")
		epoch      = flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds of the images' created time (default $SOURCE_DATE_EPOCH; the Makefile passes the commit's time)")
		printNames = flag.Bool("print-names", false, "print the image names the flags give and exit")
	)
	flag.StringVar(&o.RepoRoot, "repo-root", "../..", "the nodehealth repository's root")
	flag.StringVar(&o.OutDir, "out", "", "output folder (default <repo-root>/_output/images)")
	flag.StringVar(&o.Registry, "registry", "ghcr.io", "registry (and path) before nodehealth/<binary>, e.g. registry.example.com/platform; the project's is ghcr.io; empty: nodehealth/<binary>, a Docker Hub name, for images that are loaded, never pulled")
	flag.StringVar(&o.CmdDir, "cmd-dir", "./cmd", "folder of the binaries' main packages, relative to --repo-root")
	flag.StringVar(&o.Tag, "tag", "", "image tag (default: --version)")
	flag.StringVar(&o.Meta.Version, "version", "v0.0.0-dev", "version stamped into the binaries and the images' labels")
	flag.StringVar(&o.Meta.Revision, "revision", "unknown", "git commit stamped into the binaries and the images' labels")
	flag.StringVar(&o.Meta.Source, "source", "https://github.com/nodehealth/nodehealth", "org.opencontainers.image.source")
	flag.StringVar(&o.GoFlags.Tags, "tags", "grpcnotrace", "go build -tags")
	flag.StringVar(&o.GoFlags.LDFlags, "ldflags", "-s -w", "go build -ldflags, before the version's -X flags")
	flag.Parse()

	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
	o.Binaries = splitList(*binaries)
	for _, s := range splitList(*platforms) {
		p, err := ParsePlatform(s)
		if err != nil {
			fail(err)
		}
		o.Platforms = append(o.Platforms, p)
	}
	for _, s := range splitList(*tarballs) {
		p, err := ParsePlatform(s)
		if err != nil {
			fail(err)
		}
		o.Tarballs = append(o.Tarballs, p)
	}
	if *epoch == "" {
		fail(fmt.Errorf("no created time: set --source-date-epoch or SOURCE_DATE_EPOCH (e.g. $(git log -1 --format=%%ct)) so two builds agree"))
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		fail(fmt.Errorf("--source-date-epoch %q: %w", *epoch, err))
	}
	o.Meta.Created = time.Unix(secs, 0).UTC()
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.RepoRoot, "_output", "images")
	}
	if *printNames {
		for _, b := range o.Binaries {
			fmt.Println(o.Name(b))
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	built, err := Build(ctx, o, os.Stderr)
	if err != nil {
		fail(err)
	}
	for _, b := range built {
		fmt.Printf("%s@%s\t%s\n", b.Name, b.Digest, b.Layout)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
