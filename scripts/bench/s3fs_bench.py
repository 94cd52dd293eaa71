"""The same measurements as benches/src/bin/fs_bench.rs, through s3fs.

Settings from BENCH_* variables; prints one JSON object per measurement.
"""

import json
import os
import time

import s3fs

endpoint = os.environ.get("BENCH_ENDPOINT", "http://127.0.0.1:3900")
bucket = os.environ.get("BENCH_BUCKET", "cairn-test")
count = int(os.environ.get("BENCH_SMALL_COUNT", "2000"))
large_mib = int(os.environ.get("BENCH_LARGE_MIB", "256"))
concurrency = int(os.environ.get("BENCH_CONCURRENCY", "32"))
fs = s3fs.S3FileSystem(
    key=os.environ["BENCH_KEY"],
    secret=os.environ["BENCH_SECRET"],
    client_kwargs={
        "endpoint_url": endpoint,
        "region_name": os.environ.get("BENCH_REGION", "us-east-1"),
    },
    use_listings_cache=False,
)
prefix = f"{bucket}/bench-s3fs-{os.getpid()}"


def report(op, started, ops, nbytes):
    secs = time.perf_counter() - started
    print(
        json.dumps(
            {
                "tool": "s3fs",
                "op": op,
                "seconds": secs,
                "ops_per_s": ops / secs,
                "mib_per_s": nbytes / 1048576 / secs,
            }
        ),
        flush=True,
    )


keys = [f"{prefix}/small/{i:06}" for i in range(count)]
payload = b"\x07" * 1024
t = time.perf_counter()
fs.pipe({k: payload for k in keys}, batch_size=concurrency)
report("put_1k", t, count, count * 1024)

t = time.perf_counter()
got = fs.cat(keys, batch_size=concurrency)
assert sum(len(v) for v in got.values()) == count * 1024
report("get_1k", t, count, count * 1024)

t = time.perf_counter()
assert len(fs.ls(f"{prefix}/small", refresh=True)) == count
report("ls", t, 1, 0)

t = time.perf_counter()
fs.rm(prefix, recursive=True)
report("rm_recursive", t, count, 0)

large = bytes(i % 251 for i in range(256)) * (large_mib << 12)
t = time.perf_counter()
with fs.open(f"{prefix}/large.bin", "wb", block_size=8 << 20) as f:
    for i in range(0, len(large), 8 << 20):
        f.write(large[i : i + (8 << 20)])
report("put_large", t, 1, len(large))
t = time.perf_counter()
data = fs.cat_file(f"{prefix}/large.bin")
assert len(data) == len(large)
report("get_large", t, 1, len(large))
fs.rm(prefix, recursive=True)
