#!/usr/bin/env bash
# A 1:N job (videos -> 0-40 shots each) killed at about half its expensive
# stage and resumed: cairn's one job (composite key, skip_committed, source
# lineage) against the seed's two-job recipe under Ray's default checkpoint
# manager, same input, same run (scripts/bench/explode_resume.py says what is
# measured). Builds the release wheel and installs it into the Ray
# virtualenv (scripts/test.sh puts its dev wheel back there).
#   scripts/bench/explode_resume.sh [SOURCES] [ROOT]
#     SOURCES  videos (default 10000)
#     ROOT     a local directory (default: a fresh one under target/)
#   IMPLS="cairn ray"  DETECT_MS=2  SCORE_MS=0.5  PAYLOAD=4096  SKIP_BUILD=1
set -euo pipefail
cd "$(dirname "$0")/../.."
sources=${1:-10000}
root=${2:-$PWD/target/explode_resume_bench}
impls=${IMPLS:-cairn ray}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
py="$tools/ray-venv/bin/python"
scripts/bench/release_wheel.sh
rm -rf "$root"
mkdir -p "$root"
"$py" scripts/bench/explode_resume.py make "$root" "$sources"
for impl in $impls; do
  "$py" scripts/bench/explode_resume.py bench "$root" "$impl"
done
