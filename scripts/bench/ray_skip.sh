#!/usr/bin/env bash
# A 95%-committed resume with Ray Data 2.60: Ray's reader and default
# checkpoint manager/filter, Ray's reader with cairn.ray's manager/filter,
# and cairn.ray.read_parquet (committed row groups left out of the read),
# same input, same committed units, same run (scripts/bench/ray_skip.py says
# what is measured). Builds the release wheel and installs it into the Ray
# virtualenv (scripts/test.sh puts its dev wheel back there).
#   scripts/bench/ray_skip.sh [ROWS] [FILES] [COMMITTED]
#     ROWS       input rows (default 10000000)
#     FILES      input files, 4 row groups each (default 100)
#     COMMITTED  files whose rows are committed (default 95% of FILES)
#   IMPLS="ray cairn-filter cairn cairn-sharded"  LIMIT=3600 seconds each  SKIP_BUILD=1 keep the wheel
#   ROOT=target/ray_skip_bench
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-10000000}
files=${2:-100}
committed=${3:-$(( files * 95 / 100 ))}
root=${ROOT:-$PWD/target/ray_skip_bench}
impls=${IMPLS:-ray cairn-filter cairn cairn-sharded}
limit=${LIMIT:-3600}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
py="$tools/ray-venv/bin/python"
scripts/bench/release_wheel.sh
results=target/ray_skip.jsonl
: >"$results"
rm -rf "$root"
echo "writing $rows rows in $files files under $root/in, the first $committed committed" >&2
"$py" scripts/bench/ray_skip.py make "$rows" "$files" "$committed" "$root"
for impl in $impls; do
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  sleep 5
  if timeout --signal=KILL "$limit" "$py" scripts/bench/ray_skip.py measure "$impl" "$root" \
      >target/ray_skip.one 2>target/ray_skip.err; then
    grep '^{' target/ray_skip.one | tail -1 | tee -a "$results"
  else
    code=$?
    printf '{"impl": "%s", "failed": "exit %s: %s"}\n' "$impl" "$code" \
      "$(grep -E 'Error|error' target/ray_skip.err | tail -1 | cut -c1-200 | tr '"' "'")" | tee -a "$results"
  fi
done
rm -rf "$root"
"$py" - "$results" "$rows" "$files" "$committed" <<'PY'
import json, sys
rows, files, committed = map(int, sys.argv[2:])
print(f"{rows:,} rows in {files} files, {committed} of them committed ({100 * committed / files:.0f}%):")
print("| reader / manager and filter | job s | rows written | row groups read, MiB | of the input, MiB |")
print("|---|---:|---:|---:|---:|")
names = {"ray": "Ray's / Ray's", "cairn-filter": "Ray's / cairn.ray", "cairn": "cairn.ray / cairn.ray",
         "cairn-sharded": "cairn.ray / cairn.ray, set sharded"}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "failed" in r:
        print(f"| {names[r['impl']]} | {r['failed']} | | | |")
        continue
    print(f"| {names[r['impl']]} | {r['seconds']:.1f} | {r['rows_written']:,} | {r['read_mib']:,.1f} | {r['input_mib']:,.1f} |")
PY
