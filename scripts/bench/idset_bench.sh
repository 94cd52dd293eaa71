#!/usr/bin/env bash
# ID-set benchmark: build time, peak memory and membership throughput for
# 10M and 100M IDs (random u64, sequential i64, 32-byte strings), one process
# per case. Prints a Markdown table (figures go in docs/benchmarks.md).
#   scripts/bench/idset_bench.sh [COUNTS...]   (default: 10000000 100000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p cairn-bench --bin idset_bench
counts=("${@:-10000000 100000000}")
out=target/idset_bench.jsonl; : >"$out"
for count in ${counts[*]}; do
  for kind in random-u64 sequential-i64 strings-32; do
    target/release/idset_bench "$kind" "$count" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
print("| IDs | kind | build s | peak RSS MiB | set MiB | set bytes/ID | membership M/s |")
print("|---:|---|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['ids']:,} | {r['kind']} | {r['build_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {r['set_mib']:.1f} | {r['set_bytes_per_id']:.3f} | {r['membership_per_s']/1e6:.2f} |")
PY
