#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: writes what a release publishes into
# $RELEASE_OUT (default _output/release/<version>), without Docker and without
# downloads beyond Go modules (docs/releasing.md):
#   kubectl-nodehealth_<v>_<os>_<arch>.tar.gz (.zip for Windows), each with the
#     plugin built for that platform and LICENSE, for every PLUGIN_PLATFORMS,
#     and kubectl-nodehealth_<v>_<os>_<arch>.spdx.json, the SPDX SBOM of its
#     plugin binary (hack/sbom, from the Go build information);
#   nodehealth.yaml: the krew manifest with their sha256 (all five platforms only);
#   nodehealth-<v>.tgz: the packaged Helm chart, appVersion = VERSION without
#     the v (the chart's images default to v + appVersion: the release's tag),
#     each image it runs pinned by the digest built (when images are built);
#   images/<binary>/: the OCI image layout of each image (hack/images, as
#     make images builds them: IMAGE_PLATFORMS, default linux/amd64,linux/arm64;
#     empty for no images), named REGISTRY/nodehealth/<binary>:VERSION
#     (REGISTRY default ghcr.io, the project's registry);
#     images/digests.txt: <name>@<index digest> per image; and
#     images/<binary>_<v>_<os>_<arch>.spdx.json, the SBOM of each image's
#     binaries per platform;
#   RELEASE-NOTES.md: the CHANGELOG.md section of the version;
#   SHA256SUMS of every file of all of them (the layouts' files included).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

: "${VERSION:?VERSION=vX.Y.Z is required}"
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "VERSION $VERSION is not vMAJOR.MINOR.PATCH[-PRE]" >&2; exit 1; }
semver=${VERSION#v}
out=${RELEASE_OUT:-_output/release/$VERSION}
platforms=${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}
changelog=${CHANGELOG:-CHANGELOG.md}
helm=${HELM:-_output/tools/bin/helm}
image_platforms=${IMAGE_PLATFORMS-linux/amd64,linux/arm64}
image_binaries=${IMAGE_BINARIES:-nodehealth-controller,extension-heartbeat,update-operator,update-agent}
registry=${REGISTRY:-ghcr.io}
source_url=${IMAGE_SOURCE:-https://github.com/nodehealth/nodehealth}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
commit=$(git rev-parse HEAD)
ldflags="-s -w -X nodehealth.io/nodehealth/pkg/version.gitVersion=$VERSION -X nodehealth.io/nodehealth/pkg/version.gitCommit=$commit -X nodehealth.io/nodehealth/pkg/version.buildDate=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"

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
out=$(cd "$out" && pwd) # absolute: the archives are written from other folders
printf '# nodehealth %s\n%s\n' "$VERSION" "$notes" > "$out/RELEASE-NOTES.md"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The SBOM writer, built once (its own module, out of go.work).
(cd hack/sbom && GOWORK=off go build -o "$work/sbom" .)
sbom() { # sbom OUT NAME BINARY...
  "$work/sbom" --out="$1" --name="$2" --version="$VERSION" --created="$epoch" "${@:3}"
}
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
    (cd "$dir" && zip -q -X "$out/$name.zip" "$exe" LICENSE)
  else
    # Reproducible: fixed order, owner and times.
    tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$exe" LICENSE | gzip -n > "$out/$name.tar.gz"
  fi
  sbom "$out/$name.spdx.json" "$name" "$dir/$exe"
done
if [[ $(wc -w <<<"$platforms") -eq 5 ]]; then
  hack/krew-manifest.sh "$VERSION" "$out" > "$out/nodehealth.yaml"
fi

# The images: the layouts as make images writes them (no tarballs), and an
# SBOM per image and platform of the binaries in it (the binary, and for a
# lean build the full build beside it: <binary>-*).
if [[ -n $image_platforms ]]; then
  (cd hack/images && GOWORK=off go run . --repo-root="$NODEHEALTH_ROOT" --out="$work/images" \
    --binaries="$image_binaries" --platforms="$image_platforms" --tarballs= \
    --registry="$registry" --tag="$VERSION" --version="$VERSION" --revision="$commit" \
    --source="$source_url" --source-date-epoch="$epoch" >/dev/null)
  mkdir "$out/images"
  cp "$work/images/digests.txt" "$out/images/"
  for b in ${image_binaries//,/ }; do
    cp -r "$work/images/$b" "$out/images/$b"
    for platform in ${image_platforms//,/ }; do
      os=${platform%/*} arch=${platform#*/}
      name="${b}_${semver}_${os}_${arch}"
      shopt -s nullglob
      sbom "$out/images/$name.spdx.json" "$name" "$work/images/bin/${os}_${arch}/$b" "$work/images/bin/${os}_${arch}/$b"-*
      shopt -u nullglob
    done
  done
fi

# The chart, after the images: it pins each image it runs by the digest just
# built (the digest the workflow signs; a tag can be moved), by setting the
# component's image.digest in a copy of the chart's values. The image is then
# <repository>:<tag>@<digest>: a mirror (image.registry) keeps the digest; a
# release without images keeps the tags only.
cp -r deploy/charts/nodehealth "$work/chart"
if [[ -n $image_platforms ]]; then
  for pair in controller=nodehealth-controller updateOperator=update-operator updateAgent=update-agent; do
    key=${pair%%=*} b=${pair#*=}
    digest=$(sed -n "s|^.*/nodehealth/$b:$VERSION@||p" "$out/images/digests.txt")
    [[ -n $digest ]] || continue # not among IMAGE_BINARIES
    # The top-level key's image.digest: the first `    digest: ""` after
    # `<key>:` and its `  image:`, before the next top-level key.
    awk -v key="$key" -v digest="$digest" '
      /^[^ #]/ { in_key = ($0 == key ":"); in_image = 0 }
      in_key && /^  image:/ { in_image = 1 }
      in_key && in_image && /^    digest: ""$/ { sub(/""/, "\"" digest "\""); done = 1; in_image = 0 }
      { print }
      END { if (!done) { print "release.sh: no " key ".image.digest in the chart values" > "/dev/stderr"; exit 1 } }' \
      "$work/chart/values.yaml" > "$work/values.yaml"
    mv "$work/values.yaml" "$work/chart/values.yaml"
  done
fi
"$helm" package "$work/chart" --version "$semver" --app-version "$semver" --destination "$out" >/dev/null

(cd "$out" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum -- > "$work/SHA256SUMS" && mv "$work/SHA256SUMS" SHA256SUMS)
echo "release $VERSION in $out:"
(cd "$out" && find . -path ./images/\*/\* -prune -o -printf '%P\n' | LC_ALL=C sort | sed '/^$/d')
