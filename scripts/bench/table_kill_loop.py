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

import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "crates", "cairn-py", "tests"))
# The job, its input and the table's reader are test_ray_tables.py's.
from test_ray import run_job  # noqa: E402
from test_ray_tables import FILES, FORMATS, ROWS_PER_FILE, Table, local_job  # noqa: E402


def run(spec, kill_after):
    """Runs the job; SIGKILLs its process group after `kill_after` seconds
    (None: never). Returns "done" when it ended with JOB DONE, "killed
    after JOB DONE" when the kill came once the job had printed it (its
    checkpoint already deleted, Ray shutting down), else "killed"."""
    deadline = time.monotonic() + (kill_after or 0)

    def past_the_instant():
        return time.monotonic() >= deadline

    code, out = run_job(spec, kill_when=past_the_instant if kill_after else None)
    if code == 0 and "JOB DONE" in out:
        return "done"
    return "killed after JOB DONE" if "JOB DONE" in (out or "") else "killed"


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    keep = len(sys.argv) > 3 and sys.argv[3] == "keep"
    failures = 0
    for n in range(rounds):
        table_format = FORMATS[n % len(FORMATS)]
        root = tempfile.mkdtemp(prefix=f"cairn-kill-{table_format}-")
        spec, _ = local_job(
            root, table_format, sleep=0.5, delete_checkpoint_on_success=not keep
        )
        table = Table(table_format, root)
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
                seen = sum(table.uids().values())
            except Exception:  # no table yet
                seen = 0
            after = " (after JOB DONE)" if ended == "killed after JOB DONE" else ""
            kills.append(
                f"{kill_after:.1f} s, {seen} rows{after}" if kill_after else "failed"
            )
            if kill_after is None:
                break
        counts = table.uids()
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
