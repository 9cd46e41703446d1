// Command sbom writes an SPDX 2.3 SBOM (JSON) of Go binaries from the build
// information the Go toolchain embeds in them (what `go version -m` prints):
// one package per binary, with its SHA-256 and its build settings, and one
// package per Go module linked into it (the main module, every dependency,
// and the standard library as "stdlib" at the toolchain's version), which the
// binary CONTAINS. make release writes one per plugin archive and one per
// image and platform (docs/releasing.md); make test-release checks each
// against `go version -m` of its binaries.
//
//	go run . --out=FILE --name=NAME --version=vX.Y.Z --created=EPOCH BINARY...
//
// The document is reproducible: its created time is the commit's
// (SOURCE_DATE_EPOCH) and its namespace is derived from the name, the version
// and the binaries' digests.
//
// It is its own Go module (run with GOWORK=off) so the SPDX library's
// dependencies never reach the product's modules.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

func main() {
	var o Options
	var epoch string
	flag.StringVar(&o.Out, "out", "", "the SBOM file to write (required)")
	flag.StringVar(&o.Name, "name", "", "the document's name, e.g. kubectl-nodehealth_0.1.0_linux_amd64 (required)")
	flag.StringVar(&o.Version, "version", "", "the release's version, the binaries' versionInfo (required)")
	flag.StringVar(&o.Namespace, "namespace", "https://github.com/nodehealth/nodehealth/spdx", "the document namespace's prefix (the name, version and a digest follow)")
	flag.StringVar(&o.Supplier, "supplier", "nodehealth", "the organization that supplies the binaries")
	flag.StringVar(&epoch, "created", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds of the document's created time (default $SOURCE_DATE_EPOCH)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: sbom --out=FILE --name=NAME --version=V [--created=EPOCH] BINARY...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.Binaries = flag.Args()
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
		os.Exit(1)
	}
	if o.Out == "" || o.Name == "" || o.Version == "" || len(o.Binaries) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		fail(fmt.Errorf("--created (or SOURCE_DATE_EPOCH) %q: %w", epoch, err))
	}
	o.Created = time.Unix(secs, 0).UTC()
	doc, err := Document(o)
	if err != nil {
		fail(err)
	}
	f, err := os.Create(o.Out)
	if err != nil {
		fail(err)
	}
	if err := spdxjson.Write(doc, f, spdxjson.Indent("  ")); err != nil {
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
}

// Options say what the SBOM describes.
type Options struct {
	Out       string
	Name      string
	Version   string
	Namespace string
	Supplier  string
	Created   time.Time
	Binaries  []string
}

// Document reads the build information of o.Binaries and returns their SBOM.
func Document(o Options) (*spdx.Document, error) {
	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   o.Name,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{
				{CreatorType: "Organization", Creator: o.Supplier},
				{CreatorType: "Tool", Creator: "nodehealth-hack-sbom"},
			},
			Created: o.Created.Format(time.RFC3339),
		},
	}
	modules := map[string]*spdx.Package{} // by SPDX ID
	sum := sha256.New()
	for _, path := range o.Binaries {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: no Go build information: %w", path, err)
		}
		digest := sha256.Sum256(data)
		sum.Write(digest[:])
		file := filepath.Base(path)
		bin := &spdx.Package{
			PackageName:             file,
			PackageSPDXIdentifier:   common.ElementID("Binary-" + spdxID(file)),
			PackageVersion:          o.Version,
			PackageFileName:         file,
			PackageSupplier:         &common.Supplier{SupplierType: "Organization", Supplier: o.Supplier},
			PackageDownloadLocation: "NOASSERTION",
			PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: hex.EncodeToString(digest[:])}},
			PackageLicenseConcluded: "NOASSERTION",
			PackageLicenseDeclared:  "Apache-2.0",
			PackageCopyrightText:    "NOASSERTION",
			PrimaryPackagePurpose:   "APPLICATION",
			PackageComment:          "go build " + info.Path + ": " + buildSettings(info),
		}
		doc.Packages = append(doc.Packages, bin)
		doc.Relationships = append(doc.Relationships, relate("DOCUMENT", bin.PackageSPDXIdentifier, common.TypeRelationshipDescribe))
		mods := []*debug.Module{&info.Main}
		mods = append(mods, info.Deps...)
		mods = append(mods, &debug.Module{Path: "stdlib", Version: info.GoVersion})
		for _, m := range mods {
			p := modulePackage(m)
			if _, ok := modules[string(p.PackageSPDXIdentifier)]; !ok {
				modules[string(p.PackageSPDXIdentifier)] = p
			}
			doc.Relationships = append(doc.Relationships, relate(bin.PackageSPDXIdentifier, p.PackageSPDXIdentifier, common.TypeRelationshipContains))
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	doc.DocumentNamespace = fmt.Sprintf("%s/%s-%s-%x", strings.TrimSuffix(o.Namespace, "/"), o.Name, o.Version, sum.Sum(nil)[:8])
	return doc, nil
}

// modulePackage is the SPDX package of a Go module: named by its module path
// and versioned as the build information says ("(devel)" for the modules of
// the workspace the release is built from), with its go.sum hash and a purl.
// A replaced module keeps its path; the replacement is in the comment.
func modulePackage(m *debug.Module) *spdx.Package {
	version, hash := m.Version, m.Sum
	comment := ""
	if m.Replace != nil {
		comment = "replaced by " + m.Replace.Path + " " + m.Replace.Version
		version, hash = m.Replace.Version, m.Replace.Sum
	}
	if version == "(devel)" {
		comment = strings.TrimSpace(comment + " built from the release's source tree (go.work)")
	}
	if hash != "" {
		comment = strings.TrimSpace(comment + " go.sum " + hash)
	}
	p := &spdx.Package{
		PackageName:             m.Path,
		PackageSPDXIdentifier:   common.ElementID(moduleID(m.Path, version)),
		PackageVersion:          version,
		PackageDownloadLocation: "NOASSERTION",
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  "NOASSERTION",
		PackageCopyrightText:    "NOASSERTION",
		PrimaryPackagePurpose:   "LIBRARY",
		PackageComment:          comment,
	}
	purl := "pkg:golang/" + m.Path
	if m.Path == "stdlib" {
		purl = "pkg:golang/stdlib"
	}
	if version != "" && version != "(devel)" {
		purl += "@" + version
	}
	p.PackageExternalReferences = []*spdx.PackageExternalReference{{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: purl}}
	return p
}

// buildSettings are the build settings of the build information
// (-tags, -ldflags, CGO_ENABLED, GOOS, GOARCH, ...), space-separated.
func buildSettings(info *debug.BuildInfo) string {
	var s []string
	for _, b := range info.Settings {
		s = append(s, b.Key+"="+strconv.Quote(b.Value))
	}
	return strings.Join(s, " ")
}

func relate(a, b common.ElementID, kind string) *spdx.Relationship {
	return &spdx.Relationship{
		RefA:         common.MakeDocElementID("", string(a)),
		RefB:         common.MakeDocElementID("", string(b)),
		Relationship: kind,
	}
}

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes s a valid SPDX element ID suffix (letters, digits, '.', '-').
func spdxID(s string) string { return notIDChars.ReplaceAllString(s, "-") }

// moduleID is the SPDX ID of module path at version: readable, and unique
// by a digest of both (two paths may differ only in characters spdxID drops).
func moduleID(path, version string) string {
	h := sha256.Sum256([]byte(path + "@" + version))
	return "Module-" + spdxID(path+"-"+version) + "-" + hex.EncodeToString(h[:4])
}
