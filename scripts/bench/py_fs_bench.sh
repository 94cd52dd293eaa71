#!/usr/bin/env bash
# From Python on Garage, same run, BENCH_ROUNDS rounds (default 3), Markdown
# tables of medians (figures go in docs/benchmarks.md):
#  1. fsspec: cairn's CairnFileSystem vs s3fs vs obstore's fsspec adapter
#     (py_fs_bench.py);
#  2. pyarrow: Parquet reads and writes through pyarrow's own S3FileSystem,
#     cairn's (build_checkpoint_filesystem), obstore and s3fs
#     (py_arrow_bench.py, BENCH_FILES files of about 51 MB);
#  3. Ray Data: a read -> map -> write job through each of the four
#     (BENCH_RAY_FILES files, 20 by default: about 1 GB).
# Builds the release wheel once, installs it and obstore/s3fs where missing.
#   scripts/bench/py_fs_bench.sh   (BENCH_PARTS="fsspec arrow ray", BENCH_SMALL_COUNT,
#                                   BENCH_LARGE_MIB, BENCH_ROUNDS, BENCH_FILES)
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
parts="${BENCH_PARTS:-fsspec arrow ray}"
rounds="${BENCH_ROUNDS:-3}"
. scripts/bench/on_garage.sh
for venv in venv ray-venv; do
  "$tools/$venv/bin/pip" show obstore >/dev/null 2>&1 || "$tools/$venv/bin/pip" install -q obstore==0.12.1
  "$tools/$venv/bin/pip" show s3fs >/dev/null 2>&1 || "$tools/$venv/bin/pip" install -q s3fs==2026.9.0
done
rm -rf target/wheels-release
"$tools/venv/bin/maturin" build -q --release -m crates/cairn-py/Cargo.toml \
  --interpreter "$tools/venv/bin/python" -o target/wheels-release
for venv in venv ray-venv; do
  "$tools/$venv/bin/pip" install -q --force-reinstall --no-deps target/wheels-release/cairn-*.whl
done

if [[ " $parts " == *" fsspec "* ]]; then
  out="target/py_fs_bench.jsonl"; : >"$out"
  for _ in $(seq 1 "$rounds"); do
    for tool in cairn s3fs obstore; do
      "$tools/venv/bin/python" scripts/bench/py_fs_bench.py "$tool" >>"$out"
    done
  done
  python3 scripts/bench/table.py "$out" cairn,s3fs,obstore
fi
# py_arrow_bench.py's dataset written once, then each filesystem in turn,
# $rounds rounds, with the virtualenv $1, into target/$2.jsonl.
four_filesystems() {
  local out="target/$2.jsonl"; : >"$out"
  "$tools/venv/bin/python" scripts/bench/py_arrow_bench.py prepare
  for _ in $(seq 1 "$rounds"); do
    for tool in cairn pyarrow obstore s3fs; do
      "$tools/$1/bin/python" scripts/bench/py_arrow_bench.py "$tool" >>"$out"
    done
  done
  echo; python3 scripts/bench/table.py "$out" cairn,pyarrow,obstore,s3fs
}
if [[ " $parts " == *" arrow "* ]]; then
  BENCH_PREFIX="bench-arrow-$$" four_filesystems venv py_arrow_bench
fi
if [[ " $parts " == *" ray "* ]]; then
  BENCH_PREFIX="bench-ray-$$" BENCH_FILES="${BENCH_RAY_FILES:-20}" BENCH_RAY=1 RAY_ADDRESS=local \
    four_filesystems ray-venv py_ray_bench
fi
