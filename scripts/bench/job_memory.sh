#!/usr/bin/env bash
# Peak resident memory of checkpointed `cairn job run` on local disk, one
# process per case (GNU time's "Maximum resident set size"):
#   - Parquet, integer IDs (`uid`, a dense range: the duplicate check is a bitmap)
#   - Parquet, string IDs (`text`: the duplicate check is a hash set)
#   - JSON lines in (streamed), integer IDs
#   - a resume of the Parquet/uid job with every unit committed (the
#     committed ID set loaded, every row skipped)
#   scripts/bench/job_memory.sh          BENCH_ROWS=10000000 by default
# Figures go in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS="${BENCH_ROWS:-10000000}"
cargo build --release -q -p cairn-cli
cairn="$PWD/target/release/cairn"
work="$(mktemp -d "${TMPDIR:-/tmp}/cairn-mem-XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$cairn" job sample "$work/in" --rows "$ROWS" --files 20 --row-group-rows 100000 >/dev/null

peak() { # label, then the cairn arguments
  local label="$1"; shift
  local start end
  start=$(date +%s.%N)
  /usr/bin/time -v "$cairn" "$@" --quiet 2>"$work/time.txt" >/dev/null || { cat "$work/time.txt"; exit 1; }
  end=$(date +%s.%N)
  local kib
  kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  printf '| %s | %s | %.1f | %d |\n' "$label" "$ROWS" "$(echo "$end - $start" | bc)" $((kib / 1024))
}

echo "| case | rows | wall s | peak RSS MiB |"
echo "|---|---|---|---|"
peak "Parquet, int64 IDs" job run --input "$work/in" --output "$work/out-uid" \
  --checkpoint "$work/ckpt-uid" --id-column uid --keep-checkpoint
peak "resume, all committed (int64)" job run --input "$work/in" --output "$work/out-uid" \
  --checkpoint "$work/ckpt-uid" --id-column uid --keep-checkpoint
rm -rf "$work/ckpt-uid"
peak "Parquet, string IDs" job run --input "$work/in" --output "$work/out-text" \
  --checkpoint "$work/ckpt-text" --id-column text
rm -rf "$work/out-text"
"$cairn" job run --input "$work/in" --output "$work/json" --output-format json --quiet >/dev/null 2>&1
rm -rf "$work/out-uid"
peak "JSON lines, int64 IDs" job run --input "$work/json" --format json --output "$work/out-json" \
  --checkpoint "$work/ckpt-json" --id-column uid
