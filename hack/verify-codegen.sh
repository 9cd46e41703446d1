#!/usr/bin/env bash
# Fails when a generated file is stale or was edited by hand: regenerates
# everything into a temporary copy of the tree and compares it with an
# untouched copy of the same files.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/want" "$tmp/got"
# Tracked and untracked-but-not-ignored files: what the next commit would hold.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -e "$f" ]] && printf '%s\0' "$f"
done > "$tmp/files"
xargs -0 cp --parents -t "$tmp/want" < "$tmp/files"
xargs -0 cp --parents -t "$tmp/got" < "$tmp/files"

# The copy reuses the tools already built for this tree.
if ! NODEHEALTH_TOOLS_BIN="$NODEHEALTH_TOOLS_BIN" "$tmp/got/hack/update-codegen.sh" > "$tmp/generate.log" 2>&1; then
  echo "hack/update-codegen.sh failed:" >&2
  cat "$tmp/generate.log" >&2
  exit 1
fi

if ! diff -ruN -x _output "$tmp/want" "$tmp/got" > "$tmp/diff"; then
  echo "Generated files are out of date or were edited by hand; run 'make generate'. Difference (- committed, + generated):" >&2
  sed -e "s#$tmp/want/##; s#$tmp/got/##" "$tmp/diff" | head -80 >&2
  exit 1
fi
echo "generated files are up to date"
