#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: writes what a release publishes into
# $RELEASE_OUT (default _output/release/<version>), without Docker and without
# downloads beyond Go modules (docs/releasing.md):
#   kubectl-nodehealth_<v>_<os>_<arch>.tar.gz (.zip for Windows), each with the
#     plugin built for that platform and LICENSE, for every PLUGIN_PLATFORMS;
#   nodehealth.yaml: the krew manifest with their sha256 (all five platforms only);
#   nodehealth-<v>.tgz: the packaged Helm chart, appVersion = VERSION (the image tag);
#   RELEASE-NOTES.md: the CHANGELOG.md section of the version;
#   SHA256SUMS of all of them.
# The container images are `make images TAG=$VERSION` (docs/images.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

: "${VERSION:?VERSION=vX.Y.Z is required}"
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "VERSION $VERSION is not vMAJOR.MINOR.PATCH[-PRE]" >&2; exit 1; }
semver=${VERSION#v}
out=${RELEASE_OUT:-_output/release/$VERSION}
platforms=${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}
changelog=${CHANGELOG:-CHANGELOG.md}
org=${RELEASE_ORG:-nodehealth}
helm=${HELM:-_output/tools/bin/helm}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
ldflags="-s -w -X nodehealth.io/nodehealth/pkg/version.gitVersion=$VERSION -X nodehealth.io/nodehealth/pkg/version.gitCommit=$(git rev-parse HEAD) -X nodehealth.io/nodehealth/pkg/version.buildDate=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"

# The release notes first: a version without its CHANGELOG section is not
# released.
notes=$(awk -v v="$semver" '
  $0 ~ "^## \\[" { if (found) exit; if (index($0, "## [" v "]") == 1) { found = 1; next } }
  found { print }' "$changelog")
if [[ -z ${notes//[$'\n ']/} ]]; then
  echo "$changelog has no section \"## [$semver]\": move the Unreleased entries under it first" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out"
printf '# nodehealth %s\n%s\n' "$VERSION" "$notes" > "$out/RELEASE-NOTES.md"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for platform in $platforms; do
  os=${platform%/*} arch=${platform#*/}
  dir="$work/${os}_${arch}"
  mkdir -p "$dir"
  exe=kubectl-nodehealth
  [[ $os == windows ]] && exe=kubectl-nodehealth.exe
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="$ldflags" -o "$dir/$exe" ./cmd/kubectl-nodehealth
  cp LICENSE "$dir/"
  touch -d "@$epoch" "$dir/$exe" "$dir/LICENSE"
  name="kubectl-nodehealth_${semver}_${os}_${arch}"
  if [[ $os == windows ]]; then
    (cd "$dir" && zip -q -X "$NODEHEALTH_ROOT/$out/$name.zip" "$exe" LICENSE)
  else
    # Reproducible: fixed order, owner and times.
    tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$exe" LICENSE | gzip -n > "$out/$name.tar.gz"
  fi
done
if [[ $(wc -w <<<"$platforms") -eq 5 ]]; then
  hack/krew-manifest.sh "$VERSION" "$org" "$out" > "$out/nodehealth.yaml"
fi

"$helm" package deploy/charts/nodehealth --version "$semver" --app-version "$VERSION" --destination "$out" >/dev/null

(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $VERSION in $out:"
ls -1 "$out"
