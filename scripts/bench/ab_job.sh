#!/usr/bin/env bash
# A/B of two cairn builds on the same job: `cairn job run` with a checkpoint
# and the Python identity transform (--map-cmd) over 1M sample rows, the two
# builds alternating, ROUNDS runs each; prints each build's median and min.
#   scripts/bench/ab_job.sh OLD_CAIRN NEW_CAIRN [WHERE]
#   WHERE: a local directory (default: a temporary one) or an s3:// URL
#   (AWS_* variables set, e.g. for the test Garage); ROUNDS (default 10).
set -euo pipefail
old=$1 new=$2 where=${3:-$(mktemp -d /tmp/cairn-ab-XXXX)}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
transform="$tools/venv/bin/python $(cd "$(dirname "$0")" && pwd)/identity_transform.py"
input="$where/in"
sample=$(mktemp -d /tmp/cairn-ab-in-XXXX)
"$new" job sample "$sample" --rows 1000000 --files 20 >/dev/null
"$new" cp -r "$sample" "$input" >/dev/null
rm -rf "$sample"
results=$(mktemp)
for i in $(seq 1 "${ROUNDS:-10}"); do
  for build in old new; do
    bin=${!build}
    start=$(date +%s.%N)
    "$bin" job run --input "$input" --output "$where/out-$build-$i" --quiet --mode append \
      --checkpoint "$where/ckpt-$build-$i" --id-column uid --map-cmd "$transform" \
      >/dev/null 2>>"$results.log" || { cat "$results.log" >&2; exit 1; }
    echo "$build $(echo "$(date +%s.%N) - $start" | bc)" >>"$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    build, seconds = line.split()
    runs.setdefault(build, []).append(float(seconds))
for build in ("old", "new"):
    t = runs[build]
    print(f"{build}: median {statistics.median(t):.3f} s, min {min(t):.3f} s over {len(t)} runs")
PY
rm -f "$results" "$results.log"
case $where in /tmp/cairn-ab-*) rm -rf "$where" ;; esac
