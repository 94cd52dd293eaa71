#!/usr/bin/env bash
# Ray Data 2.60 resume, Ray's default checkpoint manager/filter against
# cairn.ray's, same checkpoint, same run (scripts/bench/ray_resume.py says
# what is measured). Builds the release wheel and installs it into the Ray
# virtualenv (scripts/test.sh puts its dev wheel back there).
#   scripts/bench/ray_resume.sh [IDS]   (default 10000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/tools.sh >/dev/null
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
rm -rf target/wheels-release
"$tools/venv/bin/maturin" build -q --release -m crates/cairn-py/Cargo.toml \
  --interpreter "$tools/venv/bin/python" -o target/wheels-release
"$tools/ray-venv/bin/pip" install -q --force-reinstall --no-deps target/wheels-release/cairn-*.whl
"$tools/ray-venv/bin/python" scripts/bench/ray_resume.py "${1:-10000000}" 2>/dev/null
