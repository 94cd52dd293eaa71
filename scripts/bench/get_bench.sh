#!/usr/bin/env bash
# Downloads from Garage: `cairn get -r` of 1,000 files of 1 KiB and `cairn
# get` of one 256 MiB file (wall time of the command, process start
# included), against s3fs's `get` of the same (in-process time), and
# optionally against another cairn binary (a build from before a change).
#   scripts/bench/get_bench.sh [OTHER_CAIRN]      BENCH_ROUNDS=3 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-cli
python="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}/venv/bin/python"
export AWS_ENDPOINT_URL="$BENCH_ENDPOINT" AWS_ACCESS_KEY_ID="$BENCH_KEY" \
       AWS_SECRET_ACCESS_KEY="$BENCH_SECRET" AWS_REGION="$BENCH_REGION"
work=$(mktemp -d)
trap 'rm -rf "$work"; scripts/servers.sh stop >/dev/null' EXIT
base="s3://$BENCH_BUCKET/get-bench-$$"
mkdir "$work/src"
for i in $(seq 1 1000); do head -c 1024 /dev/urandom >"$work/src/f$i"; done
head -c 268435456 /dev/urandom >"$work/large.bin"
target/release/cairn put -r "$work/src" "$base/small" >/dev/null
target/release/cairn put "$work/large.bin" "$base/large.bin" >/dev/null
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for bin in target/release/cairn ${1:-}; do
    rm -rf "$work/dst" "$work/large.out"
    /usr/bin/time -o "$work/t" -f %e "$bin" get -r "$base/small" "$work/dst" >/dev/null
    small=$(cat "$work/t")
    /usr/bin/time -o "$work/t" -f %e "$bin" get "$base/large.bin" "$work/large.out" >/dev/null
    cmp -s "$work/large.out" "$work/large.bin"
    echo "{\"tool\": \"$bin\", \"get_r_1000_small_s\": $small, \"get_256mib_s\": $(cat "$work/t")}"
  done
  rm -rf "$work/s3fs"
  "$python" - "$BENCH_BUCKET" "get-bench-$$" "$work" <<'PY'
import json, os, sys, time
import s3fs
bucket, prefix, work = sys.argv[1:]
fs = s3fs.S3FileSystem(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                       endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                       client_kwargs={"region_name": os.environ["AWS_REGION"]})
t = time.monotonic(); fs.get(f"{bucket}/{prefix}/small", f"{work}/s3fs", recursive=True); small = time.monotonic() - t
t = time.monotonic(); fs.get(f"{bucket}/{prefix}/large.bin", f"{work}/s3fs-large.bin"); large = time.monotonic() - t
assert len(os.listdir(f"{work}/s3fs")) == 1000
print(json.dumps({"tool": "s3fs (in-process)", "get_r_1000_small_s": round(small, 2), "get_256mib_s": round(large, 2)}))
PY
done
target/release/cairn rm -r "$base" >/dev/null
