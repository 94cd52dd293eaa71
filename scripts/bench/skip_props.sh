#!/usr/bin/env bash
# The skipping property tests, long: thousands of drawn cases instead of
# the few hundred scripts/test.sh runs. Rust: the native resume
# (crates/cairn-dataset/tests/skip_props.rs); Python: cairn.ray.read_parquet
# on Ray 2.60 (crates/cairn-py/tests/test_ray_skip_props.py), with the wheel
# scripts/test.sh installed in the Ray virtualenv. A failure prints the
# case and the seed that reproduces it.
#   scripts/bench/skip_props.sh [RUST_CASES] [PYTHON_EXAMPLES]   (defaults 2000 and 3000)
set -euo pipefail
cd "$(dirname "$0")/../.."
rust_cases=${1:-2000}
python_examples=${2:-3000}
tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
CAIRN_SKIP_PROP_CASES=$rust_cases cargo test --release -p cairn-dataset --test skip_props -- --nocapture
(cd crates/cairn-py/tests && CAIRN_SKIP_PROP_EXAMPLES=$python_examples RAY_ADDRESS=local \
  "$tools/ray-venv/bin/python" -m pytest test_ray_skip_props.py -q -p no:cacheprovider \
  --hypothesis-show-statistics)
