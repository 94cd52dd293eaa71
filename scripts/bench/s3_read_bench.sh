#!/usr/bin/env bash
# A checkpointed `cairn job run` reading Parquet from Garage and writing to
# it, with two cairn binaries in one run (the argument: a binary built
# before a change; default: this tree's release build only), BENCH_ROUNDS
# rounds each; prints a Markdown table of wall times.
#   scripts/bench/s3_read_bench.sh [/path/to/older/cairn]
#   (BENCH_ROWS=2000000, BENCH_FILES=20, BENCH_ROW_GROUP_ROWS=10000, BENCH_ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
before="${1:-}"
. scripts/bench/on_garage.sh
cargo build --release -q -p cairn-cli
export AWS_ACCESS_KEY_ID="$CAIRN_TEST_GARAGE_KEY" AWS_SECRET_ACCESS_KEY="$CAIRN_TEST_GARAGE_SECRET" \
       AWS_REGION="$CAIRN_TEST_GARAGE_REGION" AWS_ENDPOINT_URL="$CAIRN_TEST_GARAGE_ENDPOINT" CAIRN_LOG=error
base="s3://$CAIRN_TEST_GARAGE_BUCKET/bench/s3-read-$$"
rows="${BENCH_ROWS:-2000000}"
now=target/release/cairn
"$now" job sample "$base/in" --rows "$rows" --files "${BENCH_FILES:-20}" \
  --row-group-rows "${BENCH_ROW_GROUP_ROWS:-10000}" >/dev/null
tools=("now:$now")
[ -n "$before" ] && tools+=("before:$before")
out=target/s3_read_bench.tsv; : >"$out"
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for entry in "${tools[@]}"; do
    name="${entry%%:*}"; bin="${entry#*:}"
    start=$(date +%s.%N)
    "$bin" job run --input "$base/in" --output "$base/out-$name-$round" \
      --checkpoint "$base/ckpt-$name-$round" --id-column uid >/dev/null 2>&1
    end=$(date +%s.%N)
    printf '%s\t%s\n' "$name" "$(echo "$end - $start" | bc)" >>"$out"
  done
done
"$now" rm -r "$base" >/dev/null
python3 - "$out" "$rows" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
print(f"| binary | rows | wall s (median of {len(rows)//len({r[0] for r in rows})}) | rows/s |")
print("|---|---:|---:|---:|")
for name in dict.fromkeys(r[0] for r in rows):
    t = statistics.median(float(r[1]) for r in rows if r[0] == name)
    print(f"| {name} | {sys.argv[2]} | {t:.2f} | {int(sys.argv[2])/t:,.0f} |")
PY
