#!/usr/bin/env bash
# Lists a prefix of BENCH_KEYS keys (default 100,000) on Garage with cairn's
# find (a sorted Vec), cairn's find_stream, glob_stream and walk, and a bare
# OpenDAL lister, each in its own process (peak memory is its own), and
# prints a Markdown table.
#   scripts/bench/list_bench.sh        (BENCH_KEYS, BENCH_ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-bench --bin list_bench
out="target/list_bench.jsonl"; : >"$out"
echo "filling $(target/release/list_bench fill)" >&2
# Garage is still settling 100,000 fresh keys for a while: whichever mode
# ran first was measured slower.
sleep 20
for _ in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for mode in opendal find_stream walk glob_stream find; do target/release/list_bench "$mode" >>"$out"; done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| tool | keys | keys/s (median) | peak RSS MiB (median) |")
print("|---|---:|---:|---:|")
for mode in ["find", "find_stream", "glob_stream", "walk", "opendal"]:
    runs = [r for r in rows if r["mode"] == mode]
    print(f"| {mode} | {runs[0]['keys']} | {statistics.median(r['keys_per_s'] for r in runs):.0f} | "
          f"{statistics.median(r['peak_rss_mib'] for r in runs):.1f} |")
PY
