#!/usr/bin/env bash
# ID-set benchmark: build time, peak memory and membership throughput for
# 10M and 100M IDs (random u64, sequential i64, 32-byte strings), one process
# per case; then the load path: the same counts of integer IDs written as
# committed ID files of 100,000 IDs on local disk and read back by
# load_committed (time and peak RSS of the whole load, decoding included).
# Prints two Markdown tables (figures go in docs/benchmarks.md).
#   scripts/bench/idset_bench.sh [COUNTS...]   (default: 10000000 100000000)
#   BENCH_DIR=/path   where the ID files go (default: target/idset_bench_files)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p cairn-bench --bin idset_bench
counts=("${@:-10000000 100000000}")
dir=${BENCH_DIR:-target/idset_bench_files}
out=target/idset_bench.jsonl; : >"$out"
loads=target/idset_bench_load.jsonl; : >"$loads"
for count in ${counts[*]}; do
  for kind in random-u64 sequential-i64 strings-32; do
    target/release/idset_bench "$kind" "$count" | tee -a "$out"
  done
  for kind in random-u64 sequential-i64; do
    rm -rf "$dir"
    target/release/idset_bench write-files "$kind" "$count" "$dir"
    target/release/idset_bench load-files "$kind" "$count" "$dir" | tee -a "$loads"
  done
done
rm -rf "$dir"
python3 - "$out" "$loads" <<'PY'
import json, sys
print("| IDs | kind | build s | peak RSS MiB | set MiB | set bytes/ID | membership M/s |")
print("|---:|---|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['ids']:,} | {r['kind']} | {r['build_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {r['set_mib']:.1f} | {r['set_bytes_per_id']:.3f} | {r['membership_per_s']/1e6:.2f} |")
print()
print("| IDs | kind | ID files | load s | peak RSS MiB | set MiB |")
print("|---:|---|---:|---:|---:|---:|")
for line in open(sys.argv[2]):
    r = json.loads(line)
    print(f"| {r['ids']:,} | {r['kind']} | {r['files']:,} | {r['load_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {r['set_mib']:.1f} |")
PY
