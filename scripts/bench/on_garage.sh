# Sourced (from the repository's top) by the benchmarks that run against the
# test Garage: installs the tools, starts the servers (stopped again when the
# benchmark exits), reads their settings and exports them as BENCH_*.
scripts/tools.sh >/dev/null
scripts/servers.sh start >/dev/null
trap 'scripts/servers.sh stop >/dev/null' EXIT
. target/cairn-servers/servers.env
export BENCH_ENDPOINT="$CAIRN_TEST_GARAGE_ENDPOINT" BENCH_KEY="$CAIRN_TEST_GARAGE_KEY" \
       BENCH_SECRET="$CAIRN_TEST_GARAGE_SECRET" BENCH_BUCKET="$CAIRN_TEST_GARAGE_BUCKET" \
       BENCH_REGION="$CAIRN_TEST_GARAGE_REGION"
