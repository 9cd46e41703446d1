#!/usr/bin/env bash
# seeds-to-find.sh: proof that the simulator searches. For each mutant in
# hack/simulate/mutants (a patch that reverts one fix of the guards), build
# pkg/nodehealth with it in a scratch worktree of HEAD and run the simulation
# with seeds 1, 2, 3, ... until one fails; print how many seeds that took.
# The regression seeds are not used: only -sim.seed=N, one at a time.
#
#   hack/simulate/seeds-to-find.sh [MAX_SEEDS [MUTANT_GLOB]]   (defaults 40, *)
#
# SIM=updater does the same for the update operator's simulation
# (pkg/updater/operator, TestUpdaterSimulation) with the mutants in
# hack/simulate/mutants/updater, each reverting one fix of issue 21.
#
# Prints a Markdown table (docs/reliability.md keeps the last one) and the
# total number of simulated schedules. SKIP_SEEDS (space-separated) lists
# seeds that fail without any mutant (open findings, docs/reliability.md):
# they prove nothing about a mutant and are not run.
# SIM_FLAGS adds flags to every run (e.g. -sim.workers=1: a mutant only
# several workers reach must not be found then).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
max=${1:-40}
only=${2:-*}
root=$PWD
case "${SIM:-controller}" in
controller) pkg=pkg/nodehealth test=TestSimulation mutants=$root/hack/simulate/mutants ticks=300 ;;
updater) pkg=pkg/updater/operator test=TestUpdaterSimulation mutants=$root/hack/simulate/mutants/updater ticks=900 ;;
*) echo "SIM=$SIM: want controller or updater" >&2; exit 2 ;;
esac
scratch=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$scratch" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach --quiet "$scratch" HEAD

total=0
echo "| mutant (the fix it reverts) | seeds to find | what failed |"
echo "|---|---|---|"
for patch in "$mutants"/$only.patch; do
	name=$(basename "$patch" .patch)
	git -C "$scratch" checkout --quiet -- .
	git -C "$scratch" apply "$patch"
	# A patch that applies where its context moved may no longer build
	# (make verify checks that it applies): say so and go on with the rest.
	if ! build=$(cd "$scratch" && go test -c -o "$scratch/nh.test" "./$pkg/" 2>&1); then
		echo "| \`$name\` | does not build | $(grep -m1 "\.go:" <<<"$build" | sed 's/|/\\|/g' | cut -c1-160) |"
		continue
	fi
	found="not found in $max"
	what=""
	for seed in $(seq 1 "$max"); do
		case " ${SKIP_SEEDS:-} " in *" $seed "*) continue ;; esac
		total=$((total + 1))
		if ! out=$(cd "$scratch/$pkg" && "$scratch/nh.test" -test.run "^$test\$" -test.timeout 10m -sim.seeds=0 -sim.seed="$seed" ${SIM_FLAGS:-} 2>&1); then
			found=$seed
			# The first difference, else the first failure the test
			# reported (a check of the canary's verdict, say): a grep that
			# finds nothing must not end the script (set -e, pipefail).
			what=""
			if [ "$test" = TestSimulation ]; then
				what=$(grep -m1 -A1 'differ\|invariant' <<<"$out" | tail -1 | sed 's/^ *//; s/|/\\|/g' | cut -c1-160 || true)
			fi
			if [ -z "$what" ]; then
				what=$(grep -m1 -E '_test.go:[0-9]+: ' <<<"$out" | sed 's/^ *[a-z_]*_test.go:[0-9]*: //; s/|/\\|/g' | cut -c1-160 || true)
			fi
			break
		fi
	done
	echo "| \`$name\` | $found | $what |"
done
echo
echo "$total simulated schedules of $ticks s each."
