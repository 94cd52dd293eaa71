#!/usr/bin/env bash
# Resume time with 10k committed units on local disk and on Garage: opening
# the checkpoint = lease + recovery of 3 pending units + loading 1M IDs from
# 10k ID files. Prints JSON lines (figures go in docs/benchmarks.md).
#   scripts/bench/resume_bench.sh [UNITS]   (default 10000)
set -euo pipefail
cd "$(dirname "$0")/../.."
units="${1:-10000}"
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-bench --bin resume_bench
local_dir="$(mktemp -d)"
target/release/resume_bench "$local_dir/run" "$units"
rm -rf "$local_dir"
target/release/resume_bench "s3://$CAIRN_TEST_GARAGE_BUCKET/resume-bench-$$" "$units"
