#!/usr/bin/env bash
# What counting metrics costs a job: the release build of OLD_REV (before
# metrics; default 118d448) against this tree's, on the same jobs.
#   1. wall and CPU time: `cairn job run` with a checkpoint (and the Python
#      identity transform unless TRANSFORM=0), the builds alternating,
#      ROUNDS runs each (scripts/bench/ab_job.sh), on local disk and Garage;
#   2. instructions: one run of each build under valgrind's callgrind (no
#      transform; 1M rows), which counts instructions whatever else the
#      machine does, on local disk and Garage.
#   scripts/bench/metrics_overhead.sh [OLD_REV]
#   ROUNDS (default 10); ROWS (default 1000000); TRANSFORM=0; AB=0 skips 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
old_rev=${1:-118d448}
work=$(mktemp -d /tmp/cairn-metrics-ab-XXXX)
# (scripts/bench/on_garage.sh sets its own EXIT trap, so the worktree goes
# as soon as the old build is copied out.)
trap 'rm -rf "$work"' EXIT
echo "building cairn at $old_rev and at this tree (release; shared target directory)..."
git worktree add -q --detach "$work/old" "$old_rev"
target="$PWD/target"
(cd "$work/old" && CARGO_TARGET_DIR="$target" cargo build -q --release -p cairn-cli)
cp "$target/release/cairn" "$work/cairn-old"
git worktree remove --force "$work/old"
cargo build -q --release -p cairn-cli
old="$work/cairn-old" new="$target/release/cairn"

# Instructions of one `cairn job run` (valgrind's callgrind; the job's own
# threads, not its children).
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
    | awk '/Collected :/{print $4}'
}
count_both() {
  local where=$1
  "$new" job sample "$where/cg-in" --rows 1000000 --files 10 >/dev/null
  for build in old new; do
    bin=${!build}
    n=$(instructions "$bin" job run --input "$where/cg-in" --output "$where/cg-out-$build" \
      --checkpoint "$where/cg-ckpt-$build" --id-column uid --quiet)
    echo "$build $n"
  done | awk '{n[$1]=$2} END {printf "instructions: old %d, new %d (%+.2f%%)\n", n["old"], n["new"], 100*(n["new"]-n["old"])/n["old"]}'
}

echo "local disk:"
[ "${AB:-1}" = 0 ] || scripts/bench/ab_job.sh "$old" "$new"
count_both "$work"
# shellcheck disable=SC1091
. scripts/bench/on_garage.sh
export AWS_ACCESS_KEY_ID="$BENCH_KEY" AWS_SECRET_ACCESS_KEY="$BENCH_SECRET" \
       AWS_ENDPOINT_URL="$BENCH_ENDPOINT" AWS_REGION="$BENCH_REGION"
echo "Garage:"
[ "${AB:-1}" = 0 ] || scripts/bench/ab_job.sh "$old" "$new" "s3://$BENCH_BUCKET/metrics-ab-$(date +%s)"
count_both "s3://$BENCH_BUCKET/metrics-cg-$(date +%s)"
