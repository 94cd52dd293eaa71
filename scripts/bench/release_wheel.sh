#!/usr/bin/env bash
# Builds the release wheel and installs it into the Ray virtualenv, for the
# Ray benchmarks (scripts/test.sh puts its dev wheel back there); nothing
# with SKIP_BUILD set. Run from the repository's top:
#   scripts/bench/release_wheel.sh
set -euo pipefail
[ -n "${SKIP_BUILD:-}" ] && exit 0
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
scripts/tools.sh >/dev/null
WHEEL_OUT=target/wheels-release PYTHON="$tools/venv/bin/python" scripts/wheel.sh
"$tools/ray-venv/bin/pip" install -q --force-reinstall --no-deps target/wheels-release/cairn-*.whl
