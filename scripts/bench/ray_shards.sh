#!/usr/bin/env bash
# cairn.ray's committed set sharded over a local multi-node Ray cluster
# against one whole set per filter node, same checkpoint, same run
# (scripts/bench/ray_shards.py says what is measured). Each in a process of
# its own. Builds the release wheel into the Ray virtualenv first.
#   scripts/bench/ray_shards.sh [IDS] [FILES] [BUDGET_MIB]
#     IDS     committed random int64 IDs (default 200000000)
#     FILES   Ray-layout ID files (default 200)
#     BUDGET_MIB  max_filter_memory for the sharded run (default 256)
#   KIND=int64-random (or int64-sequential, string32)  IMPLS="sharded whole"
#   LIMIT=3600  SKIP_BUILD=1  ROOT=target/ray_shards_bench
set -euo pipefail
cd "$(dirname "$0")/../.."
ids=${1:-200000000}
files=${2:-200}
budget=$(( ${3:-256} * 1024 * 1024 ))
root=${ROOT:-$PWD/target/ray_shards_bench}
impls=${IMPLS:-sharded whole}
limit=${LIMIT:-3600}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
py="$tools/ray-venv/bin/python"
scripts/bench/release_wheel.sh
results=target/ray_shards.jsonl
: >"$results"
rm -rf "$root"
export KIND=${KIND:-int64-random}
echo "writing $ids $KIND IDs in $files files under $root" >&2
"$py" scripts/bench/ray_shards.py make "$ids" "$files" "$root"
for impl in $impls; do
  sleep 5
  if timeout --signal=KILL "$limit" "$py" scripts/bench/ray_shards.py measure "$impl" "$ids" "$budget" "$root" \
      >target/ray_shards.one 2>target/ray_shards.err; then
    grep '^{' target/ray_shards.one | tail -1 | tee -a "$results"
  else
    code=$?
    printf '{"impl": "%s", "failed": "exit %s: %s"}\n' "$impl" "$code" \
      "$(grep -E 'Error|error' target/ray_shards.err | tail -1 | cut -c1-200 | tr '"' "'")" | tee -a "$results"
  fi
  # The cluster's processes outlive a killed driver.
  "$tools/ray-venv/bin/ray" stop --force >/dev/null 2>&1 || true
done
rm -rf "$root"
"$py" - "$results" <<'PY'
import json, sys
print("| set | IDs | kind | shards | load s | driver peak MiB | largest shard's set MiB | its actor's growth MiB | filter actor's growth MiB | filter M rows/s | bytes moved per row |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "failed" in r:
        print(f"| {r['impl']} | {r['failed']} | | | | | | | | | |")
        continue
    sharded = "shards" in r
    print(f"| {r['impl']} | {r['n']:,} | {r['ids']} | {r.get('shards', 1)} | {r['load_s']} | {r['driver_peak_mib']:,} | "
          f"{r.get('shard_set_mib', '')} | {r.get('shard_growth_mib', '')} | {r['filter_growth_mib']:,} | "
          f"{r['filter_rows_per_s']/1e6:.2f} | {r.get('moved_bytes_per_row', 0)} |")
PY
