#!/usr/bin/env bash
# The scale run of docs/benchmarks.md: BENCH_ROWS rows (100M) in BENCH_FILES
# (200) Parquet files, one `cairn job run` with a checkpoint, SIGKILLed once
# 60% of the rows are committed, then run again to the end. Exactly once is
# checked by pyarrow, independently of cairn: input and output each hold
# BENCH_ROWS rows with BENCH_ROWS distinct uids from 0 to BENCH_ROWS - 1. Prints wall time, peak RSS and (on S3) the storage
# requests of each run, and the sizes.
#   scripts/bench/scale_run.sh                  on local disk (BENCH_DIR,
#                                               default target/scale-run)
#   BENCH_STORE=s3 scripts/bench/scale_run.sh   on the test Garage
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${BENCH_ROWS:-100000000}
files=${BENCH_FILES:-200}
scripts/tools.sh >/dev/null
python="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}/venv/bin/python"
cargo build --release -q -p cairn-cli
cairn=target/release/cairn
work=$(mktemp -d)
if [ "${BENCH_STORE:-local}" = s3 ]; then
  . scripts/bench/on_garage.sh
  export AWS_ENDPOINT_URL="$BENCH_ENDPOINT" AWS_ACCESS_KEY_ID="$BENCH_KEY" \
         AWS_SECRET_ACCESS_KEY="$BENCH_SECRET" AWS_REGION="$BENCH_REGION"
  base="s3://$BENCH_BUCKET/scale-run-$$"
  trap 'rm -rf "$work"; "$cairn" rm -r "$base" >/dev/null 2>&1 || true; scripts/servers.sh stop >/dev/null' EXIT
else
  base="${BENCH_DIR:-$PWD/target/scale-run}"
  rm -rf "$base"
  trap 'rm -rf "$work" "$base"' EXIT
fi
echo "generating $rows rows in $files files under $base" >&2
started=$(date +%s.%N)
"$cairn" job sample "$base/in" --rows "$rows" --files "$files" --row-group-rows 100000 >/dev/null
printf '{"sample_seconds": %.1f}\n' "$(echo "$(date +%s.%N) - $started" | bc)"

run() {  # run NAME: cairn job run under GNU time; its JSON summary in $work/NAME.json
  /usr/bin/time -f '%e %M' -o "$work/$1.time" "$cairn" job run --input "$base/in" \
    --output "$base/out" --checkpoint "$base/ckpt" --id-column uid --quiet --json \
    >"$work/$1.json" 2>"$work/$1.err"
}

# Run 1, killed with SIGKILL once 60% of the rows are committed.
run first &
timer=$!
target=$((rows * 6 / 10))
while :; do
  sleep 0.2
  done_ids=$("$cairn" ckpt status "$base/ckpt" --json 2>/dev/null \
    | "$python" -c 'import json,sys; print(json.load(sys.stdin)["committed_ids"])' 2>/dev/null || echo 0)
  if [ "$done_ids" -ge "$target" ]; then
    # The cairn process itself (not GNU time, whose arguments name it too).
    pkill -KILL -f "^$cairn job run --input $base/in" || true
    break
  fi
  kill -0 "$timer" 2>/dev/null || { echo "run 1 ended before 60%" >&2; cat "$work/first.err" >&2; exit 1; }
done
wait "$timer" || true
killed_at=$("$cairn" ckpt status "$base/ckpt" --json \
  | "$python" -c 'import json,sys; print(json.load(sys.stdin)["committed_ids"])') \
  || { echo "run 1 finished before it could be killed: raise BENCH_ROWS" >&2; exit 1; }
# GNU time says "Command terminated by signal 9" first, then the figures.
read -r first_s first_kb < <(tail -n 1 "$work/first.time")
echo "{\"first_run_killed_after_s\": ${first_s:-null}, \"first_run_peak_rss_mib\": $(( ${first_kb:-0} / 1024 )), \"committed_at_kill\": $killed_at}"

# Run 2, to the end.
run second
read -r second_s second_kb < <(tail -n 1 "$work/second.time")
echo "{\"resume_s\": $second_s, \"resume_peak_rss_mib\": $((second_kb / 1024))}"
echo "{\"resume_summary\": $(cat "$work/second.json")}"

# The oracle: pyarrow, not cairn.
"$python" - "$base" "$rows" <<'PY'
import json, os, sys
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
base, rows = sys.argv[1], int(sys.argv[2])
if base.startswith("s3://"):
    fs = pafs.S3FileSystem(endpoint_override=os.environ["AWS_ENDPOINT_URL"],
                           access_key=os.environ["AWS_ACCESS_KEY_ID"],
                           secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                           region=os.environ["AWS_REGION"], scheme="http")
    root = base[len("s3://"):]
else:
    fs, root = pafs.LocalFileSystem(), os.path.abspath(base)
def facts(part):
    # rows, distinct uids, min, max: `rows` distinct values in [0, rows) are
    # exactly 0..rows-1, so equal facts on both sides mean equal sets.
    uid = ds.dataset(f"{root}/{part}", filesystem=fs, format="parquet").to_table(columns=["uid"]).column("uid")
    return [len(uid), pc.count_distinct(uid).as_py(), pc.min(uid).as_py(), pc.max(uid).as_py()]
def size(part):
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/{part}", recursive=True))
    return sum(i.size for i in infos if i.type == pafs.FileType.File)
expected = [rows, rows, 0, rows - 1]
inp, out = facts("in"), facts("out")
ok = inp == expected and out == expected
print(json.dumps({"exactly_once": ok, "input": inp, "output": out,
                  "input_mib": round(size("in") / 2**20), "output_mib": round(size("out") / 2**20)}))
sys.exit(0 if ok else 1)
PY
