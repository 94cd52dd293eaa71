"""pyarrow reading and writing Parquet on Garage through four filesystems,
one per process run: pyarrow's own S3FileSystem (C++), cairn's
(`cairn.build_checkpoint_filesystem`), obstore's fsspec adapter and s3fs
(each of those two under pyarrow's `FSSpecHandler`, as Ray and pyarrow
users reach them).

  read_whole     pyarrow.dataset(...).to_table() of the whole dataset
  read_column    the same with columns=["a"]: one column of every row group
  write_2        pq.write_table of 2 files of the dataset's size / FILES each
  ray_job        (BENCH_RAY=1, the ray-venv's python) Ray Data's read_parquet,
                 map_batches (identity), write_parquet: input MiB / s

The dataset (BENCH_FILES files of 8 row groups of 100,000 rows, about 51 MB
a file: `uid` int64, `a` float64, `b` int64, 32 random bytes) is written
once by the first run (`prepare`), through pyarrow's own filesystem, under
BENCH_PREFIX. One JSON object per measurement, as table.py reads them.

  python scripts/bench/py_arrow_bench.py prepare
  python scripts/bench/py_arrow_bench.py TOOL     (pyarrow | cairn | obstore | s3fs)
"""

from __future__ import annotations

import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

endpoint = os.environ.get("BENCH_ENDPOINT", "http://127.0.0.1:3900")
bucket = os.environ.get("BENCH_BUCKET", "cairn-test")
region = os.environ.get("BENCH_REGION", "us-east-1")
key, secret = os.environ["BENCH_KEY"], os.environ["BENCH_SECRET"]
files = int(os.environ.get("BENCH_FILES", "8"))
prefix = f"{bucket}/{os.environ.get('BENCH_PREFIX', 'bench-arrow')}"
ROWS_PER_GROUP, GROUPS = 100_000, 8


def filesystem(tool: str) -> pafs.FileSystem:
    if tool == "pyarrow":
        return pafs.S3FileSystem(
            access_key=key,
            secret_key=secret,
            endpoint_override=endpoint,
            region=region,
            scheme="http",
        )
    if tool == "cairn":
        import cairn

        return cairn.build_checkpoint_filesystem(
            "s3://",
            {"key": key, "secret": secret, "endpoint_url": endpoint, "region": region},
        )
    if tool in ("obstore", "s3fs"):
        from py_fs_bench import filesystem as fsspec_filesystem

        return pafs.PyFileSystem(pafs.FSSpecHandler(fsspec_filesystem(tool)))
    raise SystemExit(f"unknown tool {tool!r}: pyarrow, cairn, obstore or s3fs")


def part(n: int) -> pa.Table:
    rows = ROWS_PER_GROUP * GROUPS
    start = n * rows
    uid = pa.array(range(start, start + rows), pa.int64())
    noise = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(32), rows, [None, pa.py_buffer(os.urandom(32 * rows))]
    )
    return pa.table(
        {
            "uid": uid,
            "a": pc.random(rows),
            "b": pc.multiply(uid, pa.scalar(2654435761, pa.int64())),
            "noise": noise,
        }
    )


def prepare() -> None:
    fs = filesystem("pyarrow")
    for n in range(files):
        pq.write_table(
            part(n),
            f"{prefix}/in/part-{n:03}.parquet",
            filesystem=fs,
            row_group_size=ROWS_PER_GROUP,
        )


def report(tool: str, op: str, started: float, nbytes: int, ended: float = 0.0) -> None:
    secs = (ended or time.perf_counter()) - started
    print(
        json.dumps(
            {
                "tool": tool,
                "op": op,
                "seconds": secs,
                "ops_per_s": 1 / secs,
                "mib_per_s": nbytes / 1048576 / secs,
            }
        ),
        flush=True,
    )


def main(tool: str) -> None:
    fs = filesystem(tool)
    source = f"{prefix}/in"
    size = sum(
        i.size
        for i in fs.get_file_info(pafs.FileSelector(source))
        if i.type == pafs.FileType.File
    )
    if os.environ.get("BENCH_RAY"):
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        out = f"{prefix}/out-ray-{tool}-{os.getpid()}"
        t = time.perf_counter()
        ray.data.read_parquet(source, filesystem=fs).map_batches(
            lambda batch: batch, batch_format="pyarrow"
        ).write_parquet(out, filesystem=fs)
        ended = time.perf_counter()
        written = ds.dataset(out, filesystem=fs, format="parquet").count_rows()
        assert written == files * ROWS_PER_GROUP * GROUPS, written
        report(tool, "ray_job", t, size, ended)
        fs.delete_dir(out)
        return
    t = time.perf_counter()
    table = ds.dataset(source, filesystem=fs, format="parquet").to_table()
    assert table.num_rows == files * ROWS_PER_GROUP * GROUPS
    report(tool, "read_whole", t, size)
    t = time.perf_counter()
    column = ds.dataset(source, filesystem=fs, format="parquet").to_table(columns=["a"])
    assert column.num_rows == table.num_rows
    report(tool, "read_column", t, size)
    out = f"{prefix}/out-{tool}-{os.getpid()}"
    halves = [
        table.slice(0, table.num_rows // files),
        table.slice(table.num_rows // files),
    ]
    halves[1] = halves[1].slice(0, halves[0].num_rows)
    t = time.perf_counter()
    for n, half in enumerate(halves):
        pq.write_table(
            half,
            f"{out}/part-{n}.parquet",
            filesystem=fs,
            row_group_size=ROWS_PER_GROUP,
        )
    ended = time.perf_counter()
    written = sum(fs.get_file_info(f"{out}/part-{n}.parquet").size for n in range(2))
    report(tool, "write_2", t, written, ended)
    fs.delete_dir(out)


if __name__ == "__main__":
    prepare() if sys.argv[1] == "prepare" else main(sys.argv[1])
