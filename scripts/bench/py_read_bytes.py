"""Bytes on the wire per pyarrow read, by filesystem, counted by a proxy in
front of Garage (crates/cairn-py/tests/counting_proxy.py), against the
bytes the Parquet metadata says the reader needs (the column chunks it
decodes plus the 64 KiB footer read).

    . target/cairn-servers/servers.env
    python scripts/bench/py_read_bytes.py      (BENCH_MIB: file size, default 32)
    python scripts/bench/py_read_bytes.py ray  (Ray 2.60's read_parquet with
        row_hash over BENCH_FILES files of 10 row groups; the ray-venv's python)

Filesystems: pyarrow's own S3FileSystem (C++), cairn's
(`build_checkpoint_filesystem`), and cairn's fsspec filesystem under
pyarrow's `FSSpecHandler` (the path before it). Prints a Markdown table.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "crates/cairn-py/tests"))
from counting_proxy import CountingProxy, needed_bytes  # noqa: E402

import cairn  # noqa: E402
from cairn.fsspec import CairnFileSystem  # noqa: E402


def options(endpoint: str) -> dict:
    return {
        "key": os.environ["CAIRN_TEST_GARAGE_KEY"],
        "secret": os.environ["CAIRN_TEST_GARAGE_SECRET"],
        "endpoint_url": endpoint,
        "region": os.environ.get("CAIRN_TEST_GARAGE_REGION", "garage"),
    }


def filesystems(endpoint: str) -> dict:
    opts = options(endpoint)
    return {
        "pyarrow S3FileSystem": pafs.S3FileSystem(
            access_key=opts["key"],
            secret_key=opts["secret"],
            endpoint_override=endpoint,
            region=opts["region"],
            scheme="http",
        ),
        "cairn (build_checkpoint_filesystem)": cairn.build_checkpoint_filesystem(
            "s3://bucket", opts
        ),
        "cairn under FSSpecHandler (before)": pafs.PyFileSystem(
            pafs.FSSpecHandler(CairnFileSystem("s3", checkpoint=True, **opts))
        ),
    }


def main() -> None:
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    upstream = os.environ["CAIRN_TEST_GARAGE_ENDPOINT"]
    path = f"{bucket}/py-read-bytes-{uuid.uuid4().hex[:8]}/data.parquet"
    rows = int(os.environ.get("BENCH_MIB", "32")) * 1024 * 1024 // 24
    table = pa.table(
        {
            "uid": pa.array(range(rows), pa.int64()),
            "a": pa.array([(i * 7919) % 1_000_003 for i in range(rows)], pa.int64()),
            "b": pa.array([(i * 104729) % 2**61 for i in range(rows)], pa.int64()),
        }
    )
    writer = cairn.build_checkpoint_filesystem(f"s3://{path}", options(upstream))
    pq.write_table(table, path, filesystem=writer, row_group_size=rows // 10)
    size = writer.get_file_info(path).size
    with writer.open_input_file(path) as f:
        meta = pq.ParquetFile(f).metadata

    def chunks(groups, columns):
        return needed_bytes(meta, size, groups, columns)

    every = range(meta.num_row_groups)
    reads = [
        (
            "whole file (dataset)",
            chunks(every, {"uid", "a", "b"}),
            lambda fs: ds.dataset(path, filesystem=fs, format="parquet").to_table(),
        ),
        (
            "one column (dataset)",
            chunks(every, {"a"}),
            lambda fs: ds.dataset(path, filesystem=fs, format="parquet").to_table(
                columns=["a"]
            ),
        ),
        (
            "one column of one row group",
            chunks([3], {"a"}),
            lambda fs: pq.ParquetFile(fs.open_input_file(path)).read_row_group(
                3, columns=["a"]
            ),
        ),
    ]
    print(f"file: {size} bytes, {meta.num_row_groups} row groups, 3 int64 columns\n")
    print(
        "| read | needed | filesystem | bytes fetched | x needed | GETs | s (debug or release wheel as installed) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    with CountingProxy(upstream) as proxy:
        for name, needed, read in reads:
            for label, fs in filesystems(proxy.endpoint).items():
                proxy.reset()
                started = time.perf_counter()
                read(fs)
                took = time.perf_counter() - started
                print(
                    f"| {name} | {needed} | {label} | {proxy.get_bytes} | "
                    f"{proxy.get_bytes / needed:.2f} | {proxy.gets} | {took:.3f} |"
                )


def ray_read() -> None:
    import ray

    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    upstream = os.environ["CAIRN_TEST_GARAGE_ENDPOINT"]
    base = f"{bucket}/py-read-bytes-{uuid.uuid4().hex[:8]}/in"
    writer = cairn.build_checkpoint_filesystem(f"s3://{base}", options(upstream))
    files, rows, total = int(os.environ.get("BENCH_FILES", "8")), 100_000, 0
    for n in range(files):
        uids = range(n * rows, (n + 1) * rows)
        table = pa.table(
            {"uid": pa.array(uids, pa.int64()), "text": [f"row {i:09d}" for i in uids]}
        )
        pq.write_table(
            table,
            f"{base}/part-{n}.parquet",
            filesystem=writer,
            row_group_size=rows // 10,
        )
        total += writer.get_file_info(f"{base}/part-{n}.parquet").size
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"input: {files} files, {total} bytes, 10 row groups each\n")
    print("| Ray read_parquet | filesystem | bytes fetched | x input | GETs |")
    print("|---|---|---:|---:|---:|")
    with CountingProxy(upstream) as proxy:
        for row_hash in (False, True):
            for label, fs in filesystems(proxy.endpoint).items():
                proxy.reset()
                ray.data.read_parquet(
                    base, filesystem=fs, include_row_hash=row_hash
                ).materialize()
                what = "with row_hash" if row_hash else "uid only"
                print(
                    f"| {what} | {label} | {proxy.get_bytes} | "
                    f"{proxy.get_bytes / total:.2f} | {proxy.gets} |"
                )


if __name__ == "__main__":
    ray_read() if sys.argv[1:] == ["ray"] else main()
