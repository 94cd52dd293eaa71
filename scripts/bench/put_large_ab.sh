#!/usr/bin/env bash
# The large put and get alone, cairn and the bare operator alternating
# (ROUNDS each, default 5), on Garage: fs_bench with only 10 small objects,
# so the large transfers are not measured right after 2,000 small ones.
#   scripts/bench/put_large_ab.sh      (ROUNDS, BENCH_LARGE_MIB)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-bench --bin fs_bench
out=target/put_large_ab.jsonl; : >"$out"
for _ in $(seq 1 "${ROUNDS:-5}"); do
  for tool in cairn opendal; do BENCH_SMALL_COUNT=10 target/release/fs_bench "$tool" >>"$out"; done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["op"] in ("put_large", "get_large"):
        runs.setdefault((r["op"], r["tool"]), []).append(r["mib_per_s"])
print("| operation | cairn MiB/s | bare OpenDAL MiB/s | cairn / bare |")
print("|---|---:|---:|---:|")
for op in ("put_large", "get_large"):
    c, b = statistics.median(runs[(op, "cairn")]), statistics.median(runs[(op, "opendal")])
    print(f"| {op} | {c:.1f} | {b:.1f} | {c / b:.2f}x |")
PY
