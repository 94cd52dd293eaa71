#!/usr/bin/env bash
# A/B of two cairn builds on the same job: `cairn job run` with a checkpoint
# and the Python identity transform (--map-cmd) over 1M sample rows, the two
# builds alternating, ROUNDS runs each; prints each build's median and min
# wall time and its median CPU time (user + system, the transform included).
#   scripts/bench/ab_job.sh OLD_CAIRN NEW_CAIRN [WHERE]
#   WHERE: a local directory (default: a temporary one) or an s3:// URL
#   (AWS_* variables set, e.g. for the test Garage); ROUNDS (default 10);
#   ROWS (default 1000000); TRANSFORM=0 runs without the Python transform.
set -euo pipefail
old=$1 new=$2 where=${3:-$(mktemp -d /tmp/cairn-ab-XXXX)}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
transform="$tools/venv/bin/python $(cd "$(dirname "$0")" && pwd)/identity_transform.py"
input="$where/in"
sample=$(mktemp -d /tmp/cairn-ab-in-XXXX)
"$new" job sample "$sample" --rows "${ROWS:-1000000}" --files 20 >/dev/null
"$new" cp -r "$sample" "$input" >/dev/null
rm -rf "$sample"
results=$(mktemp)
for i in $(seq 1 "${ROUNDS:-10}"); do
  for build in old new; do
    bin=${!build}
    map=(--map-cmd "$transform")
    [ "${TRANSFORM:-1}" = 0 ] && map=()
    /usr/bin/time -o "$results.time" -f "%e %U %S" \
      "$bin" job run --input "$input" --output "$where/out-$build-$i" --quiet --mode append \
      --checkpoint "$where/ckpt-$build-$i" --id-column uid "${map[@]}" \
      >/dev/null 2>>"$results.log" || { cat "$results.log" >&2; exit 1; }
    echo "$build $(cat "$results.time")" >>"$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
runs, cpu = {}, {}
for line in open(sys.argv[1]):
    build, wall, user, system = line.split()
    runs.setdefault(build, []).append(float(wall))
    cpu.setdefault(build, []).append(float(user) + float(system))
for build in ("old", "new"):
    t, c = runs[build], cpu[build]
    print(
        f"{build}: median {statistics.median(t):.3f} s, min {min(t):.3f} s, "
        f"median CPU {statistics.median(c):.2f} s over {len(t)} runs"
    )
PY
rm -f "$results" "$results.log" "$results.time"
case $where in /tmp/cairn-ab-*) rm -rf "$where" ;; esac
