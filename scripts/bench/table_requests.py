"""Requests per unit on a store: one Ray Data job (read_parquet ->
map_batches -> write) with input, output and checkpoint on Garage, every
request counted by a proxy in front of Garage (outside the code under
test, in a process of its own), into each output:

- Parquet files with cairn's checkpoint (cairn.ray.checkpoint_config);
- a Delta table, an Iceberg table (SQLite catalog, data on Garage) and a
  Lance dataset through cairn.ray's sinks with cairn's checkpoint: group
  commits (the default), and "delta-unit", "iceberg-unit", "lance-unit"
  with a commit a unit (max_units_per_commit=1), run when WAYS names them.

Delta and Lance write one task at a time (Garage ignores the conditional
writes they commit with; docs/python.md), the others at once. Run in the
ray-venv with the wheel installed and the servers started
(scripts/servers.sh start; . target/cairn-servers/servers.env):

    RAY_ADDRESS=local ~/.cache/cairn-tools/ray-venv/bin/python scripts/bench/table_requests.py [ROWS] [FILES]

Prints per output: seconds, units, requests by method and per unit (the
input's reads included: the Parquet row is the baseline).
WAYS=parquet,lance,lance-unit (comma-separated) picks the outputs
(default: parquet,delta,iceberg,lance)."""

import os

# One read task per file, so one unit per file.
os.environ.setdefault("RAY_DATA_PARQUET_BIN_PACKING_BYTES", str(64 * 1024))

import sys
import time
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import ray
from ray.data import DataContext

import cairn
import cairn.ray

#: The tests' directory: the counting proxy and the oracle's helpers.
_TESTS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "../../crates/cairn-py/tests"
)
sys.path.insert(0, _TESTS)
from oracle import write_uid_files  # noqa: E402


class ProxyProcess:
    """The counting proxy in a process of its own: in the driver's, its
    threads wait on the interpreter lock while deltalake's end-of-job check
    blocks on it, and its requests time out. ``endpoint``, ``reset()`` and
    ``requests`` as :class:`CountingProxy`'s; every answer awaited at most
    60 s. A plain subprocess, not multiprocessing's (whose exit handler
    would end it before cairn's removes the jobs' completion markers
    through it): it ends when this process does and its stdin closes."""

    def __init__(self, upstream):
        self._upstream = upstream

    def __enter__(self):
        import subprocess

        self._child = subprocess.Popen(
            [sys.executable, "-c", _SERVE, self._upstream, _TESTS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.endpoint = self._answer()
        return self

    def __exit__(self, *exc):
        pass

    def _ask(self, command):
        self._child.stdin.write(command + "\n")
        self._child.stdin.flush()
        return self._answer()

    def _answer(self):
        import select

        ready, _, _ = select.select([self._child.stdout], [], [], 60)
        if not ready:
            raise TimeoutError("the counting proxy did not answer within 60 s")
        line = self._child.stdout.readline()
        if not line:
            raise RuntimeError(f"the counting proxy exited ({self._child.poll()})")
        return line.strip()

    def reset(self):
        self._ask("reset")

    @property
    def requests(self):
        import json

        return json.loads(self._ask("requests"))


#: The proxy's process: prints its endpoint, then answers ``reset`` and
#: ``requests`` (JSON) a line each, until its stdin closes.
_SERVE = """
import json, sys
sys.path.insert(0, sys.argv[2])
from counting_proxy import CountingProxy
with CountingProxy(sys.argv[1]) as proxy:
    print(proxy.endpoint, flush=True)
    for line in sys.stdin:
        if line.strip() == "reset":
            proxy.reset()
            print("null", flush=True)
        else:
            print(json.dumps(dict(proxy.requests)), flush=True)
"""


def upper(batch):
    batch["text"] = batch["text"].str.upper()
    return batch


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    endpoint = os.environ["CAIRN_TEST_GARAGE_ENDPOINT"]
    key = os.environ["CAIRN_TEST_GARAGE_KEY"]
    secret = os.environ["CAIRN_TEST_GARAGE_SECRET"]
    region = os.environ.get("CAIRN_TEST_GARAGE_REGION", "garage")
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    base = f"{bucket}/bench-table-requests-{uuid.uuid4().hex[:8]}"
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    with ProxyProcess(endpoint) as proxy:
        options = {
            "key": key,
            "secret": secret,
            "endpoint_url": proxy.endpoint,
            "region": region,
        }
        s3 = pafs.S3FileSystem(
            access_key=key,
            secret_key=secret,
            endpoint_override=endpoint,
            region=region,
            scheme="http",
        )
        write_uid_files(s3, f"{base}/in", files, rows // files)
        data_fs = cairn.build_checkpoint_filesystem(f"s3://{base}", options)

        def delta(out, **grouping):
            storage = {
                "AWS_ENDPOINT_URL": proxy.endpoint,
                "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_REGION": region,
                "AWS_ALLOW_HTTP": "true",
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
            }
            return cairn.ray.DeltaDatasink(
                out, storage_options=storage, filesystem=data_fs, **grouping
            ), 1

        def lance(out, **grouping):
            storage = {
                "aws_endpoint": proxy.endpoint,
                "aws_access_key_id": key,
                "aws_secret_access_key": secret,
                "aws_region": region,
                "allow_http": "true",
            }
            return cairn.ray.LanceDatasink(
                out, storage_options=storage, filesystem=data_fs, **grouping
            ), 1

        def iceberg(out, **grouping):
            from pyiceberg.catalog import load_catalog

            name = out.rsplit("/", 1)[-1]
            kwargs = {
                "type": "sql",
                "uri": f"sqlite:////tmp/{name}-catalog.db",
                "warehouse": f"s3://{base}/warehouse",
                "s3.endpoint": proxy.endpoint,
                "s3.access-key-id": key,
                "s3.secret-access-key": secret,
                "s3.region": region,
            }
            catalog = load_catalog("bench", **kwargs)
            catalog.create_namespace("db")
            catalog.create_table(
                "db.t",
                schema=pa.schema([("uid", pa.int64()), ("text", pa.string())]),
                location=out,
            )
            sink = cairn.ray.IcebergDatasink(
                "db.t", {"name": "bench", **kwargs}, filesystem=data_fs, **grouping
            )
            return sink, None

        print(f"{rows} rows in {files} files, Garage behind a counting proxy")
        # The group commits' ways by default; the per-unit ones when named.
        wanted = os.environ.get("WAYS", "parquet,delta,iceberg,lance")

        def a_commit_a_unit(make):
            return lambda out: make(out, max_units_per_commit=1)

        for name, sink in [
            ("parquet", None),
            ("delta", delta),
            ("delta-unit", a_commit_a_unit(delta)),
            ("iceberg", iceberg),
            ("iceberg-unit", a_commit_a_unit(iceberg)),
            ("lance", lance),
            ("lance-unit", a_commit_a_unit(lance)),
        ]:
            if name not in wanted.split(","):
                continue
            out = f"s3://{base}/out-{name}-{uuid.uuid4().hex[:6]}"
            DataContext.get_current().checkpoint_config = cairn.ray.checkpoint_config(
                "uid", f"s3://{base}/ckpt-{name}", options
            )
            made = sink(out) if sink else None
            proxy.reset()
            started = time.monotonic()
            ds = ray.data.read_parquet(f"s3://{base}/in", filesystem=data_fs)
            ds = ds.map_batches(upper, batch_format="pandas")
            if made is None:
                ds.write_parquet(out, filesystem=data_fs)
            else:
                ds.write_datasink(made[0], concurrency=made[1])
            seconds = time.monotonic() - started
            counts = dict(proxy.requests)
            total = sum(counts.values())
            DataContext.get_current().checkpoint_config = None
            by_method = " ".join(f"{m}={n}" for m, n in sorted(counts.items()))
            print(
                f"{name:8} {seconds:7.2f} s  {files} units  {total} requests "
                f"({total / files:.1f} a unit): {by_method}",
                flush=True,
            )


if __name__ == "__main__":
    main()
