#!/usr/bin/env bash
# cairn job run vs Ray Data 2.60, same machine, same input, one run
# (see scripts/bench/job_bench.py). Figures go in docs/benchmarks.md.
#   scripts/bench/job_bench.sh        BENCH_ROWS=1000000 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/tools.sh >/dev/null
cargo build --release -q -p cairn-cli
cargo build --release -q -p cairn-bench --bin arrow_copy
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
export CAIRN_PYTHON="${CAIRN_PYTHON:-$tools/venv/bin/python}"
export CAIRN_RAY_PYTHON="${CAIRN_RAY_PYTHON:-$tools/ray-venv/bin/python}"
exec "$CAIRN_PYTHON" scripts/bench/job_bench.py
