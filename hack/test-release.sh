#!/usr/bin/env bash
# make test-release: runs hack/release.sh for the host platform into a
# temporary folder, with a test version and changelog, and checks the result
# for real: SHA256SUMS verifies, the archive's plugin prints the release's
# version, the release notes are the version's section, and the packaged
# chart renders with the release's images.
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
VERSION=$version RELEASE_OUT="$tmp/out" PLUGIN_PLATFORMS="$host" CHANGELOG="$tmp/CHANGELOG.md" hack/release.sh

fail() { echo "test-release: $*" >&2; exit 1; }
(cd "$tmp/out" && sha256sum -c SHA256SUMS) || fail "SHA256SUMS does not verify"
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
"${HELM:-_output/tools/bin/helm}" template nodehealth "$chart" --namespace nodehealth-system > "$tmp/render.yaml"
grep -q "image: nodehealth/nodehealth-controller:$version" "$tmp/render.yaml" || fail "the packaged chart does not run the release's controller image"
# The same archive twice: the build is reproducible.
first=$(sha256sum "$archive" | cut -d' ' -f1)
VERSION=$version RELEASE_OUT="$tmp/again" PLUGIN_PLATFORMS="$host" CHANGELOG="$tmp/CHANGELOG.md" hack/release.sh > /dev/null
second=$(sha256sum "$tmp/again/$(basename "$archive")" | cut -d' ' -f1)
[[ $first == "$second" ]] || fail "two builds of one commit differ: $first, $second"
echo "test-release passed"
