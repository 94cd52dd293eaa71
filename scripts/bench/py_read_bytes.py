"""Bytes on the wire per pyarrow read, by filesystem, counted by a proxy in
front of Garage (crates/cairn-py/tests/counting_proxy.py), against the
bytes the Parquet metadata says the reader needs (the column chunks it
decodes plus the 64 KiB footer read).

    . target/cairn-servers/servers.env
    python scripts/bench/py_read_bytes.py      (BENCH_MIB: file size, default 32)
    python scripts/bench/py_read_bytes.py ray  (Ray 2.60's read_parquet with
        and without row_hash over BENCH_FILES files of BENCH_ROWS rows, 8 and
        100,000 by default, in 10 row groups; the ray-venv's python)
    python scripts/bench/py_read_bytes.py resume  (a 95%-committed resume
        through cairn.ray.read_parquet: BENCH_FILES files of BENCH_FILE_MIB
        MB, 40 and 2.2 by default; the ray-venv's python)

Filesystems: pyarrow's own S3FileSystem (C++), cairn's
(`build_checkpoint_filesystem`), and cairn's fsspec filesystem under
pyarrow's `FSSpecHandler` (the path before it, whose files now read ahead
only in order). Prints a Markdown table.
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
        "cairn's fsspec file under FSSpecHandler": pafs.PyFileSystem(
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
    files, total = int(os.environ.get("BENCH_FILES", "8")), 0
    rows = int(os.environ.get("BENCH_ROWS", "100000"))
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


def resume() -> None:
    """A 95%-committed resume through cairn.ray.read_parquet: the input on
    Garage behind the counting proxy, the checkpoint and output on local
    disk (so every byte the proxy counts is input)."""
    import shutil
    import tempfile

    import ray
    from ray.data import DataContext

    import cairn.ray

    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    upstream = os.environ["CAIRN_TEST_GARAGE_ENDPOINT"]
    files = int(os.environ.get("BENCH_FILES", "40"))
    file_mib = float(os.environ.get("BENCH_FILE_MIB", "2.2"))
    committed = files * 95 // 100
    base = f"{bucket}/py-read-bytes-{uuid.uuid4().hex[:8]}/in"
    writer = cairn.build_checkpoint_filesystem(f"s3://{base}", options(upstream))
    # uid and 100 random hex characters: about 112 bytes a row on disk.
    rows = int(file_mib * 1e6 / 112)
    root = tempfile.mkdtemp(prefix="cairn-resume-bytes-")
    ckpt, out = f"{root}/ckpt", f"{root}/out"
    os.makedirs(ckpt)
    os.makedirs(out)
    total = 0
    # One file's text, shifted by a row a file so no two files are alike.
    text = pa.array([os.urandom(50).hex() for _ in range(rows + files)])
    for n in range(files):
        uids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
        table = pa.table({"uid": uids, "text": text.slice(n, rows)})
        pq.write_table(
            table,
            f"{base}/part-{n:05}.parquet",
            filesystem=writer,
            row_group_size=-(-rows // 10),
        )
        total += writer.get_file_info(f"{base}/part-{n:05}.parquet").size
        if n < committed:
            # Ray's layout: the unit's ID file, and its data file in the output.
            pq.write_table(pa.table({"uid": uids}), f"{ckpt}/w_{n:06}.parquet")
            pq.write_table(table.slice(0, 0), f"{out}/w_{n:06}-0.parquet")
    left = total * (files - committed) / files
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    DataContext.get_current().checkpoint_config = cairn.ray.checkpoint_config(
        "uid", ckpt
    )
    print(
        f"input: {files} files, {total} bytes, 10 row groups each, {committed} committed\n"
    )
    print(
        "| reader | bytes fetched | of the input | of what is left | GETs | rows written |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    with CountingProxy(upstream) as proxy:
        fs = cairn.build_checkpoint_filesystem("s3://", options(proxy.endpoint))
        started = time.perf_counter()
        cairn.ray.read_parquet(base, filesystem=fs).map_batches(
            lambda batch: batch, batch_format="pyarrow"
        ).write_parquet(out)
        took = time.perf_counter() - started
        written = sum(
            pq.ParquetFile(f"{out}/{name}").metadata.num_rows
            for name in os.listdir(out)
            if name.endswith(".parquet")
        )
        print(
            f"| cairn.ray.read_parquet | {proxy.get_bytes} | {proxy.get_bytes / total:.1%} | "
            f"{proxy.get_bytes / left:.2f}x | {proxy.gets} | {written} ({took:.1f} s) |"
        )
        if os.environ.get("BENCH_VERBOSE"):
            for path, ranged, length in proxy.get_log:
                print(f"  GET {path.rsplit('/', 1)[-1]} {ranged} {length}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    modes = {"ray": ray_read, "resume": resume}
    modes.get(sys.argv[1] if sys.argv[1:] else "", main)()
