#!/usr/bin/env bash
# Builds the Alertmanager the alerts gate's integration tests run on loopback
# (test/controlplane/alertmanager pins it) into _output/bin/alertmanager.
#
# Alertmanager's module, as the Go module proxy serves it, lacks its web
# UI's build output (ui/app/dist, which its Makefile builds with npm and
# ui/web.go embeds), so "go build" of its command fails on the embed. The
# script copies the module out of the module cache, adds an empty
# ui/app/dist (the tests use the API only) and builds the unchanged command
# against the copy through a temporary go.mod with a replace directive; the
# committed go.mod stays plain. Like the control plane, it rebuilds only
# when a pin or this script changes, and keeps the binary in the machine's
# cache (hack/lib.sh, NODEHEALTH_CACHE_DIR). FORCE=1 rebuilds anyway.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

root=$NODEHEALTH_ROOT
mod="$root/test/controlplane/alertmanager"
bin="${OUTPUT_BIN:-$root/_output/bin}"
stamp_file="$bin/.alertmanager-stamp"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)

if [[ "${FORCE:-0}" != 1 && -x "$bin/alertmanager" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
  echo "alertmanager in $bin is up to date"
  exit 0
fi
mkdir -p "$bin"
rm -f "$stamp_file"
start=$(date +%s)

export GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod"
cache_key=$(nodehealth::bincache::key alertmanager "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}")
if [[ "${FORCE:-0}" != 1 ]] && nodehealth::bincache::restore "$cache_key" "$bin" alertmanager; then
  echo "$stamp" > "$stamp_file"
  echo "alertmanager copied from $NODEHEALTH_CACHE_DIR/bin/$cache_key into $bin"
  exit 0
fi

version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/prometheus/alertmanager)
(cd "$mod" && go mod download github.com/prometheus/alertmanager)
src=$(cd "$mod" && go list -m -f '{{.Dir}}' github.com/prometheus/alertmanager)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -R "$src" "$work/alertmanager"
chmod -R u+w "$work/alertmanager"
for ui in elm mantine; do
  mkdir -p "$work/alertmanager/ui/app/dist/$ui"
  echo "the web UI is not built in this binary; the API is at /api/v2" > "$work/alertmanager/ui/app/dist/$ui/index.html"
done
mkdir -p "$work/mod"
cp "$mod/go.mod" "$mod/go.sum" "$work/mod/"
echo "replace github.com/prometheus/alertmanager => $work/alertmanager" >> "$work/mod/go.mod"

echo "building alertmanager $version..."
pkg=github.com/prometheus/common/version
(cd "$mod" && go build -modfile "$work/mod/go.mod" -ldflags "-s -w -X $pkg.Version=${version#v}" \
  -o "$bin/alertmanager" github.com/prometheus/alertmanager/cmd/alertmanager)

nodehealth::bincache::save "$cache_key" "$bin" alertmanager
echo "$stamp" > "$stamp_file"
echo "alertmanager built in $(( $(date +%s) - start ))s into $bin"
