#!/usr/bin/env bash
# The main job: fail and resume. Makes 4M rows of sample Parquet input,
# starts a checkpointed `cairn job run`, kills it with SIGKILL partway,
# runs the same command again (it skips what was committed), and checks
# that the output holds every input row exactly once.
#
#   scripts/demo.sh                   # in a fresh local temporary directory
#   scripts/demo.sh /abs/dir          # under a local directory
#   scripts/demo.sh s3://bucket/demo  # on S3 (AWS_* variables or -o options
#                                     # in CAIRN_DEMO_OPTIONS, e.g.
#                                     # "-o s3.endpoint_url=http://127.0.0.1:3900")
# CAIRN_DEMO_ROWS (default 4000000) sets the input size; CAIRN_BIN a cairn
# binary to use instead of building one (the docs test passes its own).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${CAIRN_BIN:-}" ]; then
  cairn="$CAIRN_BIN"
else
  # Release, as the README's job command: one build serves both.
  echo "== 0. build cairn: cargo build --release -p cairn-cli"
  echo "   (the first build compiles about 400 crates with optimizations: roughly"
  echo "   10 minutes on 2 cores; later runs reuse it and take seconds)"
  cargo build --release -p cairn-cli
  cairn="$PWD/target/release/cairn"
fi
base="${1:-$(mktemp -d)}"
base="${base%/}"
rows="${CAIRN_DEMO_ROWS:-4000000}"
# shellcheck disable=SC2206
options=(${CAIRN_DEMO_OPTIONS:-})
show() { echo "\$ cairn $*"; "$cairn" "${options[@]}" "$@"; }

job=(job run --input "$base/in" --output "$base/out" --checkpoint "$base/ckpt"
     --id-column uid --commit-every-rows 20000 --workers 2)

echo "== 1. sample input: $rows rows in 20 Parquet files"
show job sample "$base/in" --rows "$rows" --files 20 --row-group-rows 20000

echo
echo "== 2. run the job, and kill -9 it once a quarter of the rows are committed"
echo "\$ cairn ${job[*]} &"
"$cairn" "${options[@]}" "${job[@]}" --quiet &
pid=$!
units_wanted=$(( rows / 20000 / 4 ))
killed=""
while kill -0 "$pid" 2>/dev/null; do
  # Until the run has made its checkpoint, `ckpt status` says there is none
  # (exit 1): that is zero units, not a failure of the demo.
  committed=$( { "$cairn" "${options[@]}" ckpt status "$base/ckpt" --json 2>/dev/null || true; } \
    | sed -n 's/.*"committed_units": *\([0-9]*\).*/\1/p')
  if [ "${committed:-0}" -ge "$units_wanted" ]; then
    kill -9 "$pid"
    echo "killed (SIGKILL) after ${committed} committed units"
    killed=yes
    break
  fi
  sleep 0.02
done
wait "$pid" 2>/dev/null || true
[ -n "$killed" ] || echo "(the job finished before a quarter was seen committed; raise CAIRN_DEMO_ROWS)"
show ckpt status "$base/ckpt" || true

echo
echo "== 3. run the same command again: it resumes"
show "${job[@]}"

echo
echo "== 4. check: every input row exactly once in the output"
show job verify --input "$base/in" --output "$base/out" --id-column uid
echo "done; files under $base"
