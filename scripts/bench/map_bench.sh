#!/usr/bin/env bash
# Row transforms through the library: JSON-row map vs typed map_rows vs an
# Arrow-kernel with_column, same rows, same Parquet sink (benches/src/bin/map_bench.rs).
#   scripts/bench/map_bench.sh [ROWS]      (default 1000000; BENCH_ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p cairn-bench --bin map_bench
for _ in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  target/release/map_bench "${1:-1000000}"
done
