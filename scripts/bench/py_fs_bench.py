"""From Python on Garage, the same operations through three fsspec
filesystems in one run: cairn.fsspec.CairnFileSystem, s3fs 2026.9 and
obstore's fsspec adapter (obstore.fsspec.FsspecStore).

  put_1k        pipe({path: 1 KiB} x N)      (one call, the library's batching)
  get_1k        cat([N paths])
  ls            ls of the N-file prefix
  rm_recursive  rm(prefix, recursive=True)
  put_large     open(path, "wb") and write LARGE MiB in 8 MiB writes
  get_large     cat_file of that file

Settings from BENCH_* variables; one JSON object per measurement.
  python scripts/bench/py_fs_bench.py TOOL     (cairn | s3fs | obstore)
"""

import json
import os
import sys
import time

endpoint = os.environ.get("BENCH_ENDPOINT", "http://127.0.0.1:3900")
bucket = os.environ.get("BENCH_BUCKET", "cairn-test")
region = os.environ.get("BENCH_REGION", "us-east-1")
key, secret = os.environ["BENCH_KEY"], os.environ["BENCH_SECRET"]
count = int(os.environ.get("BENCH_SMALL_COUNT", "2000"))
large_mib = int(os.environ.get("BENCH_LARGE_MIB", "256"))


def filesystem(tool):
    """The fsspec filesystem of ``tool`` on the bench's Garage (py_arrow_bench.py
    hands obstore's and s3fs's to pyarrow)."""
    if tool == "cairn":
        from cairn.fsspec import CairnFileSystem

        return CairnFileSystem(
            "s3",
            key=key,
            secret=secret,
            endpoint_url=endpoint,
            region=region,
            use_listings_cache=False,
        )
    if tool == "s3fs":
        import s3fs

        return s3fs.S3FileSystem(
            key=key,
            secret=secret,
            use_listings_cache=False,
            client_kwargs={"endpoint_url": endpoint, "region_name": region},
        )
    if tool == "obstore":
        from obstore.fsspec import FsspecStore

        return FsspecStore(
            "s3",
            config={
                "access_key_id": key,
                "secret_access_key": secret,
                "endpoint": endpoint,
                "region": region,
                "virtual_hosted_style_request": False,
            },
            client_options={"allow_http": True},
        )
    raise SystemExit(f"unknown tool {tool!r}: cairn, s3fs or obstore")


def report(tool, op, started, ops, nbytes):
    secs = time.perf_counter() - started
    print(
        json.dumps(
            {
                "tool": tool,
                "op": op,
                "seconds": secs,
                "ops_per_s": ops / secs,
                "mib_per_s": nbytes / 1048576 / secs,
            }
        ),
        flush=True,
    )


def main(tool):
    fs = filesystem(tool)
    prefix = f"{bucket}/bench-py-{tool}-{os.getpid()}"
    keys = [f"{prefix}/small/{i:06}" for i in range(count)]
    payload = b"\x07" * 1024

    t = time.perf_counter()
    fs.pipe({k: payload for k in keys})
    report(tool, "put_1k", t, count, count * 1024)

    t = time.perf_counter()
    got = fs.cat(keys)
    assert sum(len(v) for v in got.values()) == count * 1024
    report(tool, "get_1k", t, count, count * 1024)

    t = time.perf_counter()
    assert len(fs.ls(f"{prefix}/small", detail=False)) == count
    report(tool, "ls", t, 1, 0)

    t = time.perf_counter()
    fs.rm(f"{prefix}/small", recursive=True)
    report(tool, "rm_recursive", t, count, 0)

    large = bytes(i % 251 for i in range(256)) * (large_mib << 12)
    step = 8 << 20
    t = time.perf_counter()
    with fs.open(f"{prefix}/large.bin", "wb") as f:
        for i in range(0, len(large), step):
            f.write(large[i : i + step])
    report(tool, "put_large", t, 1, len(large))
    t = time.perf_counter()
    data = fs.cat_file(f"{prefix}/large.bin")
    assert len(data) == len(large)
    report(tool, "get_large", t, 1, len(large))
    fs.rm(f"{prefix}/large.bin")


if __name__ == "__main__":
    main(sys.argv[1])
