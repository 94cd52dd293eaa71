#!/usr/bin/env bash
# Benchmarks cairn's FileSystem against s3fs and bare OpenDAL on Garage, in one
# run, and prints a Markdown table with ratios (figures go in docs/benchmarks.md).
#   scripts/bench/fs_bench.sh        (BENCH_SMALL_COUNT, BENCH_LARGE_MIB, BENCH_CONCURRENCY, BENCH_ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
CAIRN_TOOLS="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-bench --bin fs_bench
out="target/fs_bench.jsonl"; : >"$out"
for _ in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for tool in cairn opendal; do target/release/fs_bench "$tool" >>"$out"; done
  "$CAIRN_TOOLS/venv/bin/python" scripts/bench/s3fs_bench.py >>"$out"
done
python3 scripts/bench/table.py "$out"
