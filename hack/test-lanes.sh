#!/usr/bin/env bash
# Runs make test's two lanes side by side (make test, after the
# prerequisites both share are built):
#
#   - the integration lane, make test-integration: the integration packages
#     (and with E2E=1 the real-node e2e tests), each against control planes
#     of its own. Its tests mostly wait on those control planes and on their
#     own timers, leaving the cores idle for minutes;
#   - the unit lane, make TARGETS...: the race-detector run, the
#     simulations, fuzzing, the chart, images and release, all CPU-bound.
#     It runs under nice: it takes the cores the integration lane leaves
#     idle and yields them whenever an integration test needs them, so that
#     those tests, whose deadlines assume a machine they share only with
#     each other, see the machine they saw when they ran alone.
#
#   hack/test-lanes.sh TARGETS...
#
# Every line of a lane begins with its name ("unit| ", "integration| ").
# Each target of the unit lane runs as a make of its own, and says the CPU
# seconds it used (nodehealth::cpu), as does the integration lane: the
# lanes' wall times overlap, their CPU seconds add up. The unit lane stops at
# its first failing target, as one make of all of them would. Both lanes run
# to their end, and the script fails when either failed, saying which. MAKE
# (set by make) runs the lanes; the make command line's variables (E2E=1,
# TEST_FLAGS, ...) reach them through MAKEFLAGS.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if (($# == 0)); then
  echo "usage: $0 TARGETS... (the unit lane's make targets)" >&2
  exit 2
fi
make=${MAKE:-make}

# lane NAME COMMAND...: COMMAND's output, each line led by NAME; the status
# is COMMAND's (pipefail).
lane() {
  local name=$1
  shift
  "$@" 2>&1 | sed -u "s/^/$name| /"
}

# timed NAME COMMAND...: lane NAME COMMAND..., then the lane's own wall time.
timed() {
  local name=$1 status
  lane "$@"
  status=$?
  echo "$name| lane finished in $(($(date +%s) - start))s (status $status)"
  return "$status"
}

# unit_lane TARGETS...: one make per target under nice, each followed by
# its CPU seconds, up to the first that fails.
unit_lane() {
  local target
  for target in "$@"; do
    nodehealth::cpu "make $target" nice -n 10 "$make" --no-print-directory "$target" || return
  done
}

start=$(date +%s)
timed integration nodehealth::cpu "make test-integration" "$make" --no-print-directory test-integration &
integration_pid=$!
timed unit unit_lane "$@"
unit=$?
wait "$integration_pid"
integration=$?

failed=()
((unit == 0)) || failed+=("unit (make $*)")
((integration == 0)) || failed+=("integration (make test-integration)")
if ((${#failed[@]} > 0)); then
  printf 'make test: the %s lane failed; its lines above say where\n' "${failed[@]}" >&2
  exit 1
fi
