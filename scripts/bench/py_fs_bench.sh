#!/usr/bin/env bash
# From Python on Garage: cairn's fsspec filesystem vs s3fs vs obstore's
# fsspec adapter, same run, BENCH_ROUNDS rounds (default 3), and a Markdown
# table of medians (figures go in docs/benchmarks.md). Builds the release
# wheel into the tools' virtualenv and installs obstore there if missing.
#   scripts/bench/py_fs_bench.sh    (BENCH_SMALL_COUNT, BENCH_LARGE_MIB, BENCH_ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
. scripts/bench/on_garage.sh
"$tools/venv/bin/pip" show obstore >/dev/null 2>&1 || "$tools/venv/bin/pip" install -q obstore==0.12.1
rm -rf target/wheels-release
"$tools/venv/bin/maturin" build -q --release -m crates/cairn-py/Cargo.toml \
  --interpreter "$tools/venv/bin/python" -o target/wheels-release
"$tools/venv/bin/pip" install -q --force-reinstall --no-deps target/wheels-release/cairn-*.whl
out="target/py_fs_bench.jsonl"; : >"$out"
for _ in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for tool in cairn s3fs obstore; do
    "$tools/venv/bin/python" scripts/bench/py_fs_bench.py "$tool" >>"$out"
  done
done
python3 scripts/bench/table.py "$out" cairn,s3fs,obstore
