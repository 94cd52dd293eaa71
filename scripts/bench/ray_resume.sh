#!/usr/bin/env bash
# Ray Data 2.60 resume, Ray's default checkpoint manager/filter against
# cairn.ray's, same checkpoint, same run (scripts/bench/ray_resume.py says
# what is measured). Each implementation runs in a process of its own with a
# time limit; one that fails (out of memory, over the limit) is reported with
# how it failed, after how long and at what machine memory. Builds the
# release wheel and installs it into the Ray virtualenv (scripts/test.sh puts
# its dev wheel back there).
#   scripts/bench/ray_resume.sh [IDS] [FILES] [ROOT]
#     IDS    committed IDs (default 10000000)
#     FILES  Ray-layout ID files they are spread over (default 100)
#     ROOT   a local directory (default: a fresh one under target/) or
#            s3://BUCKET/PREFIX on Garage (start scripts/servers.sh and source
#            target/cairn-servers/servers.env first)
#   KINDS="int64-sequential int64-random string32 composite"  IMPLS="ray cairn"
#   LIMIT=3600  seconds per implementation   SKIP_BUILD=1  keep the installed wheel
set -euo pipefail
cd "$(dirname "$0")/../.."
ids=${1:-10000000}
files=${2:-100}
root=${3:-$PWD/target/ray_resume_bench}
kinds=${KINDS:-int64-sequential int64-random string32}
impls=${IMPLS:-ray cairn}
limit=${LIMIT:-3600}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
py="$tools/ray-venv/bin/python"
scripts/bench/release_wheel.sh
results=target/ray_resume.jsonl
: >"$results"

# Machine memory in use (MiB): MemTotal - MemAvailable.
used_mib() { awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{printf "%d", (t-a)/1024}' /proc/meminfo; }

clear_root() {
  case "$root" in
    s3://*) "$py" - "$root" <<'PY'
import sys
sys.path.insert(0, "scripts/bench")
import ray_resume
fs, base, _ = ray_resume.store(sys.argv[1])
fs.delete_dir_contents(base, missing_dir_ok=True)
PY
    ;;
    *) rm -rf "$root" ;;
  esac
}

for kind in $kinds; do
  clear_root
  echo "writing $ids $kind IDs in $files files under $root" >&2
  "$py" scripts/bench/ray_resume.py make "$kind" "$ids" "$files" "$root"
  for impl in $impls; do
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    # The previous run's processes give their memory back first.
    sleep 15
    base=$(used_mib)
    started=$(date +%s)
    timeout --signal=KILL "$limit" "$py" scripts/bench/ray_resume.py measure "$kind" "$ids" "$impl" "$root" \
      >target/ray_resume.one 2>target/ray_resume.err &
    pid=$!
    peak=0
    while kill -0 "$pid" 2>/dev/null; do
      now=$(( $(used_mib) - base ))
      [ "$now" -gt "$peak" ] && peak=$now
      sleep 0.5
    done
    code=0; wait "$pid" || code=$?
    seconds=$(( $(date +%s) - started ))
    if [ "$code" = 0 ] && [ -s target/ray_resume.one ]; then
      # Ray's raylet prints its warnings on the driver's stdout too.
      "$py" -c 'import json,sys; r=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1]); r["machine_peak_mib"]=int(sys.argv[2]); print(json.dumps(r))' \
        target/ray_resume.one "$peak" | tee -a "$results"
    else
      case "$code" in
        137) why="killed (SIGKILL: out of memory, or over the ${limit} s limit)" ;;
        *) why="exit $code: $(grep -E 'Error|error' target/ray_resume.err | tail -1 | cut -c1-200)" ;;
      esac
      printf '{"ids": "%s", "n": %s, "impl": "%s", "failed": "%s", "after_s": %s, "machine_peak_mib": %s}\n' \
        "$kind" "$ids" "$impl" "$why" "$seconds" "$peak" | tee -a "$results"
    fi
  done
done
clear_root
"$py" - "$results" "$files" <<'PY'
import json, sys
print(f"| IDs | kind | files | impl | load s | driver peak MiB | machine peak MiB | object store MiB | private B/ID | resident B/ID | filter M rows/s |")
print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    head = f"| {r['n']:,} | {r['ids']} | {int(sys.argv[2]):,} | {r['impl']} |"
    if "failed" in r:
        print(f"{head} {r['failed']} after {r['after_s']} s | | {r['machine_peak_mib']:,} | | | | |")
        continue
    print(f"{head} {r['load_s']:.2f} | {r['driver_peak_mib']:,} | {r['machine_peak_mib']:,} | "
          f"{r['object_store_mib']:,.1f} | {r['private_bytes_per_id']:.2f} | "
          f"{r['resident_bytes_per_id']:.2f} | {r['filter_rows_per_s']/1e6:.2f} |")
PY
