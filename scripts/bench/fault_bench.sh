#!/usr/bin/env bash
# Wall-clock cost of 0%, 5% and 20% injected faults for a 300k-row
# `cairn job run` on Garage through the fault proxy (figures go in
# docs/benchmarks.md). Extra arguments are more cairn binaries to compare in
# the same run (e.g. a build of an older commit).
#   scripts/bench/fault_bench.sh [OTHER_CAIRN_BINARY...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-cli -p cairn-bench --bin cairn --bin fault_bench
target/release/fault_bench "$PWD/target/release/cairn" "$@"
