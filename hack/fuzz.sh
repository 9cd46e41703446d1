#!/usr/bin/env bash
# Runs every go test fuzz target of the product modules for $FUZZTIME each.
# go test -fuzz takes one package and one target at a time, so targets are found
# by name. The seed corpora (f.Add and testdata/fuzz) also run in plain go test.
# FUZZ_DIRS (space-separated package directories) limits the run to those.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"
fuzztime="${FUZZTIME:-10s}"

found=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
while IFS= read -r file; do
  dir=$(dirname "$file")
  if [[ -n "${FUZZ_DIRS:-}" && " $FUZZ_DIRS " != *" $dir "* ]]; then
    continue
  fi
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    found=1
    echo "--- fuzz $target in ./$dir for $fuzztime"
    # go's fuzzing coordinator sometimes ends a run with "context deadline
    # exceeded" when -fuzztime runs out while a worker is still busy; nothing
    # failed then (a real failure writes its input under testdata/fuzz). Such a
    # run is repeated once, and said so; any other failure fails at once.
    if ! (cd "$dir" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" .) 2>&1 | tee "$out"; then
      if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
        echo "--- fuzz $target: the fuzzing coordinator timed out with no failing input; running it again"
        (cd "$dir" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" .)
      else
        exit 1
      fi
    fi
  done
done < <(git ls-files --cached --others --exclude-standard '*_test.go' | grep -v '^test/controlplane/' | xargs -r grep -l '^func Fuzz' | sort)

if [[ $found == 0 ]]; then
  echo "no fuzz targets found" >&2
  exit 1
fi
