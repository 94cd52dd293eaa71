"""SIGKILL at random instants, into tables: the job of
crates/cairn-py/tests/ray_job.py (read_parquet -> a slow map_batches ->
cairn.ray's Delta, Iceberg or Lance sink, on local disk) is started, its
driver's process group SIGKILLed after a random delay, and started again,
until a run ends; then the table is read with the format's own library and
every input uid must be there once. Too slow for CI (each run starts a Ray
instance); run it in the ray-venv with the wheel installed:

    RAY_ADDRESS=local ~/.cache/cairn-tools/ray-venv/bin/python scripts/bench/table_kill_loop.py [ROUNDS] [SEED] [keep]

With `keep`, the job keeps its checkpoint on success
(delete_checkpoint_on_success=False): the workaround for a kill while Ray
deletes it (docs/python.md).

Prints one line per round: the format, each kill's instant and the rows
the table showed then, and the verdict."""

import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "..", "crates", "cairn-py", "tests", "ray_job.py")
FILES = 20
ROWS_PER_FILE = 5000
FORMATS = ["delta", "iceberg", "lance"]


def write_input(directory):
    os.makedirs(directory)
    for f in range(FILES):
        start = f * ROWS_PER_FILE
        uids = range(start, start + ROWS_PER_FILE)
        table = pa.table(
            {"uid": pa.array(uids, pa.int64()), "text": [f"row {i}" for i in uids]}
        )
        pq.write_table(table, f"{directory}/part-{f:04}.parquet")


def iceberg_catalog(root):
    return {
        "name": "loop",
        "type": "sql",
        "uri": f"sqlite:///{root}/catalog.db",
        "warehouse": f"file://{root}/warehouse",
    }


def spec_for(root, table_format, keep):
    spec = {
        "input": f"{root}/in",
        "output": f"{root}/table",
        "checkpoint": f"{root}/ckpt",
        "storage_options": {},
        "id_column": "uid",
        "manager": "cairn",
        "sink": table_format,
        "sleep": 0.5,
        "delete_checkpoint_on_success": not keep,
    }
    if table_format == "iceberg":
        from pyiceberg.catalog import load_catalog

        kwargs = iceberg_catalog(root)
        catalog = load_catalog(kwargs.pop("name"), **kwargs)
        catalog.create_namespace("db")
        catalog.create_table(
            "db.t",
            schema=pa.schema([("uid", pa.int64()), ("text", pa.string())]),
            location=f"file://{root}/table",
        )
        spec.update(iceberg_table="db.t", iceberg_catalog=iceberg_catalog(root))
    return spec


def run(spec, kill_after):
    """Runs the job; SIGKILLs its process group after `kill_after` seconds
    (None: never). Returns "done" when it ended with JOB DONE, "killed
    after JOB DONE" when the kill came once the job had printed it (its
    checkpoint already deleted, Ray shutting down), else "killed"."""
    env = dict(os.environ, RAY_DATA_PARQUET_BIN_PACKING_BYTES=str(64 * 1024))
    proc = subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=kill_after)
        return "done" if proc.returncode == 0 and "JOB DONE" in out else "killed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "killed after JOB DONE" if "JOB DONE" in (out or "") else "killed"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def table_uids(root, table_format):
    if table_format == "delta":
        from deltalake import DeltaTable

        read = DeltaTable(f"{root}/table").to_pyarrow_table(columns=["uid"])
    elif table_format == "lance":
        import lance

        read = lance.dataset(f"{root}/table").to_table(columns=["uid"])
    else:
        from pyiceberg.catalog import load_catalog

        kwargs = iceberg_catalog(root)
        table = load_catalog(kwargs.pop("name"), **kwargs).load_table("db.t")
        read = table.scan(selected_fields=("uid",)).to_arrow()
    return collections.Counter(read["uid"].to_pylist())


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    keep = len(sys.argv) > 3 and sys.argv[3] == "keep"
    failures = 0
    for n in range(rounds):
        table_format = FORMATS[n % len(FORMATS)]
        root = tempfile.mkdtemp(prefix=f"cairn-kill-{table_format}-")
        write_input(f"{root}/in")
        spec = spec_for(root, table_format, keep)
        kills = []
        started = time.monotonic()
        # Killed at a random instant up to twice, then run to the end.
        while True:
            # Ray starts and plans for about 12 s before a unit commits.
            kill_after = rng.uniform(12, 26) if len(kills) < 2 else None
            ended = run(spec, kill_after)
            if ended == "done":
                break
            # What the kill left: the rows readers of the table saw then.
            try:
                seen = sum(table_uids(root, table_format).values())
            except Exception:  # no table yet
                seen = 0
            after = " (after JOB DONE)" if ended == "killed after JOB DONE" else ""
            kills.append(
                f"{kill_after:.1f} s, {seen} rows{after}" if kill_after else "failed"
            )
            if kill_after is None:
                break
        counts = table_uids(root, table_format)
        expected = set(range(FILES * ROWS_PER_FILE))
        missing = len(expected - set(counts))
        repeated = sum(1 for v in counts.values() if v != 1)
        verdict = "exactly once" if not missing and not repeated else "WRONG"
        failures += verdict != "exactly once"
        print(
            f"round {n}: {table_format:8} kills at {kills}, {time.monotonic() - started:.0f} s "
            f"in all: {verdict} ({len(counts)} uids, {missing} missing, {repeated} repeated)",
            flush=True,
        )
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
