"""The scale run through the Ray door: a model-shaped Ray Data job over
ROWS rows in FILES Parquet files on Garage, its driver SIGKILLed once 60%
of the rows are committed and run again, with cairn's manager and reader and with
Ray's default manager and reader, same cluster shape, same run.

    RAY_ADDRESS=local ~/.cache/cairn-tools/ray-venv/bin/python scripts/bench/ray_scale_run.py [ROWS] [FILES] [WAYS]

ROWS defaults to 10,000,000 and FILES to 100; WAYS to "cairn,ray". Needs
the servers (scripts/servers.sh start; . target/cairn-servers/servers.env)
and the wheel installed in the ray-venv. Every request goes through a
counting proxy in front of Garage. The job: ``read_parquet`` (cairn's,
which leaves committed row groups out, or Ray's) -> a class on an actor
pool of one actor (the model's shape: loaded once, called per batch) ->
``write_parquet``; one unit per input file; a single Ray node of 3
logical CPUs (on a 2-core machine) started by each driver: Ray's default
filter actor takes one, and with 2 its resume waits for ever (docs/python.md). Reported per way and run: seconds, the driver's
peak resident memory, rows the model was given, input bytes fetched,
requests by area and method, and the peak resident memory of the
checkpoint filter's and shards' actors (Ray worker processes named
``ray::...CheckpointFilter...`` or ``ray::ShardActor...``, sampled every
0.5 s from /proc; pages of the object store's shared memory they touched
count); then exactly once, judged by pyarrow (every input uid once in the
output).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "../../crates/cairn-py/tests")
)
from conftest import garage_options  # noqa: E402
from counting_proxy import CountingProxy  # noqa: E402
from oracle import column_counts, pyarrow_s3  # noqa: E402
from oracle import files as files_under  # noqa: E402

#: The driver, run as a process of its own (one JSON argument).
DRIVER = r"""
import json, os, resource, sys, time
spec = json.loads(sys.argv[1])
import ray, cairn, cairn.ray
from ray.data import DataContext
from ray.data.checkpoint import CheckpointConfig
ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)
options = spec["options"]
fs = cairn.build_checkpoint_filesystem(spec["output"], options)
if spec["way"] == "cairn":
    config = cairn.ray.checkpoint_config("uid", spec["checkpoint"], options)
    read = cairn.ray.read_parquet
else:
    config = CheckpointConfig(
        id_column="uid", checkpoint_path=spec["checkpoint"],
        override_filesystem=cairn.build_checkpoint_filesystem(spec["checkpoint"], options))
    read = ray.data.read_parquet
DataContext.get_current().checkpoint_config = config
seen = spec["seen"]

class Model:
    def __init__(self):
        self.log = open(os.path.join(seen, f"{os.getpid()}-{time.time_ns()}"), "a")

    def __call__(self, batch):
        self.log.write(f"{len(batch['uid'])}\n")
        self.log.flush()
        batch["text"] = batch["text"].str.upper()
        return batch

started = time.monotonic()
ds = read(spec["input"], filesystem=fs)
ds = ds.map_batches(Model, batch_format="pandas", concurrency=1, num_cpus=1)
ds.write_parquet(spec["output"], filesystem=fs)
print(json.dumps({"seconds": time.monotonic() - started,
                  "driver_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
      flush=True)
"""


def write_input(s3, directory, rows, files):
    per = rows // files
    for f in range(files):
        start = f * per
        uids = pa.array(range(start, start + per), pa.int64())
        text = pa.array([f"row {i} of a prompt" for i in range(start, start + per)])
        pq.write_table(
            pa.table({"uid": uids, "text": text}),
            f"{directory}/part-{f:05}.parquet",
            filesystem=s3,
            row_group_size=per,
        )


class CommittedRows:
    """The rows committed in a checkpoint so far: its committed ID files'
    row counts, each file's footer read once (a unit is a write task's
    rows, not an input file's, so units do not count rows)."""

    def __init__(self, s3, checkpoint):
        self.s3, self.checkpoint, self.rows = s3, checkpoint, {}

    def __call__(self):
        for path in files_under(self.s3, self.checkpoint):
            if path.endswith(".parquet") and not path.endswith(".pending.parquet"):
                if path not in self.rows:
                    self.rows[path] = pq.read_metadata(
                        path, filesystem=self.s3
                    ).num_rows
        return sum(self.rows.values())


def by_area(log, source, run):
    """Requests by area (in, out, ckpt) and kind."""
    counts = Counter()
    for method, path, copies in log:
        listing = "list-type" in path or ("prefix=" in path and method == "GET")
        where = path.replace("%2F", "/")
        if f"{source}/in" in where:
            area = "in"
        elif run in where:
            area = (
                where.split(run, 1)[1].lstrip("/").split("/", 1)[0].split("?", 1)[0]
                or "run"
            )
        else:
            area = "other"
        kind = "LIST" if listing else ("COPY" if copies else method)
        counts[f"{area} {kind}"] += 1
    return dict(sorted(counts.items()))


def sample_actor_memory(stop, peaks):
    """Until ``stop`` is set, the largest resident memory (MiB) seen of each
    kind of cairn's actors, into ``peaks``: ``filter`` and ``shard``."""
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")
                if not command.startswith("ray::"):
                    continue
                if "CheckpointFilter" in command:
                    kind = "filter"
                elif "Shard" in command:
                    kind = "shard"
                else:
                    continue
                with open(f"/proc/{pid}/status") as f:
                    rss_kib = next(
                        int(line.split()[1]) for line in f if line.startswith("VmRSS:")
                    )
            except (OSError, StopIteration, ValueError):
                continue  # gone meanwhile
            peaks[kind] = max(peaks.get(kind, 0), round(rss_kib / 1024))
        stop.wait(0.5)


def run_driver(spec, kill_at=None, committed=None, timeout=3600):
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env=dict(os.environ, RAY_DATA_PARQUET_BIN_PACKING_BYTES=str(64 * 1024)),
    )
    started = time.monotonic()
    killed_at = None
    peaks, stop = {}, threading.Event()
    sampler = threading.Thread(
        target=sample_actor_memory, args=(stop, peaks), daemon=True
    )
    sampler.start()
    try:
        if kill_at is not None:
            while proc.poll() is None and time.monotonic() - started < timeout:
                done = committed()
                if done >= kill_at:
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed_at = done
                    break
                time.sleep(0.2)
        out, _ = proc.communicate(
            timeout=max(1, timeout - (time.monotonic() - started))
        )
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stop.set()
        sampler.join()
    seconds = time.monotonic() - started
    report = {
        "exit": proc.returncode,
        "wall_s": round(seconds, 1),
        "killed_at_rows": killed_at,
        "actor_peak_mib": peaks,
    }
    for line in (out or "").splitlines():
        if line.startswith("{"):
            report.update(json.loads(line))
    return report


def rows_seen(directory):
    total = 0
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            total += sum(int(x) for x in f if x.strip())
        os.remove(os.path.join(directory, name))
    return total


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    nfiles = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    ways = (sys.argv[3] if len(sys.argv) > 3 else "cairn,ray").split(",")
    garage = garage_options()
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    s3 = pyarrow_s3(garage)
    seen = f"/tmp/cairn-scale-seen-{uuid.uuid4().hex[:6]}"
    os.makedirs(seen)
    source = f"{bucket}/scale-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    write_input(s3, f"{source}/in", rows, nfiles)
    print(
        f"input: {rows} rows in {nfiles} files, written in {time.monotonic() - started:.1f} s"
    )
    with CountingProxy(garage["endpoint_url"]) as proxy:
        options = dict(garage, endpoint_url=proxy.endpoint)
        for way in ways:
            run = f"{way}-{uuid.uuid4().hex[:6]}"
            spec = {
                "way": way,
                "options": options,
                "input": f"s3://{source}/in",
                "output": f"s3://{source}/{run}/out",
                "checkpoint": f"s3://{source}/{run}/ckpt",
                "checkpoint_path": f"{source}/{run}/ckpt",
                "seen": seen,
            }
            committed = CommittedRows(s3, spec["checkpoint_path"])
            for name, kill_at in (("first", int(rows * 0.6)), ("resume", None)):
                proxy.reset()
                report = run_driver(spec, kill_at=kill_at, committed=committed)
                log = list(proxy.log)
                inputs = sum(n for p, _, n in proxy.get_log if f"{source}/in/" in p)
                report.update(
                    rows_transformed=rows_seen(seen),
                    input_mib_fetched=round(inputs / 2**20, 1),
                    requests=len(log),
                    by_area=by_area(log, source, run),
                    input_requests=sum(1 for _, p, _ in log if f"{source}/in" in p),
                )
                print(json.dumps({"way": way, "run": name, **report}), flush=True)
            counts = column_counts(s3, f"{source}/{run}/out", "uid")
            exact = (
                len(counts) == rows
                and set(counts.values()) == {1}
                and max(counts) == rows - 1
            )
            print(
                json.dumps(
                    {
                        "way": way,
                        "distinct_uids": len(counts),
                        "rows_out": sum(counts.values()),
                        "exactly_once": exact,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
