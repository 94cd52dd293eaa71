#!/usr/bin/env bash
# The test command: installs what is missing (Garage, moto, the Python
# virtualenvs), starts the local S3 servers on 127.0.0.1, builds the
# workspace once, then runs two lanes side by side and prints the count per
# backend and the time of each phase, and stops the servers:
#   Rust lane:   every test of the workspace (unit, doc, CLI, the
#                conformance suite on memory, file, Garage and moto), the
#                lifecycle example, then the tests that need the servers;
#   Python lane: the dev wheel built and installed, then the package's
#                fsspec and pyarrow tests and the table sinks' tests that
#                start no Ray (its output printed when both lanes are done);
# then the Ray Data 2.60 tests (two pytest processes at once, then Ray's
# metrics test beside the longer), once the Rust lane is done: a Ray node
# starting on a machine loaded by the Rust tests can miss Ray's fixed 30 s
# to register.
#   scripts/test.sh [extra cargo test args]
# Set CAIRN_TEST_SKIP_SERVERS=1 to run without servers (server tests skip,
# and the Python lane is not run). CAIRN_TEST_ALONGSIDE=<command> runs that
# command (.ci/run: clippy) at the lowest CPU priority beside the Ray tests,
# or after the Rust tests when there are none; its failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's time, in the log CI prints: where CI's minutes go.
phase_start=$SECONDS
phases=""
phase_done() {
  local line="$1: $((SECONDS - phase_start)) s"
  echo "== $line"
  phases+="  $line"$'\n'
  phase_start=$SECONDS
}

# CAIRN_TEST_ALONGSIDE's command, once started (stopped with the servers
# when the run ends early).
alongside_pid=""
mkdir -p target
# The tools install beside the workspace's build: on a fresh machine they
# are mostly downloads and Garage's build, whose single-threaded stretches
# and the build's leave a core idle each (about 4 minutes alone, then 9).
tools_pid=""
if [ -z "${CAIRN_TEST_SKIP_SERVERS:-}" ]; then
  scripts/tools.sh >target/test-tools.log 2>&1 &
  tools_pid=$!
  # An interrupted build stops the installs too (a background job of a
  # script ignores the terminal's SIGINT).
  trap 'kill -- "$tools_pid" 2>/dev/null || true' EXIT
fi

# A Ray driver of the tests joins only the instance its test names (the
# test process's shared one, or its own), never a cluster another test (or
# a killed driver) left in /tmp/ray.
export RAY_ADDRESS=local
set +e
cargo test --workspace --no-run 2>&1 | tee target/test.log
build_status=${PIPESTATUS[0]}
phase_done "cargo test --workspace --no-run (the build, beside scripts/tools.sh)"
if [ -n "$tools_pid" ]; then
  tools_status=0
  wait "$tools_pid" || tools_status=$?
  cat target/test-tools.log
  [ "$tools_status" -eq 0 ] || { echo "scripts/tools.sh failed (its output is above)"; exit 1; }
  phase_done "waiting for scripts/tools.sh"
fi
[ "$build_status" -eq 0 ] || { echo "the workspace does not build"; exit 1; }
if [ -z "${CAIRN_TEST_SKIP_SERVERS:-}" ]; then
  scripts/servers.sh start
  trap 'scripts/servers.sh stop; [ -z "$alongside_pid" ] || kill "$alongside_pid" 2>/dev/null || true' EXIT
  # shellcheck disable=SC1091
  . target/cairn-servers/servers.env
fi

# The Python lane, in the background: one wheel (scripts/wheel.sh --dev),
# installed into the tools' virtualenv (fsspec's own abstract tests on
# memory, local disk and Garage; pyarrow; pickling; then, in the Ray
# virtualenv, the table sinks' tests that start no Ray), into the Ray
# virtualenv (Ray Data 2.60 on a local cluster: tests/test_ray*.py) and into
# the ray[default] one (Ray's metrics: tests/test_ray_metrics.py). Cargo
# holds its build lock only while compiling, so the wheel's build runs
# beside the Rust lane's tests.
python_lane() {
  local tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}" status=0 start=$SECONDS
  lane_phase() {
    echo "== $1: $((SECONDS - start)) s"
    start=$SECONDS
  }
  # Through the script users build the release wheel with, so it cannot rot.
  if ! { WHEEL_OUT=target/wheels PYTHON="$tools/venv/bin/python" scripts/wheel.sh --dev 2>&1 | tail -3 \
      && "$tools/venv/bin/pip" install -q --force-reinstall --no-deps target/wheels/cairn-*.whl \
      && "$tools/ray-venv/bin/pip" install -q --force-reinstall --no-deps target/wheels/cairn-*.whl \
      && "$tools/ray-metrics-venv/bin/pip" install -q --force-reinstall --no-deps target/wheels/cairn-*.whl; }; then
    echo "the wheel was not built or installed"
    return 2
  fi
  lane_phase "the wheel, built and installed"
  # From another directory, so `import cairn` is the installed wheel.
  (cd crates/cairn-py/tests && "$tools/venv/bin/python" -m pytest . -q -p no:cacheprovider) || status=1
  lane_phase "Python tests (fsspec, pyarrow)"
  # The table sinks' tests that start no Ray (the committer on threads, the
  # formats' logs and Delta's staged files against their own libraries,
  # in the Ray virtualenv), here rather than in the Ray phase: this lane
  # ends minutes before the Rust lane, and the Ray phase runs alone.
  (cd crates/cairn-py/tests && "$tools/ray-venv/bin/python" -m pytest test_group_commit.py \
    test_delta_files.py test_table_lineage.py test_output_ids.py test_keys.py \
    test_first_writers.py -q -p no:cacheprovider -rs --durations=5) || status=1
  lane_phase "table tests without Ray (committer, logs, Delta's files)"
  return "$status"
}

# The Ray tests, once the Rust lane is done: a Ray node that cannot
# register within Ray's fixed 30 s (its raylet starved by the Rust tests'
# load) fails its test, so they get the machine to themselves (but for
# CAIRN_TEST_ALONGSIDE's command, at the lowest priority). They run as two
# pytest processes at once, each with its own shared Ray instance: one
# alone left about 40% of the two cores idle while its jobs waited on
# Ray's scheduling, kills and timeouts. The table sinks' files are one
# stream, the rest the other (about the same time each).
ray_stream() {
  local tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}" name="$1"
  shift
  # The skipping property test draws 300 cases here
  # (scripts/bench/skip_props.sh runs thousands).
  (cd crates/cairn-py/tests && CAIRN_TEST_RAY_STREAM="$name" \
    CAIRN_SKIP_PROP_EXAMPLES="${CAIRN_SKIP_PROP_EXAMPLES:-300}" \
    "$tools/ray-venv/bin/python" -m pytest "$@" -q -p no:cacheprovider -rsxX --durations=15) \
    >"target/test-ray-$name.log" 2>&1
}
ray_tests() {
  local tools="${CAIRN_TOOLS:-$HOME/.cache/cairn-tools}" status=0 first="" pid
  ray_stream tables test_ray_tables.py test_ray_sinks.py test_ray_writer.py test_ray_rerun.py &
  local tables_pid=$!
  ray_stream rest test_ray.py test_ray_read.py test_ray_shards.py test_ray_skip_props.py \
    test_ray_limits.py test_ray_upstream.py test_pandas.py test_docs.py test_ray_explode.py &
  local rest_pid=$!
  # Ray's metrics test (cairn's counts in Ray's metrics: Ray exports them
  # only with ray[default]) runs once the first stream ends, beside the
  # other: after both, it was two minutes more on CI's clock.
  wait -n -p first "$tables_pid" "$rest_pid" || status=1
  (cd crates/cairn-py/tests && CAIRN_TEST_RAY_STREAM=metrics \
    "$tools/ray-metrics-venv/bin/python" -m pytest test_ray_metrics.py -q -p no:cacheprovider -rs) \
    >target/test-ray-metrics.log 2>&1 || status=1
  for pid in "$tables_pid" "$rest_pid"; do
    [ "$pid" = "$first" ] || wait "$pid" || status=1
  done
  for name in rest tables metrics; do
    echo
    echo "---- Ray tests: $name ----"
    cat "target/test-ray-$name.log"
  done
  phase_done "Ray tests (Ray's metrics test among them)"
  return "$status"
}
# CAIRN_TEST_ALONGSIDE's command, in the background (its output in
# target/test-alongside.log, printed when it ends), at the lowest CPU and
# disk priority.
start_alongside() {
  if [ -n "${CAIRN_TEST_ALONGSIDE:-}" ]; then
    local idle=()
    if command -v ionice >/dev/null; then idle=(ionice -c3); fi
    nice -n 19 "${idle[@]}" bash -c "$CAIRN_TEST_ALONGSIDE" >target/test-alongside.log 2>&1 &
    alongside_pid=$!
  fi
}
finish_alongside() {
  [ -n "${CAIRN_TEST_ALONGSIDE:-}" ] || return 0
  [ -n "$alongside_pid" ] || start_alongside
  local alongside_status=0
  wait "$alongside_pid" || alongside_status=$?
  echo
  echo "---- beside the Ray tests: $CAIRN_TEST_ALONGSIDE ----"
  cat target/test-alongside.log
  phase_done "waiting for $CAIRN_TEST_ALONGSIDE"
  return "$alongside_status"
}

python_pid=""
if [ -z "${CAIRN_TEST_SKIP_SERVERS:-}" ]; then
  python_lane >target/test-python.log 2>&1 &
  python_pid=$!
fi

# The Rust lane.
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee -a target/test.log
status=${PIPESTATUS[0]}
phase_done "cargo test --workspace"
# cairn-checkpoint's lifecycle example (docs/library.md), built by cargo
# test: a run crashes mid-unit, the next one recovers and finishes, the
# output holds every ID once. memory:// and local disk here, Garage below.
lifecycle_dir=$(mktemp -d)
for base in memory:///lifecycle "$lifecycle_dir/lifecycle"; do
  target/debug/examples/lifecycle "$base" 2>&1 | tee -a target/test.log
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
rm -rf "$lifecycle_dir"
if [ -z "${CAIRN_TEST_SKIP_SERVERS:-}" ]; then
  # The tests that need the servers and are #[ignore]d (so a run without
  # servers shows them as ignored) run here: exactly-once and no data loss on S3, the s3 wire
  # check, the docs examples (tests/docs.rs), cairn-fs and jobs under
  # injected faults (tests/faults.rs, tests/job_faults.rs), the bad-input
  # matrix (tests/bad_input.rs), a job scraped by Prometheus (tests/metrics.rs),
  # partitioned jobs on Garage (tests/partitioned.rs). They spend most of
  # their time waiting on jobs, servers and timeouts (about a third of the
  # two cores), so they run as two groups at once, about 2.5 minutes each;
  # the tests that bound a wait (a second SIGINT, a retry deadline) are
  # split between them. Each group's output follows when it ends.
  ignored_group() {
    local log="target/test-ignored-$1.log"
    shift
    cargo test --workspace --no-fail-fast "$@" -- --ignored >"$log" 2>&1
  }
  ignored_group a --test exactly_once --test docs --test bad_input --test no_data_loss "$@" &
  group_a=$!
  ignored_group b --test job_faults --test partitioned --test faults --test metrics --test s3_wire "$@" &
  group_b=$!
  for group in a b; do
    pid=$group_a
    [ "$group" = b ] && pid=$group_b
    wait "$pid" || status=1
    tee -a target/test.log <"target/test-ignored-$group.log"
  done
  AWS_ENDPOINT_URL="$CAIRN_TEST_GARAGE_ENDPOINT" AWS_REGION="$CAIRN_TEST_GARAGE_REGION" \
    AWS_ACCESS_KEY_ID="$CAIRN_TEST_GARAGE_KEY" AWS_SECRET_ACCESS_KEY="$CAIRN_TEST_GARAGE_SECRET" \
    target/debug/examples/lifecycle "s3://$CAIRN_TEST_GARAGE_BUCKET/lifecycle-$$" 2>&1 | tee -a target/test.log
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  phase_done "Rust tests that need the servers (--ignored)"
fi

if [ -n "$python_pid" ]; then
  python_status=0
  wait "$python_pid" || python_status=$?
  phase_done "waiting for the Python lane"
  echo
  echo "---- the Python lane ----"
  cat target/test-python.log
  grep '^== ' target/test-python.log | sed 's/^== /  python lane: /' >>target/test-phases.log
  [ "$python_status" -eq 0 ] || status=1
  # Without a wheel (status 2) there is nothing for Ray to import.
  if [ "$python_status" -ne 2 ]; then
    start_alongside
    ray_tests || status=1
  fi
else
  echo "python package tests skipped (CAIRN_TEST_SKIP_SERVERS is set: no tools' virtualenv)"
fi
finish_alongside || status=1
set -e

echo
echo "time per phase:"
printf "%s" "$phases"
if [ -f target/test-phases.log ]; then cat target/test-phases.log; rm -f target/test-phases.log; fi
echo "conformance suite, tests per backend:"
awk '/Running tests\/[a-z0-9_]+\.rs/ { match($0, /tests\/[a-z0-9_]+\.rs/); name = substr($0, RSTART + 6, RLENGTH - 9) }
     /^test result:/ && name != "" { sub(/^test result: /, ""); printf "  %-20s %s\n", name, $0; name = "" }' target/test.log
exit "$status"
