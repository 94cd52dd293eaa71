#!/usr/bin/env bash
# Builds the Python package `cairn` as one abi3 wheel (every CPython >= 3.9,
# manylinux-compatible, stripped) that installs without a Rust toolchain:
#
#   scripts/wheel.sh          release profile, into dist/ (what you install
#                             or copy to other machines: pip install dist/cairn-*.whl)
#   scripts/wheel.sh --dev    dev profile (what scripts/test.sh builds: with the
#                             `test-build` feature the shared dependencies get the
#                             features `cargo test --workspace` gives them, so it
#                             reuses what the tests compiled: 30 s instead of 5 min)
#
# WHEEL_OUT sets the directory (default dist); PYTHON the interpreter the
# wheel is built for (default: the tools' virtualenv, else python3); MATURIN
# the maturin to use (default: the tools' virtualenv's, else one on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
features=()
if [ "${1:-}" = "--dev" ]; then
  profile=dev
  features=(--features test-build)
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/wheel.sh [--dev]" >&2
  exit 2
fi
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
maturin="${MATURIN:-$tools/venv/bin/maturin}"
[ -x "$maturin" ] || maturin="$(command -v maturin || true)"
if [ -z "$maturin" ]; then
  echo "maturin is missing: pip install maturin==1.16.0 (or run scripts/tools.sh)" >&2
  exit 1
fi
python="${PYTHON:-$tools/venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
out="${WHEEL_OUT:-dist}"
mkdir -p "$out"
rm -f "$out"/cairn-*.whl
if [ "$profile" = release ]; then
  echo "building the cairn wheel (release: the Rust extension is compiled with"
  echo "optimizations, about 15 minutes on 2 cores the first time) into $out/ ..."
fi
started=$SECONDS
"$maturin" build --profile "$profile" --strip -m crates/cairn-py/Cargo.toml \
  --interpreter "$python" -o "$out" "${features[@]}"
wheel="$(ls "$out"/cairn-*.whl)"
echo "built $wheel ($(du -h "$wheel" | cut -f1), $((SECONDS - started)) s); install it with: pip install $wheel"
