#!/usr/bin/env bash
# make test-release: runs hack/release.sh for the host platform into a
# temporary folder, with a test version and changelog, and checks the result
# for real: SHA256SUMS verifies, the archive's plugin prints the release's
# version, the release notes are the version's section, the packaged chart
# renders with the release's images, every SBOM lists exactly the modules
# `go version -m` prints for its binaries (the plugin's, and the binaries
# taken out of each image's layer), each image layout holds the index
# digests.txt names, with blobs that match their digests, and the images,
# pushed into a registry on loopback and signed, verify with the signing key
# only (hack/sign). The images are
# built for linux/<host arch> only (make test-images covers both platforms
# and their reproducibility).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=v0.0.0-releasetest
cat > "$tmp/CHANGELOG.md" <<'EOF'
# Changelog
## [Unreleased]
- not in this release
## [0.0.0-releasetest] - 2026-01-01
### Added
- the release test's entry
## [0.0.0-older]
- an older entry
EOF
host="$(go env GOOS)/$(go env GOARCH)"
VERSION=$version RELEASE_OUT="$tmp/out" PLUGIN_PLATFORMS="$host" IMAGE_PLATFORMS="linux/$(go env GOARCH)" \
  CHANGELOG="$tmp/CHANGELOG.md" hack/release.sh

fail() { echo "test-release: $*" >&2; exit 1; }
(cd "$tmp/out" && sha256sum -c --quiet SHA256SUMS) || fail "SHA256SUMS does not verify"
archive="$tmp/out/kubectl-nodehealth_${version#v}_$(go env GOOS)_$(go env GOARCH).tar.gz"
[[ -f $archive ]] || fail "no $archive"
mkdir "$tmp/x"
tar -C "$tmp/x" -xzf "$archive"
[[ -f $tmp/x/LICENSE ]] || fail "the archive has no LICENSE"
got=$("$tmp/x/kubectl-nodehealth" --version)
[[ $got == "kubectl-nodehealth $version "* ]] || fail "--version printed: $got"
grep -q "the release test's entry" "$tmp/out/RELEASE-NOTES.md" || fail "RELEASE-NOTES.md lacks the version's entry"
! grep -q "not in this release\|an older entry" "$tmp/out/RELEASE-NOTES.md" || fail "RELEASE-NOTES.md has other versions' entries"
chart="$tmp/out/nodehealth-${version#v}.tgz"
[[ -f $chart ]] || fail "no $chart"
# Every image the chart can run (the update operator and agent enabled too),
# pinned by the digest the release built and signed: <name>:<tag>@<digest> of
# images/digests.txt.
"${HELM:-_output/tools/bin/helm}" template nodehealth "$chart" --namespace nodehealth-system \
  --set updateOperator.enabled=true --set updateAgent.enabled=true > "$tmp/render.yaml"
for b in nodehealth-controller update-operator update-agent; do
  want=$(grep "^ghcr.io/nodehealth/$b:$version@" "$tmp/out/images/digests.txt") || fail "images/digests.txt has no ghcr.io/nodehealth/$b:$version"
  grep -q "image: $want\$" "$tmp/render.yaml" || fail "the packaged chart does not run the release's image $want"
done
# Lines with a value only: the UpdatePolicy CRD's schema has a property named
# image (a hook's container), a key with no value on its line.
if grep -E '^\s*image:\s*\S' "$tmp/render.yaml" | grep -v -F -f <(sed 's/^/image: /' "$tmp/out/images/digests.txt"); then
  fail "the packaged chart runs other images than those of images/digests.txt, by digest (above)"
fi

# SBOMs. go_modules BINARY: "path version" of the standard library (stdlib)
# and every module of `go version -m` (a replaced module at its replacement's
# version). sbom_modules SBOM SHA256: the same of what the SBOM's binary
# package with that checksum CONTAINS.
go_modules() {
  go version -m "$1" | awk '
    NR == 1 { print "stdlib", $2 }
    $1 == "mod" || $1 == "dep" { if (p != "") print p; p = $2 " " $3 }
    $1 == "=>" { p = substr(p, 1, index(p, " ")) $3 }
    END { if (p != "") print p }' | LC_ALL=C sort
}
sbom_modules() {
  jq -r --arg sum "$2" '
    (.packages | map({key: .SPDXID, value: "\(.name) \(.versionInfo)"}) | from_entries) as $byid
    | [.packages[] | select(.primaryPackagePurpose == "APPLICATION" and any(.checksums[]; .checksumValue == $sum)) | .SPDXID] as $bins
    | if ($bins | length) != 1 then error("no binary package with sha256 \($sum)") else . end
    | .relationships[] | select(.spdxElementId == $bins[0] and .relationshipType == "CONTAINS") | $byid[.relatedSpdxElement]' "$1" | LC_ALL=C sort
}
# check_sbom SBOM BINARY...: the SBOM describes exactly these binaries, each
# with the modules go version -m prints.
check_sbom() {
  [[ $(jq -r .spdxVersion "$1") == SPDX-2.3 ]] || fail "$1 is not an SPDX 2.3 document"
  local n bin
  n=$(jq '[.packages[] | select(.primaryPackagePurpose == "APPLICATION")] | length' "$1")
  [[ $n == $(($# - 1)) ]] || fail "$1 describes $n binaries, want $(($# - 1))"
  for bin in "${@:2}"; do
    [[ $(go_modules "$bin" | wc -l) -gt 10 ]] || fail "go version -m $bin lists too few modules"
    diff <(go_modules "$bin") <(sbom_modules "$1" "$(sha256sum "$bin" | cut -d' ' -f1)") ||
      fail "$1: the modules of $(basename "$bin") differ from go version -m (< go version -m, > SBOM)"
  done
}
check_sbom "${archive%.tar.gz}.spdx.json" "$tmp/x/kubectl-nodehealth"

# Images: the layout holds the index digests.txt names, every blob matches
# its digest, and the SBOM of each image lists the binaries of its last layer.
arch=$(go env GOARCH)
images="$tmp/out/images"
[[ -s $images/digests.txt ]] || fail "no images/digests.txt"
while IFS=@ read -r ref digest; do
  b=${ref%:*} b=${b##*/}
  layout="$images/$b"
  [[ $ref == "ghcr.io/nodehealth/$b:$version" ]] || fail "image $ref is not ghcr.io/nodehealth/$b:$version"
  [[ $(jq -r '.manifests | length' "$layout/index.json") == 1 ]] || fail "$layout/index.json holds more than the image index"
  got=$(jq -r '.manifests[0].digest' "$layout/index.json")
  [[ $got == "$digest" ]] || fail "$layout/index.json names $got, digests.txt $digest"
  (cd "$layout/blobs/sha256" && for f in *; do echo "$f  $f"; done | sha256sum -c --quiet) ||
    fail "$layout: blobs that do not match their digest (above)"
  blob() { echo "$layout/blobs/sha256/${1#sha256:}"; }
  manifest=$(jq -r --arg arch "$arch" '.manifests[] | select(.platform.os == "linux" and .platform.architecture == $arch) | .digest' "$(blob "$digest")")
  [[ -n $manifest ]] || fail "$b: the image index has no linux/$arch image"
  layer=$(jq -r '.layers[-1].digest' "$(blob "$manifest")")
  mkdir -p "$tmp/img/$b"
  tar -C "$tmp/img/$b" -xzf "$(blob "$layer")"
  bins=("$tmp/img/$b"/usr/local/bin/*)
  [[ -x $tmp/img/$b/usr/local/bin/$b ]] || fail "$b: the image's last layer has no /usr/local/bin/$b"
  check_sbom "$images/${b}_${version#v}_linux_${arch}.spdx.json" "${bins[@]}"
done < "$images/digests.txt"
[[ $(wc -l < "$images/digests.txt") == 4 ]] || fail "images/digests.txt names $(wc -l < "$images/digests.txt") images, want 4"

# Signatures, as the release workflow publishes them but with a generated key
# instead of the workflow's identity: hack/sign pushes the layouts into a
# registry on loopback, checks the registry holds the digests of digests.txt,
# signs each index digest in cosign's format, and checks each verifies with
# the key, none with another key, and no unsigned (per-platform) digest.
(cd hack/sign && GOWORK=off go run . --release-dir="$tmp/out") || fail "the images' signatures (hack/sign, above)"

# The same archive and SBOM twice: the build is reproducible (the images'
# reproducibility is make test-images').
first=$(cd "$tmp/out" && sha256sum "$(basename "$archive")" "$(basename "${archive%.tar.gz}").spdx.json")
VERSION=$version RELEASE_OUT="$tmp/again" PLUGIN_PLATFORMS="$host" IMAGE_PLATFORMS= CHANGELOG="$tmp/CHANGELOG.md" hack/release.sh > /dev/null
second=$(cd "$tmp/again" && sha256sum "$(basename "$archive")" "$(basename "${archive%.tar.gz}").spdx.json")
[[ $first == "$second" ]] || fail "two builds of one commit differ: $first, $second"
echo "test-release passed"
