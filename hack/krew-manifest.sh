#!/usr/bin/env bash
# Writes the krew manifest of a release to stdout: deploy/krew/nodehealth.yaml
# with VERSION and every SHA256_<OS>_<ARCH> replaced, the sha256 taken from
# the plugin archives in DIR. Fails when an archive is missing or a
# placeholder is left.
#   hack/krew-manifest.sh 0.1.0 _output/release/v0.1.0 > nodehealth.yaml
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 VERSION DIR" >&2; exit 2; }
version=${1#v} dir=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
manifest=$(sed -e "s/VERSION/${version}/g" "$root/deploy/krew/nodehealth.yaml" | sed '/^#/d')
for platform in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64; do
  ext=tar.gz
  [[ $platform == windows_* ]] && ext=zip
  archive="$dir/kubectl-nodehealth_${version}_${platform}.${ext}"
  [[ -f $archive ]] || { echo "$0: missing $archive" >&2; exit 1; }
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  placeholder="SHA256_$(tr '[:lower:]' '[:upper:]' <<<"$platform")"
  manifest=${manifest//$placeholder/$sum}
done
if grep -nE 'VERSION|SHA256_' <<<"$manifest" >&2; then
  echo "$0: placeholders left (above)" >&2
  exit 1
fi
printf '%s\n' "$manifest"
