#!/usr/bin/env bash
# Wall-clock cost of 0%, 5% and 20% injected faults for a 300k-row
# `cairn job run` on Garage through the fault proxy (figures go in
# docs/benchmarks.md). Extra arguments are more cairn binaries to compare in
# the same run (e.g. a build of an older commit).
#   scripts/bench/fault_bench.sh [OTHER_CAIRN_BINARY...]
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/tools.sh >/dev/null
scripts/servers.sh start >/dev/null
trap 'scripts/servers.sh stop >/dev/null' EXIT
. target/cairn-servers/servers.env
export BENCH_ENDPOINT="$CAIRN_TEST_GARAGE_ENDPOINT" BENCH_KEY="$CAIRN_TEST_GARAGE_KEY" \
       BENCH_SECRET="$CAIRN_TEST_GARAGE_SECRET" BENCH_BUCKET="$CAIRN_TEST_GARAGE_BUCKET"
cargo build --release -q -p cairn-cli -p cairn-bench --bin cairn --bin fault_bench
target/release/fault_bench "$PWD/target/release/cairn" "$@"
