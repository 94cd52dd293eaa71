#!/usr/bin/env bash
# Partitioned output: ROWS rows (`uid`, `text`, `source` of PARTITIONS
# values) written hive-partitioned by `source`, on local disk or on the
# test Garage, three ways in one run:
#   - pyarrow's `write_dataset(partitioning=["source"], partitioning_flavor="hive")`
#     of the same rows (no checkpoint: one file per partition);
#   - `cairn job run --partition-by source` with a checkpoint, default units
#     (100,000 rows), and with 1,000,000-row units (fewer, larger files).
# Each in a process of its own: wall time, peak RSS (GNU time), files
# written, and for cairn the requests per unit (its --json summary).
#   scripts/bench/partition_bench.sh [ROWS] [PARTITIONS] [local|garage]
# Defaults: 10000000 1000 local. Figures go in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS="${1:-10000000}"
PARTITIONS="${2:-1000}"
WHERE="${3:-local}"
cargo build --release -q -p cairn-cli
cairn="$PWD/target/release/cairn"
python="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}/venv/bin/python"
work="$(mktemp -d "${TMPDIR:-/tmp}/cairn-partition-XXXXXX")"
trap 'rm -rf "$work"' EXIT
if [ "$WHERE" = garage ]; then
  # shellcheck disable=SC1091
  . scripts/bench/on_garage.sh
  trap 'rm -rf "$work"; scripts/servers.sh stop >/dev/null' EXIT
  export AWS_ACCESS_KEY_ID="$BENCH_KEY" AWS_SECRET_ACCESS_KEY="$BENCH_SECRET" \
         AWS_ENDPOINT_URL="$BENCH_ENDPOINT" AWS_REGION="$BENCH_REGION"
  root="s3://$BENCH_BUCKET/partition-bench-$(date +%s%N)"
else
  root="$work"
fi
"$cairn" job sample "$root/in" --rows "$ROWS" --files 20 --row-group-rows 100000 \
  --sources "$PARTITIONS" >/dev/null

measure() { # label, files-counting output URL, then the command
  local label="$1" out="$2"; shift 2
  local start end kib
  start=$(date +%s.%N)
  /usr/bin/time -v "$@" 2>"$work/time.txt" >"$work/stdout.txt" || { cat "$work/time.txt"; exit 1; }
  end=$(date +%s.%N)
  kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  local files
  files=$("$cairn" find "$out" | grep -c -v '/\.' || true)
  local per_unit="-"
  if grep -q '"units_committed"' "$work/stdout.txt"; then
    per_unit=$("$python" -c '
import json, sys
s = json.load(open(sys.argv[1]))
units = max(1, s["units_committed"])
req = s.get("requests", {})
total = sum(req.values()) if isinstance(req, dict) else req
print("%d units; %.0f files, %.0f requests per unit" % (s["units_committed"], s["files_written"] / units, total / units))' "$work/stdout.txt")
  fi
  printf '| %s | %s | %s | %.1f | %d | %s | %s |\n' "$label" "$ROWS" "$PARTITIONS" \
    "$(echo "$end - $start" | bc)" $((kib / 1024)) "$files" "$per_unit"
}

echo "| writer ($WHERE) | rows | partitions | wall s | peak RSS MiB | files | units |"
echo "|---|---:|---:|---:|---:|---:|---|"
measure "pyarrow write_dataset" "$root/out-pyarrow" "$python" -c '
import os, sys
import pyarrow.dataset as ds
import pyarrow.fs as pafs
src, dst = sys.argv[1], sys.argv[2]
fs = None
if src.startswith("s3://"):
    fs = pafs.S3FileSystem(access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=os.environ["AWS_ENDPOINT_URL"], region=os.environ["AWS_REGION"],
        scheme="http")
    src, dst = src[5:], dst[5:]
ds.write_dataset(ds.dataset(src, format="parquet", filesystem=fs), dst, filesystem=fs,
    format="parquet", partitioning=["source"], partitioning_flavor="hive")
' "$root/in" "$root/out-pyarrow"
measure "cairn, 100,000-row units" "$root/out-cairn" "$cairn" job run --input "$root/in" \
  --output "$root/out-cairn" --checkpoint "$root/ckpt-cairn" --id-column uid \
  --partition-by source --quiet --json
measure "cairn, 1,000,000-row units" "$root/out-cairn-1m" "$cairn" job run --input "$root/in" \
  --output "$root/out-cairn-1m" --checkpoint "$root/ckpt-cairn-1m" --id-column uid \
  --partition-by source --commit-every-rows 1000000 --quiet --json
