#!/usr/bin/env bash
# Where one `ls` of a 2,000-key directory on Garage spends its time against
# the bare OpenDAL list (benches/src/bin/ls_bench.rs); prints a Markdown table.
#   scripts/bench/ls_bench.sh        (BENCH_LS_KEYS, ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-bench --bin ls_bench
out=target/ls_bench.jsonl
target/release/ls_bench >"$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
bare = rows[0]["median_ms"]
print("| variant | keys | median ms | / bare list |")
print("|---|---:|---:|---:|")
for r in rows:
    print(f"| {r['variant']} | {r['keys']} | {r['median_ms']:.2f} | {r['median_ms'] / bare:.2f}x |")
PY
